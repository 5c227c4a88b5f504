"""MongoDB access: the likeastore collections `networks`, `items` and `users`.

Only documented pymongo operations. Item uniqueness on (user, type, itemId) comes from the item `_id`, a
12-byte hash of those three fields, so re-collecting is idempotent and costs no extra index on a fresh database;
the unique index on (user, type, itemId) is created as well, so that items written by the original collector
(random `_id`s) are never duplicated either.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from bson import Decimal128, ObjectId
from pymongo import ASCENDING, UpdateOne
from pymongo.database import Database
from pymongo.errors import (
    BulkWriteError,
    ConnectionFailure,
    DuplicateKeyError,
    ExecutionTimeout,
    OperationFailure,
    PyMongoError,
    WriteError,
    WTimeoutError,
)

log = logging.getLogger(__name__)

DUPLICATE_KEY = 11000
# Fields copied from `users` into each item's `userData`: public profile fields only.
USER_FIELDS = ("email", "name", "displayName", "username", "avatar")


def item_key(user: str, service: str, item_id: str) -> ObjectId:
    digest = hashlib.sha256(f"{user}\x00{service}\x00{item_id}".encode()).digest()
    return ObjectId(digest[:12])


def due_query(mode: str, now: datetime) -> dict[str, Any]:
    """Networks the `mode` collector should run at `now`.

    The initial collector takes every mode but normal (missing, initial, rateLimit, and garbage, which the
    executor then reports); a missing or non-date scheduledTo counts as due. A network leased to a collector
    (leaseUntil in the future) is not due for anyone else until the lease expires.
    """
    modes = {"mode": "normal"} if mode == "normal" else {"mode": {"$nin": ["normal"]}}
    return {
        **modes,
        "disabled": {"$ne": True},
        "skip": {"$ne": True},
        "unauthorized": {"$ne": True},
        "$and": [
            {"$or": [{"scheduledTo": {"$lte": now}}, {"scheduledTo": {"$not": {"$type": "date"}}}]},
            lease_free(now),
        ],
    }


def lease_free(now: datetime) -> dict[str, Any]:
    """No collector holds the network at `now` (no lease, or one that lapsed)."""
    return {"$or": [{"leaseUntil": {"$lte": now}}, {"leaseUntil": {"$not": {"$type": "date"}}}]}


def lease_claim(owner: str, until: datetime) -> tuple[str, dict[str, Any]]:
    """A fresh claim token and the update that leases to `owner` with it (and moves the fence epoch on)."""
    token = uuid.uuid4().hex
    return token, {"$set": {"leaseOwner": owner, "leaseUntil": until, "leaseToken": token}, "$inc": {"leaseEpoch": 1}}


LEASE_FIELDS = ("leaseOwner", "leaseUntil", "leaseToken")
ITEM_KEY = [("user", ASCENDING), ("type", ASCENDING), ("itemId", ASCENDING)]
MAX_EPOCH = 2**62  # an epoch at or beyond this (or not a number) cannot be incremented safely: it is reset
BAD_EPOCH = {
    "$or": [
        {"leaseEpoch": {"$exists": True, "$not": {"$type": "number"}}},
        {"leaseEpoch": {"$type": "array"}},  # [1] matches "number" element-wise
        {"leaseEpoch": {"$gte": MAX_EPOCH}},
        {"leaseEpoch": {"$lte": -MAX_EPOCH}},
    ]
}


def usable_epoch(doc: dict) -> bool:
    """Whether a network's `leaseEpoch`, as read, can be incremented safely (missing counts as usable: `$inc`
    starts it at 1). The complement of BAD_EPOCH, checked client-side to spare a round trip."""
    if "leaseEpoch" not in doc:
        return True
    epoch = doc["leaseEpoch"]
    if isinstance(epoch, Decimal128):
        epoch = epoch.to_decimal()
    elif isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
        return False
    try:
        return -MAX_EPOCH < epoch < MAX_EPOCH
    except TypeError:  # pragma: no cover - a number type Python cannot compare
        return False


def unavailable(exc: BaseException) -> bool:
    """Whether a database error means "the database cannot be reached now" (retry later) rather than "this
    document was refused" (a fault of that one document)."""
    if isinstance(exc, (ConnectionFailure, ExecutionTimeout, WTimeoutError)):
        return True
    if isinstance(exc, PyMongoError) and not isinstance(exc, BulkWriteError):
        return exc.has_error_label("RetryableWriteError") or exc.has_error_label("TransientTransactionError")
    return False


class DatabaseDown(Exception):
    """The database could not be reached; what was being saved is kept and retried."""


StateWrite = tuple[Any, dict, Iterable[str], Any]  # (network id, fields to set, fields to unset, lease epoch)
# every Store method that talks to the database, by the name metrics and logs use for it
OPERATIONS = (
    "beat",
    "forget_instance",
    "save_quotas",
    "load_quotas",
    "clear_lapsed_leases",
    "count_due",
    "ensure_indexes",
    "claim",
    "claim_one",
    "renew",
    "release",
    "users_by_email",
    "insert_items",
    "save_tokens",
    "save_state",
    "save_states",
)
Sink = Callable[[str, float, BaseException | None], None]  # (operation, seconds, the error or None)


def state_update(
    network_id: Any, set_fields: dict, unset_fields: Iterable[str] = (), epoch: Any = None
) -> tuple[dict, dict]:
    """The fenced filter and the update of a state write: set the run's fields, unset the lease."""
    unset = {name: "" for name in (*unset_fields, *LEASE_FIELDS) if name not in set_fields}
    query: dict[str, Any] = {"_id": network_id}
    if epoch is not None:
        query["leaseEpoch"] = epoch
    return query, {"$set": set_fields, "$unset": unset}


def tz_aware(db: Database) -> Database:
    """`db` as one whose datetimes come back timezone-aware in UTC. pymongo's default client returns naive
    datetimes (which are UTC); rather than compare naive with aware deep in the rules, the store reads through a
    tz-aware view of the same database (same client, same connections). mongomock cannot give such a view:
    a mongomock client must be made with tz_aware=True."""
    options = getattr(db, "codec_options", None)
    if options is None or options.tz_aware:
        return db
    if type(db).__module__.startswith("mongomock"):
        raise ValueError("a mongomock database must come from mongomock.MongoClient(tz_aware=True)")
    return db.with_options(codec_options=options.with_options(tz_aware=True, tzinfo=UTC))


class Store:
    def __init__(self, db: Database):
        db = tz_aware(db)
        self.db = db
        self.mongomock = type(db).__module__.startswith("mongomock")
        self.networks = db["networks"]
        self.items = db["items"]
        self.users = db["users"]
        self.quotas = db["quotas"]
        self.collectors = db["collectors"]

    def observe(self, sink: Sink) -> None:
        """Tell `sink` how each database operation went: its name, how long it took, the error it raised. An
        operation made inside another (mongomock's `save_states` through `save_state`) is told once, as the outer
        one."""
        depth = [0]
        for name in OPERATIONS:
            original = getattr(self, name)

            def watched(*args: Any, _original: Callable = original, _name: str = name, **kwargs: Any) -> Any:
                depth[0] += 1
                started = time.perf_counter()
                error: BaseException | None = None
                try:
                    return _original(*args, **kwargs)
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    depth[0] -= 1
                    if not depth[0]:
                        sink(_name, time.perf_counter() - started, error)

            setattr(self, name, watched)

    def beat(self, instance_id: str, doc: dict) -> None:
        """Upsert this collector's heartbeat document."""
        self.collectors.update_one({"_id": instance_id}, {"$set": doc}, upsert=True)

    def forget_instance(self, instance_id: str) -> None:
        self.collectors.delete_one({"_id": instance_id})

    def save_quotas(self, facts: dict[str, Any]) -> None:
        """Share blocking quota facts (by token hash): one upsert each, expiring with the block (TTL index)."""
        for key, fact in facts.items():
            if fact.blocked_until is None:
                continue
            self.quotas.update_one(
                {"_id": key},
                {
                    "$set": {
                        "blockedUntil": fact.blocked_until,
                        "remaining": fact.remaining,
                        "limit": fact.limit,
                        "expiresAt": fact.blocked_until,
                    }
                },
                upsert=True,
            )

    def load_quotas(self, keys: Iterable[str], now: datetime) -> dict[str, tuple[Any, Any, datetime]]:
        """The blocks other collectors shared for these token hashes that still hold at `now`."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        found = self.quotas.find({"_id": {"$in": wanted}, "blockedUntil": {"$gt": now}})
        return {d["_id"]: (d.get("remaining"), d.get("limit"), d["blockedUntil"]) for d in found}

    def clear_lapsed_leases(self, before: datetime, limit: int = 1000) -> tuple[int, dict[str, int]]:
        """Unset the lease fields of networks whose lease lapsed before `before` (their collector died or gave
        up): up to `limit` of them, found through the sparse `leaseToken` index. `leaseEpoch` stays, so a late
        save of the old lease is still fenced as before. Returns how many were cleared and their owners."""
        query = {"leaseToken": {"$exists": True}, "leaseUntil": {"$lt": before}}
        found = list(self.networks.find(query, {"leaseOwner": 1}).limit(limit))
        if not found:
            return 0, {}
        owners: dict[str, int] = {}
        for doc in found:
            owner = str(doc.get("leaseOwner"))[:80]
            owners[owner] = owners.get(owner, 0) + 1
        # the filter is checked again per document: a network claimed meanwhile is left alone
        ids = [d["_id"] for d in found]
        result = self.networks.update_many({**query, "_id": {"$in": ids}}, {"$unset": dict.fromkeys(LEASE_FIELDS, "")})
        return result.modified_count, owners

    def count_due(self, mode: str, now: datetime) -> int:
        """Networks of `mode` due and free at `now` (the backlog), counted on the (mode, scheduledTo) index."""
        return self.networks.count_documents(due_query(mode, now))

    def ensure_indexes(self) -> None:
        self._index(self.networks, [("mode", ASCENDING), ("scheduledTo", ASCENDING)])
        self._index(self.networks, [("leaseToken", ASCENDING)], sparse=True)
        self._index(self.items, ITEM_KEY, unique=True)
        self._index(self.items, [("date", ASCENDING)])  # `collector status`: items of the last hour and day
        self._index(self.quotas, [("expiresAt", ASCENDING)], expireAfterSeconds=0)  # blocks vanish after them
        self._index(self.collectors, [("heartbeatAt", ASCENDING)], expireAfterSeconds=86400)  # silent for a day

    @staticmethod
    def _index(collection, keys, **options) -> None:
        try:
            collection.create_index(keys, **options)
        except OperationFailure as exc:  # e.g. an existing index on the same keys with other options
            log.warning("index %s on %s not created: %s", keys, collection.name, exc)

    def claim(
        self, mode: str, now: datetime, limit: int, owner: str, until: datetime, skip_services: Iterable[str] = ()
    ) -> list[dict]:
        """Lease up to `limit` due networks, the most overdue first, in three round trips: select their ids,
        claim them with one update carrying a fresh claim token (each document's filter re-checks that it is
        still due and free, so two collectors never both win one), and read back what this collector won.
        Each claim increments `leaseEpoch`; the won documents carry the epoch that fences their state save.
        Networks of `skip_services` are left for later (services the caller cannot start more of now).

        One bad document must not break the batch: an epoch that cannot be incremented (not a number, or
        absurdly large) is reset first, and if the batch update still fails, the networks are claimed one by one
        and the one that fails is left out."""
        query = due_query(mode, now)
        skipped = sorted(set(skip_services))
        if skipped:  # services this collector cannot start more of now
            query["service"] = {"$nin": skipped}
        found = list(self.networks.find(query, {"leaseEpoch": 1}).sort("scheduledTo", ASCENDING).limit(limit))
        if not found:
            return []
        ids = [d["_id"] for d in found]
        token, claim = lease_claim(owner, until)
        suspect = [d["_id"] for d in found if not usable_epoch(d)]
        if suspect:  # rare: the filter, not this look, decides what is reset
            repaired = self.networks.update_many({**BAD_EPOCH, "_id": {"$in": suspect}}, {"$set": {"leaseEpoch": 0}})
            if repaired.modified_count:
                log.warning(
                    "%d networks had a leaseEpoch that was not a usable number: reset to 0", repaired.modified_count
                )
        try:
            # the id list last: an in-memory database (mongomock) tests the cheap conditions first
            self.networks.update_many({**query, "_id": {"$in": ids}}, claim)
        except Exception as exc:
            if unavailable(exc):
                raise
            log.warning(
                "claiming %d networks at once failed (%s: %s); claiming them one by one",
                len(ids),
                type(exc).__name__,
                str(exc)[:200],
            )
            self._claim_each(ids, query, claim)
        return list(self.networks.find({"leaseToken": token}).sort("scheduledTo", ASCENDING))

    def claim_one(self, network_id: Any, now: datetime, owner: str, until: datetime) -> dict | None:
        """Lease one network by id, due or not (a run by hand), unless another collector holds it now."""
        token, claim = lease_claim(owner, until)
        self.networks.update_many({"_id": network_id, **BAD_EPOCH}, {"$set": {"leaseEpoch": 0}})
        self.networks.update_one({"_id": network_id, **lease_free(now)}, claim)
        return self.networks.find_one({"_id": network_id, "leaseToken": token})

    def _claim_each(self, ids: list, query: dict, claim: dict) -> None:
        for network_id in ids:
            try:
                self.networks.update_one({"_id": network_id, **query}, claim)
            except Exception as exc:
                if unavailable(exc):
                    raise
                log.error(
                    "network %s cannot be claimed (%s: %s): left out", network_id, type(exc).__name__, str(exc)[:200]
                )

    def renew(self, ids: list, owner: str, until: datetime) -> int:
        """Extend the leases this collector still holds on `ids`."""
        if not ids:
            return 0
        result = self.networks.update_many({"_id": {"$in": ids}, "leaseOwner": owner}, {"$set": {"leaseUntil": until}})
        return result.modified_count

    def release(self, leases: list[tuple[Any, Any]]) -> None:
        """Give back leases of networks that were claimed but not run (e.g. on shutdown)."""
        for network_id, epoch in leases:
            self.networks.update_one(
                {"_id": network_id, "leaseEpoch": epoch}, {"$unset": dict.fromkeys(LEASE_FIELDS, "")}
            )

    def users_by_email(self, emails: Iterable[str]) -> dict[str, dict]:
        wanted = sorted({e for e in emails if isinstance(e, str)})
        if not wanted:
            return {}
        projection = dict.fromkeys(USER_FIELDS, 1) | {"_id": 1}
        found = {}
        for user in self.users.find({"email": {"$in": wanted}}, projection):
            # public profile fields that are plain short text only: a user document is not ours to trust
            data = {f: user[f] for f in USER_FIELDS if isinstance(user.get(f), str) and len(user[f]) <= 1024}
            found[user["email"]] = {"_id": user["_id"], **data}
        return found

    def insert_items(self, items: list[dict]) -> list[tuple[int, int | None, str]]:
        """Insert items in one unordered batch. Returns (index, error code, message) of each item not inserted:
        code 11000 for one stored already, another code (or None) for one the database refused. A database
        that cannot be reached raises; a batch the driver refuses as a whole is retried item by item."""
        if not items:
            return []
        try:
            self.items.insert_many(items, ordered=False)
        except BulkWriteError as exc:
            return [
                (e["index"], e.get("code"), str(e.get("errmsg", ""))[:300]) for e in exc.details.get("writeErrors", [])
            ]
        except Exception as exc:
            if unavailable(exc):
                raise
            log.warning(
                "a batch of %d items was refused as a whole (%s: %s); inserting one by one",
                len(items),
                type(exc).__name__,
                str(exc)[:200],
            )
            return self._insert_each(items)
        return []

    def _insert_each(self, items: list[dict]) -> list[tuple[int, int | None, str]]:
        errors: list[tuple[int, int | None, str]] = []
        for index, item in enumerate(items):
            try:
                self.items.insert_one(item)
            except DuplicateKeyError:
                errors.append((index, DUPLICATE_KEY, "duplicate"))
            except Exception as exc:
                if unavailable(exc):
                    raise
                errors.append((index, getattr(exc, "code", None), f"{type(exc).__name__}: {str(exc)[:200]}"))
        return errors

    def save_tokens(self, network_id: Any, tokens: dict, previous_refresh: Any) -> bool:
        """Write tokens a refresh obtained, on their own and whatever the lease: a rotating refresh token is
        spent once used, so losing the new one locks the user out. Only if the document still holds the refresh
        token that was used (nobody stored newer ones meanwhile)."""
        query: dict[str, Any] = {"_id": network_id}
        if isinstance(previous_refresh, str):
            query["refreshToken"] = previous_refresh
        return self.networks.update_one(query, {"$set": tokens}).matched_count == 1

    def save_state(
        self, network_id: Any, set_fields: dict, unset_fields: Iterable[str] = (), epoch: int | None = None
    ) -> bool:
        """Save a run's state and release its lease. With `epoch`, only if the lease epoch is still the one
        claimed: a collector that lost its lease cannot overwrite newer state. Returns whether it was saved."""
        return self.networks.update_one(*state_update(network_id, set_fields, unset_fields, epoch)).matched_count == 1

    def save_states(self, writes: list[StateWrite]) -> list[bool | Exception]:
        """Save many runs' states in one round trip (`bulk_write` of fenced `UpdateOne`s, unordered). For each
        write: True (saved), False (its lease epoch moved on: refused alone), or the error the database gave that
        document. A database that cannot be reached raises."""
        if not writes:
            return []
        if self.mongomock:  # mongomock 4.3 cannot bulk_write UpdateOne under pymongo >= 4.11 (TypeError)
            return [self._save_one(write) for write in writes]
        ops = [UpdateOne(*state_update(*write)) for write in writes]
        errors: dict[int, Exception] = {}
        try:
            matched = self.networks.bulk_write(ops, ordered=False).matched_count
        except BulkWriteError as exc:
            matched = exc.details.get("nMatched", 0)
            errors = {e["index"]: WriteError(e.get("errmsg", ""), e.get("code")) for e in exc.details["writeErrors"]}
        if matched == len(writes) - len(errors):
            return [errors.get(i, True) for i in range(len(writes))]
        # some writes were fenced off: the documents whose epoch is still ours were saved, the others were not
        epochs = {
            d["_id"]: d.get("leaseEpoch")
            for d in self.networks.find({"_id": {"$in": [w[0] for w in writes]}}, {"leaseEpoch": 1})
        }
        return [errors.get(i, w[3] is None or epochs.get(w[0]) == w[3]) for i, w in enumerate(writes)]

    def _save_one(self, write: StateWrite) -> bool | Exception:
        try:
            return self.save_state(*write)
        except Exception as exc:
            if unavailable(exc):
                raise
            return exc
