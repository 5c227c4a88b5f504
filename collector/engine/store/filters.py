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


SERVED: dict[str, list[str | None]] = {
    "normal": ["normal"],
    "initial": [None, "initial", "rateLimit"],
}  # the modes each collector claims
# BSON types other than a date (and null, matched by `{f: None}`), by the aliases mongomock evaluates too: what a
# positive `$type` names instead of a negated one, which no index serves
OTHER_THAN_DATE = ("number", "string", "object", "array", "binData", "objectId", "bool")
OTHER_THAN_BOOL = ("number", "string", "object", "binData", "objectId", "date")
KNOWN_MODES = ("initial", "normal", "rateLimit")
PARK_SECONDS = 3600.0  # a network that cannot run (disabled, unauthorized, skip) is looked at again this often
FLAGS = ("disabled", "skip", "unauthorized")


def modes_of(mode: str) -> dict[str, Any]:
    """The `mode` condition of the `mode` collector: points of the (mode, scheduledTo) index. The initial collector
    takes missing, initial and rateLimit; a mode that is none of them is the repair's (`odd_modes`)."""
    served = SERVED["normal" if mode == "normal" else "initial"]
    return {"mode": served[0] if len(served) == 1 else {"$in": served}}


def due_range(mode: str, now: datetime) -> dict[str, Any]:
    """The index range the claim reads: the `mode` collector's modes, `scheduledTo` at or before `now`. What it
    holds is what is due: a claim moves `scheduledTo` to its lease's end, a network that cannot run is parked
    PARK_SECONDS ahead, and a missing or non-date `scheduledTo` is repaired apart (`unscheduled`)."""
    return {**modes_of(mode), "scheduledTo": {"$lte": now}}


def due_query(mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """Networks the `mode` collector should run at `now` (the backlog the gauges, `status` and the monitor count):
    `due_range`, no lease a live holder keeps (`lease_free`), none of `disabled`, `skip`, `unauthorized` true
    (`not_true`). Served by the (mode, scheduledTo) index; the rest filters what the range holds."""
    return {**due_range(mode, now), "$and": [lease_free(now, lease_seconds), *(not_true(f) for f in FLAGS)]}


def unscheduled_due(mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """Networks of the `mode` collector that are due but not yet in the due range: their `scheduledTo` is missing
    or no date (another program's), which the next claim's repair sets (`unscheduled`). Counted with `due_query`
    by the gauges, `status` and the monitor. Served by the (mode, scheduledTo) index."""
    return {
        **modes_of(mode),
        "$and": [not_date("scheduledTo"), lease_free(now, lease_seconds), *(not_true(f) for f in FLAGS)],
    }


def claim_query(mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """What the claim reads, the most overdue first: `due_range` and a free lease. The flags are judged on what it
    read (`runnable`): a network that cannot run is parked, so it leaves the range instead of being passed over by
    every claim."""
    return {**due_range(mode, now), **lease_free(now, lease_seconds)}


def not_date(field: str) -> dict[str, Any]:
    """`field` missing, null or of a type other than a date, in positive terms an index can serve."""
    return {"$or": [{field: None}, *({field: {"$type": t}} for t in OTHER_THAN_DATE)]}


def not_true(field: str) -> dict[str, Any]:
    """`field` anything but true (missing, null, false, another type), in positive terms (`runnable` in Python)."""
    return {"$or": [{field: None}, {field: False}, *({field: {"$type": t}} for t in OTHER_THAN_BOOL)]}


def _clear(value: Any) -> bool:
    if value is None or value is False:
        return True
    return not isinstance(value, (bool, list)) and isinstance(
        value, (int, float, str, dict, bytes, ObjectId, datetime, Decimal128)
    )


def flag_clear(value: Any) -> bool:
    """A flag's value as read, judged as `not_true` judges it (an array by its elements)."""
    if isinstance(value, list):
        return any(_clear(v) for v in value)
    return _clear(value)


def runnable(doc: dict) -> bool:
    """None of `disabled`, `skip`, `unauthorized` holds the network back."""
    return all(flag_clear(doc.get(f)) for f in FLAGS)


def unscheduled(mode: str) -> dict[str, Any]:
    """Networks of the `mode` collector whose `scheduledTo` is missing or no date (another program's): the repair
    sets it, so they enter the due range. Served by the (mode, scheduledTo) index."""
    return {**modes_of(mode), **not_date("scheduledTo")}


def odd_modes(now: datetime) -> dict[str, Any]:
    """Networks whose `mode` is none of the known ones, due by `now` (or with no date): the initial collector's
    repair reports them the way a run would. Ranges of the (mode, scheduledTo) index: the text around the known
    modes, and the other types."""
    known = sorted(KNOWN_MODES)
    gaps: list[dict[str, Any]] = [{"$type": "string", "$lt": known[0]}, {"$type": "string", "$gt": known[-1]}]
    gaps += [{"$type": "string", "$gt": a, "$lt": b} for a, b in zip(known, known[1:], strict=False)]
    others = [{"mode": {"$type": t}} for t in OTHER_THAN_DATE if t != "string"] + [{"mode": {"$type": "date"}}]
    due = {"$or": [{"scheduledTo": {"$lte": now}}, *not_date("scheduledTo")["$or"]]}
    return {"$and": [{"$or": [{"mode": gap} for gap in gaps] + others}, due]}


def park(now: datetime) -> datetime:
    """Where a network that cannot run waits: PARK_SECONDS ahead, out of the due range; a flag another program
    clears without touching `scheduledTo` counts again within that time."""
    return now + timedelta(seconds=PARK_SECONDS)


def lease_horizon(now: datetime, lease_seconds: float) -> datetime:
    """The furthest end a live lease of `lease_seconds` can have at `now`: a holder that renews writes `now +
    lease_seconds`; LEASE_SKEW more for clocks that differ. An end beyond it was written by no holder that
    renews (a clock far off, a shell, a program of another time): the lease is stale and free to take."""
    return now + timedelta(seconds=max(float(lease_seconds), 0.0) + LEASE_SKEW)


def lease_free(now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """No collector holds the network at `now`: no lease, one that lapsed, one whose end lies further ahead than
    a lease of `lease_seconds` reaches (`lease_horizon`), or a `leaseUntil` that is no date. Ranges and positive
    types on `leaseUntil` only."""
    return {
        "$or": [
            {"leaseUntil": {"$lte": now}},
            {"leaseUntil": {"$gt": lease_horizon(now, lease_seconds)}},
            *not_date("leaseUntil")["$or"],
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


def lease_claim(owner: str, until: datetime, move: bool = False) -> tuple[str, dict[str, Any]]:
    """A fresh claim token and the update that leases to `owner` with it (and moves the fence epoch on); with
    `move`, `scheduledTo` goes to the lease's end too, out of the due range while it is held."""
    token = uuid.uuid4().hex
    fields = {"leaseOwner": owner, "leaseUntil": until, "leaseToken": token}
    if move:
        fields["scheduledTo"] = until
    return token, {"$set": fields, "$inc": {"leaseEpoch": 1}}


LEASE_FIELDS = ("leaseOwner", "leaseUntil", "leaseToken")
ITEM_KEY = [("user", ASCENDING), ("type", ASCENDING), ("itemId", ASCENDING)]
MAX_EPOCH = 2**62  # an epoch at or beyond this (or not a number) cannot be incremented safely: it is reset
BAD_EPOCH = {  # positive terms; null matches a missing epoch too, which $inc would start at 1 as from 0
    "$or": [
        {"leaseEpoch": None},
        *({"leaseEpoch": {"$type": t}} for t in OTHER_THAN_DATE if t != "number"),
        {"leaseEpoch": {"$type": "date"}},
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
