"""Every recurring query is served by an index the code creates, as an equality prefix, at most one range and the
sort in the index's order; none holds an operator MongoDB cannot serve from an index ($not, $ne, $nin, $nor,
$where, $expr, an unanchored or case-blind $regex). The queries are the code's own: its functions run against a
database that records what they ask (mongomock underneath), so a query that gains an operator or loses its index
fails here. The table of docs/data-model.md ("Queries and the indexes that serve them") says the same in words."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import mongomock
import pytest

from collector.engine.store import Store, due_query
from collector.monitor import reading
from collector.ops import status
from collector.sinks.store import SinkStore, counts, oldest

from helpers import T0, add_network

FORBIDDEN = {"$not", "$ne", "$nin", "$nor", "$where", "$expr", "$function", "$text"}
RANGE = {"$lt", "$lte", "$gt", "$gte", "$type", "$exists", "$regex", "$options"}
POINTS = {"$eq", "$in"}
# whole-collection reads by design, not on a hot path: named here and in the docs' table
SCANS = {
    ("networks", "aggregate:$group"),  # status and the monitor's work: networks per mode and service
    ("networks", "aggregate:{'leaseOwner': {'$exists': True}}"),  # the same: leases by owner (no index on owner)
}
SMALL = {"sinks", "collectors", "control"}


def operators(query: Any, where: str = "") -> None:
    """Raise AssertionError on an operator no index serves, anywhere in `query`."""
    if isinstance(query, list):
        for part in query:
            operators(part, where)
        return
    if not isinstance(query, dict):
        return
    for key, value in query.items():
        assert key not in FORBIDDEN, f"{where}: {key} cannot use an index"
        if key == "$regex":
            assert isinstance(value, str) and value.startswith("^"), f"{where}: an unanchored $regex"
            assert "i" not in str(query.get("$options", "")), f"{where}: a case-blind $regex"
        if key == "$not" or (key == "$type" and isinstance(value, dict)):
            raise AssertionError(f"{where}: a negated $type")
        operators(value, where)


def kind(condition: Any) -> str:
    """eq (one value or a few points), range (an interval, or intervals of one field), or residual."""
    if not isinstance(condition, dict) or not any(k.startswith("$") for k in condition):
        return "eq"
    ops = set(condition)
    if ops <= POINTS:
        return "eq"
    if ops <= POINTS | RANGE:
        return "range"
    return "residual"


def predicates(query: dict) -> dict[str, str]:
    """Each field the query constrains at its top (through $and, and an $or whose branches all name one field),
    with the kind of condition: what an index's bounds can be built from. Other conditions filter what it reads."""
    found: dict[str, str] = {}

    def add(field: str, k: str) -> None:
        order = ["residual", "eq", "range"]
        found[field] = max(found.get(field, k), k, key=order.index) if field in found and k != "residual" else k

    for key, value in query.items():
        if key == "$and":
            for part in value:
                for field, k in predicates(part).items():
                    add(field, k)
        elif key == "$or":
            fields = {f for branch in value for f in branch}
            if len(fields) == 1 and all(len(b) == 1 for b in value):
                (field,) = fields
                kinds = {kind(b[field]) for b in value}
                add(field, "eq" if kinds == {"eq"} else "range" if "residual" not in kinds else "residual")
        elif not key.startswith("$"):
            add(key, kind(value))
    return found


def served(query: dict, sort: list[tuple[str, int]], index: list[tuple[str, int]]) -> bool:
    """Whether `index` serves the query as an equality prefix, then at most one range, and the sort in its order
    (forwards or backwards) from the first key past the prefix."""
    found = predicates(query)
    used, at = 0, 0
    while at < len(index) and found.get(index[at][0]) == "eq":
        at, used = at + 1, used + 1
    rest = index[at:]
    if sort:
        keys = [k for k, _ in rest[: len(sort)]]
        if keys != [k for k, _ in sort]:
            return False
        same = [d for (_, d), (_, s) in zip(rest, sort, strict=False)]
        if same != [d for _, d in sort] and same != [-d for _, d in sort]:
            return False
        # a walk in the sort's order serves the filter only through the index's own keys: a condition on another
        # field alone (`unauthorized: true` walked in `_id` order) reads every document to find the few
        names = [k for k, _ in index]
        used += bool(rest) and found.get(rest[0][0]) == "range"  # a range on the sort's key bounds the walk
        return used > 0 or all(f in names or any(n.startswith(f + ".") for n in names) for f in found)
    if rest and found.get(rest[0][0]) == "range":
        used += 1
    return used > 0


class Recorder:
    """A mongomock database that writes down each read's collection, filter and sort."""

    def __init__(self, db: Any):
        self.db, self.seen = db, []
        self.codec_options = db.codec_options

    def __getitem__(self, name: str) -> Any:
        return Collection(self, self.db[name])

    def __getattr__(self, name: str) -> Any:
        return Collection(self, self.db[name])


class Cursor:
    def __init__(self, record: dict, cursor: Any):
        self.record, self.cursor = record, cursor

    def sort(self, key: Any, direction: int = 1) -> Cursor:
        self.record["sort"] = [(key, direction)] if isinstance(key, str) else list(key)
        self.cursor = self.cursor.sort(key, direction) if isinstance(key, str) else self.cursor.sort(key)
        return self

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.cursor, name)
        return lambda *a, **kw: (setattr(self, "cursor", method(*a, **kw)), self)[1]

    def __iter__(self):
        return iter(self.cursor)


class Collection:
    def __init__(self, recorder: Recorder, collection: Any):
        self.recorder, self.collection, self.name = recorder, collection, collection.name

    def note(self, op: str, query: Any) -> dict:
        record = {"collection": self.name, "op": op, "filter": query or {}, "sort": []}
        self.recorder.seen.append(record)
        return record

    def find(self, query: Any = None, *args: Any, **kwargs: Any) -> Cursor:
        return Cursor(self.note("find", query), self.collection.find(query, *args, **kwargs))

    def find_one(self, query: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.note("find_one", query)
        return self.collection.find_one(query, *args, **kwargs)

    def aggregate(self, pipeline: list, **kwargs: Any) -> Any:
        match = pipeline[0].get("$match") if pipeline and "$match" in pipeline[0] else None
        self.note("aggregate" if match is not None else "aggregate:$group", match)
        return self.collection.aggregate(pipeline, **kwargs)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.collection, name)
        if name in ("count_documents", "update_many", "update_one", "delete_many", "delete_one", "replace_one"):
            return lambda query, *a, **kw: (self.note(name, query), method(query, *a, **kw))[1]
        return method


def indexes(db: Any) -> dict[str, list[list[tuple[str, int]]]]:
    Store(db).ensure_indexes()
    SinkStore(db).ensure_indexes()
    out: dict[str, list] = {}
    for name in ("networks", "items", "quotas", "collectors", "control", "sinkQueue", "sinkDeadLetters", "sinks"):
        out[name] = [[(k, int(d)) for k, d in ix["key"]] for ix in db[name].index_information().values()]
    return out


def recurring(db: Any) -> list[dict]:
    """Run the code's recurring reads and writes against a recording database: what they asked."""
    for k in range(3):
        add_network(db, user=f"u{k}@x.test", scheduledTo=T0 - timedelta(minutes=k), mode="normal")
    add_network(db, user="odd@x.test", mode="sideways")
    add_network(db, user="off@x.test", disabled=True, scheduledTo=T0 - timedelta(days=1))
    db.items.insert_one({"_id": 1, "user": "u0@x.test", "type": "github", "date": T0, "sinkPending": True})
    recorder = Recorder(db)
    store = Store(recorder)  # type: ignore[arg-type]
    store.mongomock = True
    for mode in ("initial", "normal"):
        store.claim(mode, T0, 10, "box", T0 + timedelta(minutes=5))
        store.claim(mode, T0, 10, "box", T0 + timedelta(minutes=5), ["reddit"], ["github"])
        store.count_due(mode, T0)
        store.odd_modes(T0)
    store.renew([1, 2], "box", T0)
    store.clear_lapsed_leases(T0, beyond=T0 + timedelta(hours=1))
    store.bound_rate_limit_waits(T0, T0)
    store.bound_quota_blocks(T0)
    store.load_quotas(["k"], T0)
    store.pauses()
    store.skip_inactive(["u1@x.test"], "inactive")
    store.revive(["u1@x.test"], "inactive", T0)
    status.gather(recorder, T0, 15)
    reading.read_fleet(recorder, T0)
    reading.read_work(recorder, T0)
    sinks = SinkStore(recorder)
    sinks.pending_items(10)
    sinks.due("a", T0, 10, busy=[{"s": "a", "i": 1}])
    sinks.members("a", ["b1"], busy=[{"s": "a", "i": 1}])
    sinks.sink_names()
    sinks.walk(None, T0, ("github",), 10)
    sinks.queue_size("a")
    counts(recorder, "a", T0)
    oldest(recorder.sinkQueue, "a")
    return recorder.seen


@pytest.fixture
def recorded(db):
    return recurring(db), indexes(mongomock.MongoClient(tz_aware=True)["indexes"])


def test_no_recurring_query_holds_an_operator_no_index_serves(recorded):
    seen, _ = recorded
    assert len(seen) > 40
    for record in seen:
        operators(record["filter"], f"{record['collection']} {record['op']} {record['filter']}")


def test_every_recurring_query_is_served_by_an_index_the_code_creates(recorded):
    seen, declared = recorded
    for record in seen:
        name, query, sort = record["collection"], record["filter"], record["sort"]
        if (name, f"{record['op']}:{query or '{}'}") in SCANS or (name, record["op"]) in SCANS:
            continue
        if name in SMALL and not query:  # read whole, bounded: a document per sink, collector, pause
            continue
        keys = [[("_id", 1)], *declared.get(name, [])]
        assert any(served(query, sort, ix) for ix in keys), f"no index serves {name} {record['op']} {query} {sort}"


OLD_DUE = {  # the due filter before issue 45: what the test exists to refuse
    "mode": {"$nin": ["normal"]},
    "disabled": {"$ne": True},
    "skip": {"$ne": True},
    "unauthorized": {"$ne": True},
    "$and": [
        {"$or": [{"scheduledTo": {"$lte": T0}}, {"scheduledTo": {"$not": {"$type": "date"}}}]},
        {"$or": [{"leaseUntil": {"$lte": T0}}, {"leaseUntil": {"$not": {"$type": "date"}}}]},
    ],
}


@pytest.mark.parametrize(
    "query",
    [
        OLD_DUE,
        {"mode": "normal", "scheduledTo": {"$not": {"$type": "date"}}},
        {"sink": "a", "_id": {"$nin": [1]}},
        {"user": {"$regex": "ann"}},
        {"user": {"$regex": "^ann", "$options": "i"}},
        {"$where": "this.errors > 1"},
        {"$expr": {"$gt": ["$errors", 1]}},
        {"$nor": [{"mode": "normal"}]},
    ],
)
def test_the_check_refuses_an_operator_no_index_serves(query):
    with pytest.raises(AssertionError):
        operators(query, "q")


@pytest.mark.parametrize(
    ("query", "sort", "index", "ok"),
    [
        ({"mode": "normal", "scheduledTo": {"$lte": T0}}, [("scheduledTo", 1)], [("mode", 1), ("scheduledTo", 1)], 1),
        ({"mode": {"$in": [None, "initial"]}, "scheduledTo": {"$lte": T0}}, [], [("mode", 1), ("scheduledTo", 1)], 1),
        ({"scheduledTo": {"$lte": T0}}, [("scheduledTo", 1)], [("mode", 1), ("scheduledTo", 1)], 0),  # no prefix
        ({"mode": "normal"}, [("lastExecution", 1)], [("mode", 1), ("scheduledTo", 1)], 0),  # a sort in memory
        ({"user": "a"}, [], [("mode", 1), ("scheduledTo", 1)], 0),
        ({"heartbeatAt": {"$lte": T0}}, [("heartbeatAt", -1)], [("heartbeatAt", 1)], 1),  # backwards
        ({"sink": "a", "date": {"$gte": T0}}, [("date", 1)], [("sink", 1), ("date", 1)], 1),
        ({"sink": "a"}, [("date", 1), ("_id", 1)], [("sink", 1), ("date", 1)], 0),
        ({"unauthorized": True}, [("_id", 1)], [("_id", 1)], 0),  # the sort's walk, filtered on another field
        ({"unauthorized": True}, [("_id", 1)], [("unauthorized", 1), ("_id", 1)], 1),
    ],
)
def test_served_means_an_equality_prefix_one_range_and_the_sort_in_order(query, sort, index, ok):
    assert served(query, sort, index) == bool(ok)


def test_the_due_query_is_served_by_the_mode_and_schedule_index():
    for mode in ("initial", "normal"):
        query = due_query(mode, T0, 300)
        operators(query, mode)
        assert served(query, [("scheduledTo", 1)], [("mode", 1), ("scheduledTo", 1)])
        assert predicates(query)["scheduledTo"] == "range" and predicates(query)["mode"] == "eq"
