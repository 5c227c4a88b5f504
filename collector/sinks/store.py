"""MongoDB for the sinks: the collections `sinkQueue` (one entry per sink and item still to deliver),
`sinkDeadLetters` (what a sink refused for good, with its reason), `sinks` (one document per sink: its kind,
paused, stopped, backfill, counters; and the service's lease, `_id: "~service"`), and the `sinkPending` marker of
`items` (the only write to `items` here: the marker unset once an item is queued for every sink).

A queue entry's `batch` ({id, n, at}) is the batch it is sent in, kept for every retry of it (batches.py).

`SinkStore` is what the sink service writes through, on its one thread; the functions at the end are what the
operator's commands use (pause, resume, replay, sink_docs, counts, dead_letters). Every write is idempotent by
`_id`: doing one twice (after a crash, or a database that went away in the middle) changes nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

from ..engine.store import lease_free, unavailable
from ..sdk.timeutil import as_utc

QUEUE = "sinkQueue"
DEAD = "sinkDeadLetters"
SINKS = "sinks"
SERVICE_ID = "~service"  # the lease document; never a sink name ([a-z][a-z0-9_]*)
SERVICE_LEASE_SECONDS = 30.0  # the service lease's length (sinks/service.py)
PENDING = "sinkPending"
MAX_DOCS = 10_000  # documents of the `sinks` collection read at most (one per sink, and the lease's)
DUPLICATE_KEY = 11000
REASON_MAX = 500  # characters of a dead letter's reason
COUNTS = ("delivered", "deadLettered", "retried", "gone")
FAILED = ("refused", "tooLarge", "rejected", "auth")
CALENDAR = (datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC))  # dates any client can decode
Fields = Mapping[str, Any]


def whole(value: Any) -> int:
    """A count read from a document anyone may have edited: a whole number as it is, anything else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0
    return int(max(0, min(value, 2**62)))


def new_counts() -> dict[str, Any]:
    return {**dict.fromkeys(COUNTS, 0), "failed": dict.fromkeys(FAILED, 0)}


class SinkStore:
    def __init__(self, db: Any):
        self.db = db
        self.items = db["items"]
        self.queue = db[QUEUE]
        self.dead = db[DEAD]
        self.sinks = db[SINKS]

    def ensure_indexes(self) -> None:
        self.items.create_index([(PENDING, ASCENDING)], name="sinkPending_1", sparse=True)
        self.queue.create_index([("sink", ASCENDING), ("nextAt", ASCENDING)])
        self.queue.create_index([("sink", ASCENDING), ("date", ASCENDING)])
        self.queue.create_index([("sink", ASCENDING), ("batch.id", ASCENDING)])  # a batch's entries (batches.py)
        self.dead.create_index([("sink", ASCENDING), ("at", ASCENDING)])

    # --- the sinks' documents -------------------------------------------------------------------------------------
    def sink_docs(self) -> dict[str, dict]:
        """The sinks' documents by name (one a shell gave an `_id` that is no text names no sink: left out)."""
        found = self.sinks.find().limit(MAX_DOCS)  # a handful: the lease's is left out here, not in a `$ne`
        return {doc["_id"]: doc for doc in found if isinstance(doc.get("_id"), str) and doc["_id"] != SERVICE_ID}

    def sink_names(self) -> list[Any]:
        """The ids of the sinks' documents (the registered sinks), nothing else read."""
        return [doc["_id"] for doc in self.sinks.find({}, {"_id": 1}).limit(MAX_DOCS) if doc["_id"] != SERVICE_ID]

    def set_blocked(self, owner: str, names: list[str], now: datetime) -> None:
        """Say in the lease document (while `owner` holds it) which registered sinks its settings do not serve:
        while there are any, the mover queues nothing and unsets no marker (`sinks status`, `status --check`)."""
        change = (
            {"$set": {"blocked": {"owner": owner, "sinks": names, "at": now}}} if names else {"$unset": {"blocked": ""}}
        )
        self.sinks.update_one({"_id": SERVICE_ID, "owner": owner}, change)

    def register(self, name: str, kind: str, backfill: bool, owner: str, now: datetime) -> None:
        """The document of a sink seen for the first time, its backfill started unless `backfill` is false."""
        fields: dict[str, Any] = {"kind": kind, "createdAt": now, "counts": new_counts()}
        if backfill:
            fields["backfill"] = new_walk(None, owner, now)
        try:
            self.sinks.update_one({"_id": name}, {"$setOnInsert": fields}, upsert=True)
        except DuplicateKeyError:  # registered meanwhile by another service: theirs stands
            pass

    def set_kind(self, name: str, kind: str) -> None:
        self.sinks.update_one({"_id": name}, {"$set": {"kind": kind}})

    def stop(self, name: str, reason: str, now: datetime) -> None:
        self.sinks.update_one({"_id": name}, {"$set": {"stopped": {"at": now, "reason": reason}}})

    def add_counts(self, name: str, counts: Mapping[str, int]) -> None:
        """`$inc` the sink's counters: {"delivered": 3, "failed.refused": 1, ...}."""
        inc = {k: v for k, v in counts.items() if v}
        if not inc:
            return
        try:
            self.sinks.update_one({"_id": name}, {"$inc": {f"counts.{k}": v for k, v in inc.items()}})
        except (OperationFailure, TypeError, ValueError) as exc:  # a counter edited into text, `counts` into null
            if unavailable(exc):
                raise
            self._mend_counts(name, inc)

    def _mend_counts(self, name: str, inc: Mapping[str, int]) -> None:
        """The sink's counters set again whole: each one a number kept, anything else 0, plus `inc`."""
        doc = self.sinks.find_one({"_id": name}, {"counts": 1}) or {}
        old: dict = doc["counts"] if isinstance(doc.get("counts"), dict) else {}
        failed: dict = old["failed"] if isinstance(old.get("failed"), dict) else {}
        mended: dict[str, Any] = {k: whole(old.get(k)) + inc.get(k, 0) for k in COUNTS}
        mended["failed"] = {k: whole(failed.get(k)) + inc.get(f"failed.{k}", 0) for k in FAILED}
        self.sinks.update_one({"_id": name}, {"$set": {"counts": mended}})

    def write_stats(self, name: str, stats: Mapping[str, Any]) -> None:
        self.sinks.update_one({"_id": name}, {"$set": {"stats": dict(stats)}})

    # --- the mover ------------------------------------------------------------------------------------------------
    def pending_items(self, limit: int) -> list[dict]:
        return list(self.items.find({PENDING: True}, {"_id": 1, "type": 1, "date": 1}).limit(limit))

    def enqueue(self, entries: list[dict]) -> None:
        """Insert queue entries, those already there left as they are; anything else raises."""
        if not entries:
            return
        try:
            self.queue.insert_many(entries, ordered=False)
        except BulkWriteError as exc:
            others = [e for e in exc.details.get("writeErrors", []) if e.get("code") != DUPLICATE_KEY]
            if others:
                raise

    def unmark(self, ids: list[Any]) -> None:
        if ids:
            self.items.update_many({"_id": {"$in": ids}}, {"$unset": {PENDING: ""}})

    def outbox_pending(self) -> int:
        return int(self.items.count_documents({PENDING: True}))

    # --- backfill and replay --------------------------------------------------------------------------------------
    def walk(self, cursor: Any, since: datetime | None, services: tuple[str, ...], limit: int) -> list[dict]:
        """Items after `cursor` in `_id` order (dated `since` or later, of `services` when given). Only ObjectId
        `_id`s (what both collectors write): MongoDB compares within one type, so a walk that met a text `_id` a
        shell wrote would stop there, before every ObjectId. A cursor of another type (a hand-edited document)
        starts the walk again."""
        query: dict[str, Any] = {"_id": {"$type": "objectId"}}
        if isinstance(cursor, ObjectId):
            query["_id"] = {"$gt": cursor, "$type": "objectId"}
        if since is not None:
            query["date"] = {"$gte": since}
        if services:
            query["type"] = {"$in": list(services)}
        found = self.items.find(query, {"_id": 1, "type": 1, "date": 1}).sort("_id", ASCENDING).limit(limit)
        return list(found)

    def advance(self, name: str, cursor: Any, enqueued: int, done_at: datetime | None, walk_id: Any = None) -> None:
        """The walk `walk_id` (None: a walk from before walks had ids) went on to `cursor`, done at `done_at`. A
        walk a replay replaced meanwhile (another id) is left as it is: the replay is not marked done by the old
        walk's last step, nor given its cursor."""
        fields: dict[str, Any] = {"backfill.cursor": cursor}
        if done_at is not None:
            fields["backfill.doneAt"] = done_at
        query = {"_id": name, "backfill.id": walk_id}  # None matches a walk without an id only
        self.sinks.update_one(query, {"$set": fields, "$inc": {"backfill.enqueued": enqueued}})

    def queue_size(self, name: str, limit: int = 0) -> int:
        """The sink's queue entries (counted up to `limit` when given: "at least that many")."""
        options = {"limit": limit} if limit else {}
        return int(self.queue.count_documents({"sink": name}, **options))

    # --- delivery -------------------------------------------------------------------------------------------------
    def due(self, name: str, now: datetime, limit: int, busy: Iterable[Any] = ()) -> list[dict]:
        """Entries of the sink due at `now`, the earliest due first, leaving out those in `busy` (in flight)."""
        query: dict[str, Any] = {"sink": name, "nextAt": {"$lte": now}}  # the (sink, nextAt) index, in its order
        busy = list(busy)  # left out here, not in a `$nin` no index serves: read past them
        found = self.queue.find(query).sort("nextAt", ASCENDING).limit(limit + len(busy))
        return [entry for entry in found if entry["_id"] not in busy][:limit]

    def members(self, name: str, batches: list[str], busy: Iterable[Any] = ()) -> list[dict]:
        """Every entry of the sink in one of `batches` (by their `batch.id`), due or not, less those in `busy`."""
        if not batches:
            return []
        busy = list(busy)  # left out here, not in a `$nin`
        found = self.queue.find({"sink": name, "batch.id": {"$in": batches}})  # the (sink, batch.id) index
        return [entry for entry in found if entry["_id"] not in busy]

    def set_batch(self, ids: list[dict], batch: Fields) -> None:
        """The entries `ids` form the batch `batch` ({id, n, at}): one write, before anything is sent."""
        if ids:
            self.queue.update_many({"_id": {"$in": ids}}, {"$set": {"batch": dict(batch)}})

    def load_items(self, ids: list[Any]) -> dict[Any, dict]:
        return {item["_id"]: item for item in self.items.find({"_id": {"$in": ids}})} if ids else {}

    def delete(self, ids: list[dict]) -> None:
        if ids:
            self.queue.delete_many({"_id": {"$in": ids}})

    def reschedule(
        self, entry: Fields, next_at: datetime, error: Fields, reject: bool, batch: Fields | None = None
    ) -> None:
        """The entry due again at `next_at`, one more try (and reject), in the batch `batch` (None: in none, its
        next batch formed anew); its counts set from what was read (a count edited into text counts as 0: `$inc`
        would fail on it every time)."""
        fields = {"nextAt": next_at, "lastError": dict(error), "tries": whole(entry.get("tries")) + 1}
        if reject:
            fields["rejects"] = whole(entry.get("rejects")) + 1
        change: dict[str, Any] = {"$set": fields}
        if batch is not None:
            fields["batch"] = dict(batch)
        else:
            change["$unset"] = {"batch": ""}
        self.queue.update_one({"_id": entry["_id"]}, change)

    def dead_letter(self, entry: Mapping[str, Any], reason: str, status: int | None, now: datetime) -> None:
        """Move an entry to sinkDeadLetters (replacing one there for the same sink and item), then delete it."""
        letter = {
            "_id": entry["_id"],
            "sink": entry.get("sink"),
            "item": entry.get("item"),
            "reason": reason[:REASON_MAX],
            "tries": whole(entry.get("tries")) + 1,
            "rejects": whole(entry.get("rejects")) + 1,
            "at": now,
        }
        if status is not None:
            letter["status"] = status
        self.dead.replace_one({"_id": entry["_id"]}, letter, upsert=True)
        self.queue.delete_one({"_id": entry["_id"]})

    def oldest_date(self, name: str) -> datetime | None:
        """The date the sink's lag counts from (`oldest`)."""
        return oldest(self.queue, name)

    # --- the service's lease --------------------------------------------------------------------------------------
    def hold_lease(self, owner: str, host: str, pid: int, now: datetime, seconds: float) -> bool:
        """Renew the lease when `owner` holds it, else take it when it lapsed, was never taken, or ends further
        ahead than a lease of `seconds` reaches (engine/store lease_horizon: no holder that renews wrote it): True
        when `owner` holds it now. Taking it increases `epoch`."""
        until = now + timedelta(seconds=seconds)
        renewed = self.sinks.update_one(
            {"_id": SERVICE_ID, "owner": owner, "leaseUntil": {"$gte": now}},
            {"$set": {"leaseUntil": until, "beatAt": now}},
        )
        if renewed.matched_count:
            return True
        fields = {"owner": owner, "host": host, "pid": pid, "leaseUntil": until, "beatAt": now, "since": now}
        # lapsed, never taken, ending further ahead than a lease reaches, or a `leaseUntil` a shell made something
        # else than a date (no service could renew those: every service would stand by for ever)
        lapsed = lease_free(now, seconds)
        try:
            self.sinks.update_one({"_id": SERVICE_ID, **lapsed}, {"$set": fields, "$inc": {"epoch": 1}}, upsert=True)
        except DuplicateKeyError:  # held by another, who renewed it
            return False
        return True

    def release_lease(self, owner: str, now: datetime) -> None:
        self.sinks.update_one({"_id": SERVICE_ID, "owner": owner}, {"$set": {"leaseUntil": now}})

    def lease(self) -> dict | None:
        return self.sinks.find_one({"_id": SERVICE_ID})


# --- the operator's commands (ops/sinks.py) ------------------------------------------------------------------------
def sink_docs(db: Any) -> list[dict]:
    """Every sink's document, by name (the lease document left out)."""
    return [d for d in db[SINKS].find().sort("_id", ASCENDING).limit(MAX_DOCS) if d.get("_id") != SERVICE_ID]


def lease_doc(db: Any) -> dict | None:
    """The service's lease: owner, host, pid, leaseUntil, epoch, beatAt (None: no sink service ever ran)."""
    return db[SINKS].find_one({"_id": SERVICE_ID})


def pause(db: Any, name: str, by: str, reason: str, now: datetime) -> bool:
    """Pause a sink: its queue keeps growing, nothing is delivered. False when there is no such sink."""
    paused = {"at": now, "by": by, "reason": reason[:REASON_MAX]}
    return bool(db[SINKS].update_one({"_id": _name(name)}, {"$set": {"paused": paused}}).matched_count)


def resume(db: Any, name: str, now: datetime) -> bool:
    """Resume a paused or stopped sink (the service prepares it again). False when there is no such sink."""
    found = db[SINKS].update_one({"_id": _name(name)}, {"$unset": {"paused": "", "stopped": ""}})
    return bool(found.matched_count)


def new_walk(since: datetime | None, by: str, now: datetime) -> dict[str, Any]:
    """A backfill (`since` None: every item) or replay walk, from the start; its id tells it from the next one."""
    return {"id": ObjectId(), "since": since, "cursor": None, "startedAt": now, "by": by, "enqueued": 0}


def replay(db: Any, name: str, since: datetime | None, by: str, now: datetime) -> dict[str, Any] | None:
    """Enqueue again, at the sink's pace, every item dated `since` or later (None: every item): the walk written,
    or None when there is no such sink. A walk under way is not lost: the new one starts from the first item and
    covers both (from the earlier of the two dates; its `joined` says which walk it took over)."""
    sinks, name = db[SINKS], _name(name)
    for _ in range(20):  # compare and swap: a walk that changed meanwhile (the service, another replay) is read again
        doc = sinks.find_one({"_id": name}, {"backfill": 1})
        if doc is None:
            return None
        old = doc.get("backfill")
        walk = new_walk(since, by, now)
        if isinstance(old, dict) and not old.get("doneAt"):
            walk["since"] = earlier(since, old.get("since"))
            walk["joined"] = {k: old.get(k) for k in ("since", "startedAt", "by", "enqueued")}
        if sinks.update_one({"_id": name, **same_walk(doc)}, {"$set": {"backfill": walk}}).matched_count:
            return walk
    walk = new_walk(None, by, now)  # the walk never held still: every item, which covers whatever it was
    found = sinks.update_one({"_id": name}, {"$set": {"backfill": walk}}).matched_count
    return walk if found else None


def same_walk(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A filter matching the sink's document only while it holds the walk `doc` holds: by its id, else (a walk
    from before ids, or whatever a shell wrote) by its whole value."""
    old = doc.get("backfill")
    if isinstance(old, dict) and isinstance(old.get("id"), ObjectId):
        return {"backfill.id": old["id"]}
    return {"backfill": old} if "backfill" in doc else {"backfill": {"$exists": False}}


def earlier(since: datetime | None, other: Any) -> datetime | None:
    """The earlier of two walks' dates; None (every item) when either is (a date that is no datetime: every item,
    as the walk reads it)."""
    if since is None or not isinstance(other, datetime):
        return None
    return min(as_utc(since), as_utc(other))


def forget(db: Any, name: str) -> int | None:
    """A sink removed from the settings on purpose: its queue entries, then its document, deleted (its dead letters
    kept). The queue entries deleted, or None when there is no such sink."""
    name = _name(name)
    if db[SINKS].find_one({"_id": name}, {"_id": 1}) is None:
        return None
    queued = int(db[QUEUE].delete_many({"sink": name}).deleted_count)
    db[SINKS].delete_one({"_id": name})
    return queued


def counts(db: Any, name: str, now: datetime | None = None) -> dict[str, Any]:
    """What waits for a sink: backlog (queue entries), due (of them, due by `now`), deadLetters, and the date of
    the oldest entry (`oldest`, None when the queue is empty)."""
    queue, name = db[QUEUE], _name(name)
    out = {
        "backlog": int(queue.count_documents({"sink": name})),
        "deadLetters": int(db[DEAD].count_documents({"sink": name})),
        "oldest": oldest(queue, name),
    }
    if now is not None:
        out["due"] = int(queue.count_documents({"sink": name, "nextAt": {"$lte": now}}))
    return out


def oldest(queue: Any, name: Any) -> datetime | None:
    """The earliest `date` among the sink's queue entries, which its lag counts from (the metric, the stats and
    `collector sinks status` alike): a new item's since it was stored, a backfill's or replay's entry's since it
    was queued (mover.queue_entry). Dates only, within Python's calendar: a text or an odd date a shell wrote
    (text sorts before every date) would hide the real lag."""
    dates = {"$type": "date", "$gte": CALENDAR[0], "$lte": CALENDAR[1]}
    first = list(queue.find({"sink": name, "date": dates}, {"date": 1}).sort("date", ASCENDING).limit(1))
    date = first[0].get("date") if first else None
    return date if isinstance(date, datetime) else None


def dead_letters(db: Any, name: str, limit: int = 20) -> list[dict]:
    """The sink's dead letters, the newest first."""
    return list(db[DEAD].find({"sink": _name(name)}).sort("at", DESCENDING).limit(max(1, int(limit))))


def outbox_pending(db: Any) -> int:
    """Items marked for the sinks and not yet queued by the sink service."""
    return int(db["items"].count_documents({PENDING: True}))


def _name(name: str) -> str:
    if not isinstance(name, str) or name == SERVICE_ID:
        raise ValueError("not a sink name")
    return name
