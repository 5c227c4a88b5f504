"""What the monitor reads from MongoDB: the one set of reads a refresh makes, whatever the number of pages open,
and the drill-down a viewer asks for. Every read is bounded (a limit, a projection); nothing here is shaped for
the page (view.py does that).

- the fleet: the `collectors` documents (heartbeat and the per-second stats beat), every refresh;
- the work: what `collector status` counts (ops/status.py: networks, due and lag per mode and service, leases,
  items, pauses; the sinks' documents), the networks most behind and the latest errors. On a large
  `networks` collection these scan, so the refresh reads them at most as often as keeps the monitor's share of
  the database small (`Cadence`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pymongo.errors import ExecutionTimeout

from ..engine.store import LEASE_DEFAULT, due_query, unscheduled_due
from ..engine.store.control import read as read_pause
from ..ops import sinks, status
from ..ops.ids import AdminError, NotAnId, equal, format_id, parse_id

MAX_COLLECTORS = 1000  # a fleet is tens; the newest heartbeats first, so a flood of junk cannot hide them
BEHIND = 10  # networks most behind, per mode
RECENT_ERRORS = 20
FOUND = 50  # networks a search lists at most
SCAN_MS = 2000  # the longest a search scans users' addresses on the server
FLEET_FIELDS = {"lastMinute": 0, "jobs": 0}  # the page shows neither; a document may hold thousands of jobs
NETWORK_FIELDS = {
    "user": 1,
    "service": 1,
    "mode": 1,
    "scheduledTo": 1,
    "errors": 1,
    "lastError": 1,
    "disabled": 1,
    "leaseUntil": 1,
}


def read_fleet(db: Any, now: datetime) -> list[dict[str, Any]]:
    """The collectors' documents, the latest heartbeats first; none dated in the future (a wrong clock or junk
    there cannot push the real fleet past the limit)."""
    recent = {"heartbeatAt": {"$lte": now + timedelta(seconds=status.MAX_SKEW)}}
    return list(db.collectors.find(recent, FLEET_FIELDS).sort("heartbeatAt", -1).limit(MAX_COLLECTORS))


RENEWALS = 10  # networks waiting for re-authorisation the page names (status --check counts them all)


def read_work(db: Any, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """The work, leases judged by LEASE_SECONDS (`lease_seconds`), and the sinks (ops/sinks.py `gather`)."""
    modes: dict[str, dict[str, Any]] = {m: status.empty_mode() for m in ("initial", "normal")}
    services = status.count_networks(db, modes)
    status.count_leases(db, modes, now, lease_seconds)
    due = {mode: due_by_service(db, mode, now, lease_seconds) for mode in modes}
    pauses = [p for p in (read_pause(d) for d in db.control.find().limit(1000)) if p is not None]
    return {
        "at": now,
        "modes": modes,
        "services": services,
        "due": due,
        "items": status.count_items(db, now),
        "pauses": pauses,
        "behind": [n for mode in modes for n in behind(db, mode, now, lease_seconds)],
        # the networks waiting for re-authorisation (a token the service refused), first by id: `renew` renews them
        "renewals": list(
            db.networks.find({"unauthorized": True}, {"user": 1, "service": 1}).sort("_id", 1).limit(RENEWALS)
        ),
        "sinks": read_sinks(db),
        # whole documents: a credential anywhere in one is masked where its error message repeats it (view.py)
        "errors": list(
            db.networks.find({"lastError": {"$type": "object"}}).sort("lastError.at", -1).limit(RECENT_ERRORS)
        ),
    }


def read_sinks(db: Any) -> list[dict[str, Any]]:
    """The `sinks` collection in one find: each sink's document (its state, counters, the backlog and lag the sink
    service writes every few seconds, its failing streak) and the service lease's."""
    return list(db[sinks.SINKS].find().sort("_id", 1).limit(sinks.MAX_SINKS + 1))


def due_by_service(db: Any, mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> list[dict[str, Any]]:
    """The networks of `mode` due now, per service: how many, and the oldest `scheduledTo` (the lag). Through the
    `{mode, scheduledTo}` index on MongoDB."""
    group = {"$group": {"_id": "$service", "due": {"$sum": 1}, "oldest": {"$min": "$scheduledTo"}}}
    found = []
    for match in (due_query(mode, now, lease_seconds), unscheduled_due(mode, now, lease_seconds)):
        found += db.networks.aggregate([{"$match": match}, group, {"$limit": 1000}])
    return found  # a service twice: its networks in the due range, and those without a date yet


def behind(db: Any, mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> list[dict[str, Any]]:
    """The networks of `mode` most behind: the front of the due range, and (not late yet) those without a date."""
    found = list(
        db.networks.find(due_query(mode, now, lease_seconds), NETWORK_FIELDS).sort("scheduledTo", 1).limit(BEHIND)
    )
    return found + list(db.networks.find(unscheduled_due(mode, now, lease_seconds), NETWORK_FIELDS).limit(BEHIND))


@dataclass
class Found:
    """What a search found: at most FOUND networks; `more` when it stopped at that bound (there are more), `slow`
    when a scan of users' addresses stopped at SCAN_MS before reading every network."""

    networks: list[dict[str, Any]] = field(default_factory=list)
    more: bool = False
    slow: bool = False


def search(db: Any, query: str) -> Found:
    """Networks by id (equality, ops/ids.py), by service (its name, equality) and by any part of a user's address
    (the text escaped: a literal, never a pattern; case ignored). No index serves a part of an address, so that
    read is a scan, bounded: FOUND + 1 documents, SCAN_MS of the server's time. NotAnId for a query given as an id
    (it is refused, never run)."""
    query = query.strip()[:200]
    found = Found()
    if not query:
        return found
    by_id = _by_id(db, query)
    services = sorted({query, query.lower()})
    by_service = _bounded(db.networks.find({"service": {"$in": services}}), found)
    by_user = _bounded(db.networks.find({"user": {"$regex": re.escape(query), "$options": "i"}}), found)
    seen: set[str] = set()
    for doc in by_id + by_service + sorted(by_user, key=_user_order):
        key = format_id(doc.get("_id"))
        if key not in seen:
            seen.add(key)
            found.networks.append(doc)
    found.more = found.more or len(found.networks) > FOUND
    found.networks = found.networks[:FOUND]
    return found


def _by_id(db: Any, query: str) -> list[dict[str, Any]]:
    try:
        wanted = parse_id(query)
    except NotAnId:  # a query given as an id: said to the viewer, never run (nor searched as an address)
        raise
    except AdminError:  # no id at all (no JSON): the other two searches still run
        return []
    doc = db.networks.find_one({"_id": equal(wanted)})
    return [doc] if doc is not None else []


def _bounded(cursor: Any, found: Found) -> list[dict[str, Any]]:
    """At most FOUND + 1 documents of `cursor` (one more tells there are more), read for at most SCAN_MS."""
    out: list[dict[str, Any]] = []
    try:
        for doc in cursor.limit(FOUND + 1).max_time_ms(SCAN_MS):
            out.append(doc)
    except ExecutionTimeout:
        found.slow = True
    found.more = found.more or len(out) > FOUND
    return out


def _user_order(doc: dict[str, Any]) -> tuple[str, str]:
    return str(doc.get("user")), str(doc.get("service"))


def items_of(db: Any, network: dict[str, Any]) -> int | None:
    """How many items this network's user has from its service (the items' `user` and `type`)."""
    user, service = network.get("user"), network.get("service")
    if not isinstance(user, str) or not isinstance(service, str):
        return None
    return db.items.count_documents({"user": user, "type": service}, limit=100_000)


class Cadence:
    """When to read the work again: every refresh while its reads are quick; on a database where they take long,
    no more often than keeps them to a tenth of the time (at most every MAX_WORK_EVERY seconds)."""

    SHARE = 10.0
    MAX_WORK_EVERY = 60.0

    def __init__(self, every: float):
        self.every = every
        self.next_at = 0.0

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def took(self, seconds: float, now: float) -> None:
        wait = min(max(self.every, self.SHARE * seconds), self.MAX_WORK_EVERY)
        self.next_at = now + wait - self.every / 2  # half a refresh early: a quick read is due at the next one
