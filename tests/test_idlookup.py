"""The bench's `_id` index for mongomock (devtools/idlookup.py) answers exactly what mongomock's scan answers."""

from __future__ import annotations

import mongomock
from bson import ObjectId
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.devtools import idlookup

from helpers import examples

OIDS = [ObjectId(f"{i:024x}") for i in range(6)]
IDS = [*OIDS, "a", "b", 3, 4.0, True, {"s": "x", "i": OIDS[0]}, {"s": "y", "i": OIDS[0]}, {"s": "x", "i": "a"}]
IDS += [{"i": OIDS[0], "s": "x"}, {"s": "x", "i": 3}, {"s": "x"}]  # the fields the other way round; not looked up
queries = st.one_of(
    st.sampled_from(IDS).map(lambda v: {"_id": v}),
    st.lists(st.sampled_from(IDS), max_size=4).map(lambda vs: {"_id": {"$in": vs}}),
    st.tuples(st.sampled_from(IDS), st.integers(0, 2)).map(lambda t: {"_id": t[0], "epoch": t[1]}),
    st.lists(st.sampled_from(IDS), max_size=3).map(lambda vs: {"_id": {"$in": vs}, "epoch": {"$ne": 1}}),
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(IDS), st.integers(0, 2)), max_size=8), queries)
def test_an_id_query_finds_what_the_scan_finds(docs, query):
    coll = mongomock.MongoClient().db.c
    for _id, epoch in docs:
        coll.update_one({"_id": _id}, {"$set": {"epoch": epoch}}, upsert=True)
    scanned = sorted(map(repr, coll.find(query)))
    with idlookup.installed():
        looked_up = sorted(map(repr, coll.find(query)))
        coll.update_many(query, {"$inc": {"seen": 1}})
        updated = sorted(map(repr, coll.find({"seen": 1})))
    assert looked_up == scanned
    assert updated == sorted(map(repr, coll.find(query)))  # (scanned again) every match updated, only those


VALUES = [None, "x", "y", OIDS[1], 1, ["x"], ["y", "x"], {"k": "x"}]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(VALUES), st.sampled_from(VALUES), st.booleans()), max_size=8))
def test_a_unique_index_refuses_what_mongomocks_own_check_refuses(writes):
    """Inserts and updates under a unique index on (a, b): refused and stored alike, looked up or scanned."""

    def apply(coll) -> list:
        said = []
        for number, (a, b, update) in enumerate(writes):
            try:
                if update:  # the last document written takes these values
                    coll.update_many({"n": number - 1}, {"$set": {"a": a, "b": b}})
                else:
                    coll.insert_one({"_id": number, "n": number, "a": a, "b": b})
                said.append("ok")
            except mongomock.DuplicateKeyError:
                said.append("duplicate")
        return [said, sorted(map(repr, coll.find()))]

    plain, looked_up = mongomock.MongoClient().db.c, mongomock.MongoClient().db.c
    for coll in (plain, looked_up):
        coll.create_index([("a", 1), ("b", 1)], unique=True)
    before = mongomock.collection.Collection._ensure_uniques  # (an in-process bench earlier may have installed it)
    with idlookup.installed():
        scanned_with_lookup = apply(looked_up)
    assert mongomock.collection.Collection._ensure_uniques is before  # put back as it was
    mongomock.collection.Collection._ensure_uniques = idlookup._original_uniques
    try:
        scanned = apply(plain)  # mongomock's own check
    finally:
        mongomock.collection.Collection._ensure_uniques = before
    assert scanned_with_lookup == scanned


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"])), max_size=12),
    st.lists(st.integers(0, 11), max_size=6),
    st.integers(1, 5),
    st.sampled_from([None, {"nextAt": 1}, {"sink": 1, "tries": True}]),
    st.booleans(),
)
def test_the_stand_ins_sorted_first_answers_what_mongomock_answers(entries, busy, limit, projection, sort):
    """A sink's due entries (sorted, limited, those in flight left out by `$nin`) from the stand-in's quick path
    and from mongomock: the same documents, in the same order (ties included)."""
    from collector.devtools.mongoquick import sorted_first

    coll = mongomock.MongoClient().db.q
    docs = [
        {"_id": {"s": sink, "i": OIDS[n % 6]}, "sink": sink, "nextAt": due, "tries": n}
        for n, (due, sink) in enumerate(entries)
    ]
    for doc in docs:
        coll.update_one({"_id": doc["_id"]}, {"$set": doc}, upsert=True)
    left_out = [docs[n]["_id"] for n in busy if n < len(docs)]
    query = {"nextAt": {"$lte": 2}, **({"_id": {"$nin": left_out}} if left_out else {})}
    command = {"filter": query, "sort": {"nextAt": 1}, "limit": limit, "projection": projection}
    if sort:
        expected = list(coll.find(query, projection).sort([("nextAt", 1)]).limit(limit))
    else:  # the mover's marked items: a limit only (and no `$nin`)
        query = command["filter"] = {"nextAt": {"$lte": 2}}
        del command["sort"]
        expected = list(coll.find(query, projection).limit(limit))
    with idlookup.installed():
        assert sorted_first(coll, command) == expected
    assert sorted_first(coll, command) == expected  # plain mongomock too (the stand-in of the tests)
