"""The store's pure parts: the filters and updates of the lease protocol and of state writes, the item key, and
what a database error means (unreachable, or one document refused). No I/O here."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from bson import Decimal128, ObjectId
from pymongo import ASCENDING
from pymongo.errors import BulkWriteError, ConnectionFailure, ExecutionTimeout, PyMongoError, WTimeoutError

from ...sdk.timeutil import as_utc

DUPLICATE_KEY = 11000
LEASE_DEFAULT = 300.0  # seconds: LEASE_SECONDS's default, for readers not told the setting
LEASE_SKEW = 60.0  # seconds a lease's end may lie past its length ahead (clocks differ): further, it is stale
# Fields copied from `users` into each item's `userData`: public profile fields only.
USER_FIELDS = ("email", "name", "displayName", "username", "avatar")


def item_key(user: str, service: str, item_id: str) -> ObjectId:
    digest = hashlib.sha256(f"{user}\x00{service}\x00{item_id}".encode()).digest()
    return ObjectId(digest[:12])


def due_query(mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """Networks the `mode` collector should run at `now`.

    The initial collector takes every mode but normal (missing, initial, rateLimit, and garbage, which the
    executor then reports); a missing or non-date scheduledTo counts as due. A network leased to a collector
    (leaseUntil in the future, no further ahead than a lease of `lease_seconds` can reach: `lease_free`) is not
    due for anyone else until the lease expires.
    """
    modes = {"mode": "normal"} if mode == "normal" else {"mode": {"$nin": ["normal"]}}
    return {
        **modes,
        "disabled": {"$ne": True},
        "skip": {"$ne": True},
        "unauthorized": {"$ne": True},
        "$and": [
            {"$or": [{"scheduledTo": {"$lte": now}}, {"scheduledTo": {"$not": {"$type": "date"}}}]},
            lease_free(now, lease_seconds),
        ],
    }


def lease_horizon(now: datetime, lease_seconds: float) -> datetime:
    """The furthest end a live lease of `lease_seconds` can have at `now`: a holder that renews writes `now +
    lease_seconds`; LEASE_SKEW more for clocks that differ. An end beyond it was written by no holder that
    renews (a clock far off, a shell, a program of another time): the lease is stale and free to take."""
    return now + timedelta(seconds=max(float(lease_seconds), 0.0) + LEASE_SKEW)


def lease_free(now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """No collector holds the network at `now`: no lease, one that lapsed, one whose end lies further ahead than
    a lease of `lease_seconds` reaches (`lease_horizon`), or a `leaseUntil` that is no date. Ranges on
    `leaseUntil` only."""
    return {
        "$or": [
            {"leaseUntil": {"$lte": now}},
            {"leaseUntil": {"$gt": lease_horizon(now, lease_seconds)}},
            {"leaseUntil": {"$not": {"$type": "date"}}},
        ]
    }


def lease_state(until: Any, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> str:
    """A lease's end as read, judged at `now` by the rule `lease_free` queries with: "none" (no end), "lapsed",
    "held", "far" (further ahead than a lease of `lease_seconds` reaches: its holder does not renew it) or
    "junk" (no date)."""
    if until is None:
        return "none"
    if not isinstance(until, datetime):
        return "junk"
    until = as_utc(until)
    if until <= now:
        return "lapsed"
    return "held" if until <= lease_horizon(now, lease_seconds) else "far"


def lease_held(until: Any, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> bool:
    """Whether a lease ending at `until` holds its network at `now` (`lease_state` "held")."""
    return lease_state(until, now, lease_seconds) == "held"


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


# (network id, fields to set, fields to unset, lease epoch[, tokens to seal: {field: (as stored, plain)}])
StateWrite = tuple[Any, ...]


def state_update(
    network_id: Any,
    set_fields: dict,
    unset_fields: Iterable[str] = (),
    epoch: Any = None,
    expect: Mapping[str, Any] | None = None,
) -> tuple[dict, dict]:
    """The fenced filter and the update of a state write: set the run's fields, unset the lease. `expect`: fields
    that must still hold these values (a token sealed in the same write: one another program wrote meanwhile is
    never overwritten)."""
    unset = {name: "" for name in (*unset_fields, *LEASE_FIELDS) if name not in set_fields}
    query: dict[str, Any] = {"_id": network_id}
    if epoch is not None:
        query["leaseEpoch"] = epoch
    for name, value in (expect or {}).items():
        query[name] = {"$eq": value}
    return query, {"$set": set_fields, "$unset": unset}
