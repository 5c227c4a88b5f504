"""sinks/store.py: the sinks' collections and what the service and the operator's commands write there — the
sparse marker index, idempotent enqueues, the outcomes' writes, the service lease, pause, resume, replay, counts
and dead letters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bson import ObjectId

from collector.sinks import store as sinks_store
from collector.sinks.mover import entry_id
from collector.sinks.store import DEAD, QUEUE, SERVICE_ID, SinkStore

from helpers import T0
from helpers.fakesink import add_items


def entry(sink, item, **fields):
    doc = {"_id": entry_id(sink, item), "sink": sink, "item": item, "date": T0, "at": T0, "nextAt": T0}
    return doc | {"tries": 0, "rejects": 0} | fields


def test_the_indexes_are_made_the_marker_one_sparse(db):
    SinkStore(db).ensure_indexes()
    SinkStore(db).ensure_indexes()  # twice: the same
    items = db.items.index_information()
    assert items["sinkPending_1"].get("sparse") is True
    assert {tuple(i["key"]) for i in db[QUEUE].index_information().values()} >= {
        (("sink", 1), ("nextAt", 1)),
        (("sink", 1), ("date", 1)),
    }
    assert (("sink", 1), ("at", 1)) in {tuple(i["key"]) for i in db[DEAD].index_information().values()}


def test_an_entry_enqueued_twice_is_one_entry_left_as_it_was(db):
    store = SinkStore(db)
    store.enqueue([entry("a", 1), entry("a", 2)])
    store.reschedule(entry("a", 1), T0 + timedelta(seconds=9), {"kind": "refused"}, reject=False)
    store.enqueue([entry("a", 1), entry("a", 3), entry("b", 1)])
    assert db[QUEUE].count_documents({}) == 4
    assert db[QUEUE].find_one({"_id": entry_id("a", 1)})["tries"] == 1


def test_register_keeps_the_first_document_and_starts_a_backfill_unless_told_not_to(db):
    store = SinkStore(db)
    store.register("a", "fake", True, "one", T0)
    store.register("a", "other", False, "two", T0 + timedelta(hours=1))
    store.register("b", "fake", False, "one", T0)
    docs = store.sink_docs()
    assert docs["a"]["kind"] == "fake" and docs["a"]["backfill"]["by"] == "one"
    assert docs["a"]["counts"]["failed"] == {"refused": 0, "tooLarge": 0, "rejected": 0, "auth": 0}
    assert "backfill" not in docs["b"]
    store.add_counts("a", {"delivered": 3, "failed.refused": 2, "gone": 0})
    store.add_counts("a", {"delivered": 1})
    counts = store.sink_docs()["a"]["counts"]
    assert counts["delivered"] == 4 and counts["failed"]["refused"] == 2


def test_outcome_writes_delete_reschedule_and_dead_letter(db):
    store = SinkStore(db)
    store.enqueue([entry("a", i) for i in range(4)])
    store.delete([entry_id("a", 0)])
    store.reschedule(entry("a", 1), T0 + timedelta(seconds=5), {"kind": "rejected", "message": "400"}, reject=True)
    first = db[QUEUE].find_one({"_id": entry_id("a", 2)})
    store.dead_letter(first, "400 " + "x" * 900, 400, T0)
    store.dead_letter(first, "400 again", 400, T0)  # done twice: one letter
    assert {e["item"] for e in db[QUEUE].find()} == {1, 3}
    again = db[QUEUE].find_one({"_id": entry_id("a", 1)})
    assert (again["tries"], again["rejects"], again["nextAt"]) == (1, 1, T0 + timedelta(seconds=5))
    (letter,) = sinks_store.dead_letters(db, "a")
    assert letter["reason"] == "400 again" and letter["status"] == 400 and letter["item"] == 2
    store.dead_letter(db[QUEUE].find_one({"_id": entry_id("a", 3)}), "y" * 900, None, T0)
    assert len(db[DEAD].find_one({"_id": entry_id("a", 3)})["reason"]) == sinks_store.REASON_MAX


def test_due_entries_come_earliest_first_without_those_in_flight(db):
    store = SinkStore(db)
    store.enqueue([entry("a", i, nextAt=T0 + timedelta(seconds=i)) for i in range(5)] + [entry("b", 9)])
    due = store.due("a", T0 + timedelta(seconds=3), 10, busy=[entry_id("a", 1)])
    assert [e["item"] for e in due] == [0, 2, 3]
    assert [e["item"] for e in store.due("a", T0 + timedelta(seconds=9), 2)] == [0, 1]


def test_the_mover_reads_marked_items_and_unmarks_them(db):
    add_items(db, 3)
    add_items(db, 2, marked=False, start=10)
    store = SinkStore(db)
    pending = store.pending_items(10)
    assert len(pending) == 3 and set(pending[0]) == {"_id", "type", "date"}
    store.unmark([p["_id"] for p in pending[:2]])
    assert store.outbox_pending() == 1 == sinks_store.outbox_pending(db)


def test_the_walk_goes_in_id_order_after_its_cursor_since_a_date_and_by_service(db):
    add_items(db, 4, marked=False, date=T0)
    add_items(db, 4, marked=False, start=10, date=T0 + timedelta(days=2))
    add_items(db, 2, marked=False, start=20, service_name="reddit", date=T0 + timedelta(days=2))
    store = SinkStore(db)
    every = store.walk(None, None, (), 100)
    ids = [i["_id"] for i in every]
    assert ids == sorted(ids) and len(ids) == 10
    assert [i["_id"] for i in store.walk(ids[3], None, (), 3)] == ids[4:7]
    recent = store.walk(None, T0 + timedelta(days=1), ("github",), 100)
    assert len(recent) == 4 and all(i["date"] > T0 and i["type"] == "github" for i in recent)


def test_the_lease_is_held_by_one_renewed_and_taken_over_once_lapsed(db):
    store = SinkStore(db)
    assert store.hold_lease("one", "h1", 1, T0, 60)
    assert not store.hold_lease("two", "h2", 2, T0 + timedelta(seconds=30), 60)
    assert store.hold_lease("one", "h1", 1, T0 + timedelta(seconds=50), 60)  # renewed to 110 s
    assert not store.hold_lease("two", "h2", 2, T0 + timedelta(seconds=100), 60)
    assert store.hold_lease("two", "h2", 2, T0 + timedelta(seconds=111), 60)
    lease = sinks_store.lease_doc(db)
    assert (lease["owner"], lease["host"], lease["pid"], lease["epoch"]) == ("two", "h2", 2, 2)
    assert not store.hold_lease("one", "h1", 1, T0 + timedelta(seconds=120), 60)  # the stale holder lost it
    store.release_lease("two", T0 + timedelta(seconds=121))
    assert store.hold_lease("one", "h1", 1, T0 + timedelta(seconds=122), 60)
    assert sinks_store.lease_doc(db)["epoch"] == 3
    assert SERVICE_ID not in store.sink_docs() and sinks_store.sink_docs(db) == []


def test_pause_resume_and_replay_for_the_operator(db):
    store = SinkStore(db)
    store.register("a", "fake", False, "one", T0)
    assert not sinks_store.pause(db, "nope", "ann", "why", T0)
    assert sinks_store.pause(db, "a", "ann", "maintenance", T0)
    store.stop("a", "401", T0)
    doc = store.sink_docs()["a"]
    assert doc["paused"] == {"at": T0, "by": "ann", "reason": "maintenance"} and doc["stopped"]["reason"] == "401"
    assert sinks_store.resume(db, "a", T0)
    assert not {"paused", "stopped"} & set(store.sink_docs()["a"])
    assert sinks_store.replay(db, "a", T0, "ann", T0 + timedelta(hours=1))
    walk = store.sink_docs()["a"]["backfill"]
    assert isinstance(walk.pop("id"), ObjectId)  # tells this walk from the next one
    assert walk == {"since": T0, "cursor": None, "startedAt": T0 + timedelta(hours=1), "by": "ann", "enqueued": 0}
    with pytest.raises(ValueError):
        sinks_store.pause(db, SERVICE_ID, "ann", "", T0)


def test_counts_tell_the_backlog_what_is_due_the_dead_letters_and_the_oldest(db):
    store = SinkStore(db)
    store.enqueue([entry("a", i, date=T0 + timedelta(minutes=i), nextAt=T0 + timedelta(minutes=i)) for i in range(3)])
    store.dead_letter(entry("a", 7), "400", 400, T0)
    counts = sinks_store.counts(db, "a", now=T0 + timedelta(minutes=1))
    assert counts == {"backlog": 3, "deadLetters": 1, "oldest": T0, "due": 2}
    assert sinks_store.counts(db, "b") == {"backlog": 0, "deadLetters": 0, "oldest": None}
    assert store.oldest_date("a") == T0 and store.queue_size("a") == 3 and store.queue_size("a", limit=2) == 2
