"""The monitor's search read (reading.search) on mongomock: a user by any part of the address as a literal, a
service by its name, a network by its id by equality; bounded in documents (`more`) and in the server's time
(`slow`, the documents read before the bound kept); the filters it sends hold the user's text escaped, never as a
pattern or an operator."""

from __future__ import annotations

import re

import mongomock
import pytest
from bson import ObjectId
from pymongo.errors import ExecutionTimeout

from collector.monitor import reading
from collector.ops.ids import NotAnId


@pytest.fixture
def db():
    db = mongomock.MongoClient(tz_aware=True)["search"]
    db.networks.insert_many(
        [
            {"_id": 777, "user": "ann.smith@corp.test", "service": "github"},
            {"_id": 2, "user": "Bo(b)@x.test", "service": "gist"},
            {"_id": "x7", "user": "cy@x.test", "service": "GitHub-Enterprise"},
            {"_id": {"s": "gh", "i": 3}, "user": "dee@Corp.TEST", "service": "stackoverflow"},
        ]
        + [{"_id": ObjectId(), "user": f"many{n}@bulk.test", "service": "vimeo"} for n in range(reading.FOUND + 3)]
    )
    return db


def users(found: reading.Found) -> list[str]:
    return [n["user"] for n in found.networks]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("smith", ["ann.smith@corp.test"]),
        ("corp.test", ["ann.smith@corp.test", "dee@Corp.TEST"]),  # case ignored, sorted by address
        ("o(b)@", ["Bo(b)@x.test"]),  # a literal: "(b)" is no group
        ("gist", ["Bo(b)@x.test"]),  # a service by its name
        ("GitHub", ["ann.smith@corp.test"]),  # the name as typed, or in lower case
        ("x7", ["cy@x.test"]),  # a string id
        ("777", ["ann.smith@corp.test"]),  # an integer id
        ('{"s": "gh", "i": 3}', ["dee@Corp.TEST"]),  # a compound id
        (".*", []),
        ("^ann", []),
        ("", []),
    ],
)
def test_search_finds_by_part_of_address_service_or_id(db, query, expected):
    found = reading.search(db, query)
    assert users(found) == expected and not found.more and not found.slow


def test_search_stops_at_its_bound_and_says_so(db):
    for query in ("bulk.test", "vimeo", "many"):
        found = reading.search(db, query)
        assert len(found.networks) == reading.FOUND and found.more, query
    found = reading.search(db, "many1")  # many1, many10..many19
    assert len(found.networks) == 11 and not found.more


def test_a_query_given_as_an_id_is_refused(db):
    for query in ('{"$ne": null}', '{"user": {"$regex": "."}}'):
        with pytest.raises(NotAnId):
            reading.search(db, query)


class Cursor:
    """A cursor that yields some documents, then the server's time bound runs out."""

    def __init__(self, docs, sent):
        self.docs, self.sent = docs, sent

    def limit(self, n):
        self.sent["limit"] = n
        return self

    def max_time_ms(self, ms):
        self.sent["maxTimeMS"] = ms
        return self

    def __iter__(self):
        yield from self.docs
        raise ExecutionTimeout("operation exceeded time limit")


class Slow:
    def __init__(self):
        self.filters: list[dict] = []
        self.sent: dict = {}

    def find_one(self, query):
        self.filters.append(query)
        return None

    def find(self, query):
        self.filters.append(query)
        return Cursor([{"_id": len(self.filters), "user": f"u{len(self.filters)}@slow.test"}], self.sent)


@pytest.mark.parametrize("query", ["a.b+c@d", "(x|y)*", "$where", "[z]{2}"])
def test_a_scan_is_bounded_in_time_and_the_users_text_is_escaped(query):
    db = type("DB", (), {"networks": Slow()})()
    found = reading.search(db, query)
    assert found.slow and len(found.networks) == 2  # what was read before the bound is kept
    assert db.networks.sent == {"limit": reading.FOUND + 1, "maxTimeMS": reading.SCAN_MS}
    by_user = next(f["user"] for f in db.networks.filters if "user" in f)
    assert by_user == {"$regex": re.escape(query), "$options": "i"}
    assert re.fullmatch(by_user["$regex"], query)  # the pattern matches the text itself, and only as text
    service = next(f["service"] for f in db.networks.filters if "service" in f)
    assert set(service["$in"]) == {query, query.lower()}
