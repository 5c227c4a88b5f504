"""`collector status`: what the collectors are doing, read from MongoDB only (no API call), while they run.

Per mode: networks, due now, the schedule lag (how overdue the oldest due network is; p50/p95 over the due ones),
leases held (by instance) and expired, rateLimit, disabled, unauthorized, erroring by lastError.kind. Per service:
networks, erroring, disabled. Items: total, added in the last hour and day. Instances: live and dead.
Counting is done by `$group` aggregations; the lag reads only the `scheduledTo` of due networks, through the
`{mode, scheduledTo}` index on MongoDB. Renewals: the networks that wait for re-authorisation (`collector connect`
renews them), counted and the first few named. The `--check` verdict on the report is statuscheck.py's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..engine.store import LEASE_DEFAULT, due_query, lease_horizon, unscheduled_due
from ..engine.store.control import Pause
from ..engine.store.control import read as read_pause
from ..modes import MODES
from ..sdk.timeutil import as_utc
from .statusfields import MAX_TEXT, _s, count, number, text

__all__ = ["MAX_TEXT", "count", "gather", "number", "render", "render_instances", "text"]


def mode_of(network_mode: Any) -> str:
    return "normal" if network_mode == "normal" else "initial"  # the initial collector serves all the others


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def gather(db: Any, now: datetime, heartbeat_seconds: float, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """Everything `status` reports, read from MongoDB at `now` (leases judged by LEASE_SECONDS: `lease_seconds`)."""
    modes: dict[str, dict[str, Any]] = {str(m): empty_mode() for m in MODES}
    services = count_networks(db, modes)
    count_errors(db, modes)
    count_leases(db, modes, now, lease_seconds)
    for mode in MODES:
        modes[mode].update(due_now(db, mode, now, lease_seconds))
    items = count_items(db, now)
    instances = [instance(doc, now, heartbeat_seconds) for doc in db.collectors.find().limit(MAX_INSTANCES)]
    pauses = [pause_row(p, now) for p in (read_pause(d) for d in db.control.find().limit(1000)) if p is not None]
    return {
        "at": now,
        "modes": modes,
        "services": services,
        "items": items,
        "instances": instances,
        "pauses": pauses,
        "sinks": gather_sinks(db, now),
        "renewals": waiting_renewal(db),
    }


RENEWALS_NAMED = 5  # networks waiting for re-authorisation that `--check` names; the others are counted


def waiting_renewal(db: Any) -> dict[str, Any]:
    """The networks that wait for re-authorisation (`unauthorized`: a token the service refused, which
    `collector connect` renews): how many, and the first few by id (user and service, printable)."""
    query = {"unauthorized": True}
    first = [
        {"id": text(str(d.get("_id"))), "user": text(d.get("user")), "service": text(d.get("service"))}
        for d in db.networks.find(query, {"user": 1, "service": 1}).sort("_id", 1).limit(RENEWALS_NAMED)
    ]
    total = len(first) if len(first) < RENEWALS_NAMED else db.networks.count_documents(query)
    return {"count": total, "first": first}


def gather_sinks(db: Any, now: datetime) -> dict[str, Any]:
    from .sinks import gather

    return gather(db, now)


def empty_mode() -> dict[str, Any]:
    return {
        "networks": 0,
        "rateLimit": 0,
        "disabled": 0,
        "unauthorized": 0,
        "erroring": {},
        "leased": {},
        "expiredLeases": 0,
        "farLeases": 0,
    }


MODE_OF_NETWORK = {"$ifNull": ["$mode", "initial"]}  # a network without a mode is initial


def count_networks(db: Any, modes: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per mode (into `modes`): networks, rateLimit, disabled, unauthorized. Returned, per service: networks,
    erroring, disabled."""
    groups = db.networks.aggregate(
        [
            {
                "$group": {
                    "_id": {"mode": MODE_OF_NETWORK, "service": "$service"},
                    "networks": {"$sum": 1},
                    "disabled": {"$sum": {"$cond": [{"$eq": ["$disabled", True]}, 1, 0]}},
                    "unauthorized": {"$sum": {"$cond": [{"$eq": ["$unauthorized", True]}, 1, 0]}},
                    "erroring": {"$sum": {"$cond": [{"$gt": ["$errors", 0]}, 1, 0]}},
                }
            },
        ]
    )
    services: dict[str, dict[str, int]] = {}
    for group in groups:
        mode = mode_of(group["_id"].get("mode"))
        modes[mode]["networks"] += group["networks"]
        if group["_id"].get("mode") == "rateLimit":
            modes[mode]["rateLimit"] += group["networks"]
        for name in ("disabled", "unauthorized"):
            modes[mode][name] += group[name]
        entry = services.setdefault(text(group["_id"].get("service")), {"networks": 0, "erroring": 0, "disabled": 0})
        for name in ("networks", "erroring", "disabled"):
            entry[name] += group[name]
    return services


def count_errors(db: Any, modes: dict[str, dict[str, Any]]) -> None:
    """Per mode: the erroring networks by lastError.kind."""
    pipeline = [
        {"$match": {"errors": {"$gt": 0}}},
        {"$group": {"_id": {"mode": MODE_OF_NETWORK, "kind": "$lastError.kind"}, "n": {"$sum": 1}}},
    ]
    for group in db.networks.aggregate(pipeline):
        errors = modes[mode_of(group["_id"].get("mode"))]["erroring"]
        kind = text(group["_id"].get("kind"))
        errors[kind] = errors.get(kind, 0) + group["n"]


def count_leases(
    db: Any, modes: dict[str, dict[str, Any]], now: datetime, lease_seconds: float = LEASE_DEFAULT
) -> None:
    """Per mode: the leases held now, by owner, the expired ones, and those whose end lies further ahead than a
    lease of `lease_seconds` reaches (`farLeases`: no live holder keeps them; the next claim takes them over)."""
    horizon = lease_horizon(now, lease_seconds)  # BSON order: text and null sort before every date
    live = {"$and": [{"$gt": ["$leaseUntil", now]}, {"$lte": ["$leaseUntil", horizon]}]}
    by = {"mode": MODE_OF_NETWORK, "owner": "$leaseOwner", "live": live, "far": {"$gt": ["$leaseUntil", horizon]}}
    pipeline = [{"$match": {"leaseOwner": {"$exists": True}}}, {"$group": {"_id": by, "n": {"$sum": 1}}}]
    for group in db.networks.aggregate(pipeline):
        mode = mode_of(group["_id"].get("mode"))
        if group["_id"].get("far"):
            modes[mode]["farLeases"] += group["n"]
        elif group["_id"].get("live"):
            leased = modes[mode]["leased"]
            owner = text(group["_id"].get("owner"))
            leased[owner] = leased.get(owner, 0) + group["n"]
        else:
            modes[mode]["expiredLeases"] += group["n"]


def due_now(db: Any, mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """The networks of `mode` due now, by service, and their schedule lag (the oldest, p50, p95)."""
    fields = {"scheduledTo": 1, "service": 1}
    due_docs = list(db.networks.find(due_query(mode, now, lease_seconds), fields))
    due_docs += db.networks.find(unscheduled_due(mode, now, lease_seconds), fields)  # no date yet: due, lag 0
    lags = [
        max((now - as_utc(d["scheduledTo"])).total_seconds(), 0.0)
        if isinstance(d.get("scheduledTo"), datetime)
        else 0.0
        for d in due_docs
    ]
    by_service: dict[str, int] = {}
    for d in due_docs:
        by_service[text(d.get("service"))] = by_service.get(text(d.get("service")), 0) + 1
    return {
        "dueByService": by_service,
        "due": len(lags),
        "lagSeconds": max(lags) if lags else 0.0,
        "lagP50": percentile(lags, 0.5),
        "lagP95": percentile(lags, 0.95),
    }


def count_items(db: Any, now: datetime) -> dict[str, int]:
    return {
        "total": db.items.estimated_document_count(),
        "lastHour": db.items.count_documents({"date": {"$gte": now - timedelta(hours=1)}}),
        "lastDay": db.items.count_documents({"date": {"$gte": now - timedelta(days=1)}}),
    }


def pause_row(pause: Pause, now: datetime) -> dict[str, Any]:
    return {
        "mode": pause.mode,
        "service": pause.service,
        "reason": text(pause.reason),
        "by": text(pause.by),
        "at": pause.at,
        "until": pause.until,
        "expired": pause.expired(now),
    }


MAX_INSTANCES = 10_000  # heartbeat documents read; a fleet is tens, a flood of junk must not exhaust memory
MAX_SKEW = 60.0  # a heartbeat this far in the future is a wrong clock (or a forged document), not a live collector


def believed_interval(claimed: Any, heartbeat_seconds: float) -> float:
    """The heartbeat interval a document claims, believed up to max(4 × our own HEARTBEAT_SECONDS, one hour)
    (so a document claiming a year cannot keep a dead collector "live"); anything else: our own interval."""
    cap = max(4 * heartbeat_seconds, 3600.0)
    value = number(claimed)
    return min(value, cap) if value > 0 else heartbeat_seconds


def instance(doc: dict, now: datetime, heartbeat_seconds: float) -> dict[str, Any]:
    """One heartbeat document as `status` shows it, whatever it holds: text cut and made printable, counters
    as whole numbers, live only for a heartbeat neither too old nor from the future."""
    beat = doc.get("heartbeatAt")
    every = believed_interval(doc.get("heartbeatSeconds"), heartbeat_seconds)
    age = (now - as_utc(beat)).total_seconds() if isinstance(beat, datetime) else None
    last = doc.get("lastMinute")
    minute: dict = last if isinstance(last, dict) else {}
    mode = doc.get("mode")
    return {
        "instance": text(doc.get("_id")),
        "mode": mode if mode in MODES else text(mode),
        "host": text(doc.get("host")),
        "pid": count(doc.get("pid")),
        "live": age is not None and -MAX_SKEW <= age <= 3 * every,
        "clockAhead": age is not None and age < -MAX_SKEW,
        "heartbeatAt": as_utc(beat) if isinstance(beat, datetime) else None,
        "inflight": count(doc.get("inflight")),
        "lastMinute": {"runs": runs(minute.get("runs")), "newItems": count(minute.get("newItems"))},
        "services": served(doc.get("services")),
        "running": running(doc.get("running"), now),
    }


def running(value: Any, now: datetime) -> list[dict[str, Any]]:
    """The networks a heartbeat says run now, with how long (at most 4,096, whatever the document holds)."""
    rows = []
    for row in value[:4096] if isinstance(value, list) else []:
        if not isinstance(row, dict):
            continue
        since = row.get("since")
        age = (now - as_utc(since)).total_seconds() if isinstance(since, datetime) else None
        rows.append(
            {
                "network": text(row.get("network")),
                "service": text(row.get("service")),
                "user": text(row.get("user")),
                "since": as_utc(since) if isinstance(since, datetime) else None,
                "seconds": age,
            }
        )
    return sorted(rows, key=lambda r: -(r["seconds"] or 0))


def render_instances(status: dict[str, Any], stuck_after: float) -> str:
    """`status --instances`: per live collector, what it runs now and for how long; a run older than
    `stuck_after` seconds is flagged (a stuck host)."""
    lines = [f"collector status at {status['at']:%Y-%m-%d %H:%M:%S} UTC: what each live collector runs now", ""]
    live = [i for i in status["instances"] if i["live"]]
    for i in live:
        scope = i.get("services") or {}
        serves = ", ".join(scope.get("only") or []) or "every service"
        if scope.get("exclude"):
            serves += " except " + ", ".join(scope["exclude"])
        lines.append(f"{i['instance']} ({i['mode']}, {serves}): {len(i['running'])} running")
        for r in i["running"]:
            age = _s(r["seconds"]) if r["seconds"] is not None else "?"
            flag = "  << longer than expected (stuck host?)" if (r["seconds"] or 0) > stuck_after else ""
            lines.append(f"  {r['network']:<24} {r['service']:<13} {r['user'][:28]:<28} {age:>6}{flag}")
    if not live:
        lines.append("(no live collector)")
    return "\n".join(lines)


def served(value: Any) -> dict[str, Any]:
    """What a heartbeat says its collector claims: `only` (None: every service) and `exclude`."""
    doc = value if isinstance(value, dict) else {}

    def names(v: Any) -> list[str]:
        return [text(n) for n in v[:100] if isinstance(n, str)] if isinstance(v, list) else []

    only = names(doc.get("only"))
    return {"only": only or None, "exclude": names(doc.get("exclude"))}


def serves(instance: dict[str, Any], service: str) -> bool:
    scope = instance.get("services") or {}
    only, exclude = scope.get("only"), scope.get("exclude") or []
    return (only is None or service in only) and service not in exclude


def runs(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {text(k): count(v) for k, v in list(value.items())[:20]}


def render(status: dict[str, Any]) -> str:
    lines = [
        f"collector status at {status['at']:%Y-%m-%d %H:%M:%S} UTC",
        "",
        f"{'mode':<8} {'networks':>9} {'due':>7} {'lag':>7} {'p50':>6} {'p95':>6} {'leased':>7} "
        f"{'expired':>8} {'rateLimit':>9} {'disabled':>9} {'unauth':>7}  erroring",
    ]
    for mode, m in status["modes"].items():
        erroring = ", ".join(f"{k} {v}" for k, v in sorted(m["erroring"].items())) or "-"
        lines.append(
            f"{mode:<8} {m['networks']:>9} {m['due']:>7} {_s(m['lagSeconds']):>7} {_s(m['lagP50']):>6} "
            f"{_s(m['lagP95']):>6} {sum(m['leased'].values()):>7} {m['expiredLeases']:>8} "
            f"{m['rateLimit']:>9} {m['disabled']:>9} {m['unauthorized']:>7}  {erroring}"
        )
    lines += ["", f"{'service':<14} {'networks':>9} {'erroring':>9} {'disabled':>9}"]
    for service, s in sorted(status["services"].items()):
        lines.append(f"{service[:14]:<14} {s['networks']:>9} {s['erroring']:>9} {s['disabled']:>9}")
    items = status["items"]
    lines += [
        "",
        f"items: {items['total']} total, {items['lastHour']} in the last hour, {items['lastDay']} in the last day",
        "",
        f"{'instance':<28} {'mode':<8} {'state':<5} {'inflight':>8} {'runs/min':>9} {'new/min':>8}",
    ]
    for i in status["instances"]:
        minute = i["lastMinute"]
        state = "ahead" if i["clockAhead"] else "live" if i["live"] else "dead"
        lines.append(
            f"{i['instance'][:28]:<28} {i['mode'][:8]:<8} {state:<5} "
            f"{i['inflight']:>8} {sum(minute['runs'].values()):>9} {minute['newItems']:>8}"
        )
    if not status["instances"]:
        lines.append("(no collector has a heartbeat)")
    for p in status.get("pauses", []):
        when = f" since {p['at']:%Y-%m-%d %H:%M:%S} UTC" if isinstance(p["at"], datetime) else ""
        until = f", until {p['until']:%Y-%m-%d %H:%M:%S} UTC" if isinstance(p["until"], datetime) else ""
        state = "EXPIRED pause" if p["expired"] else "paused"
        reason = f": {p['reason']}" if p["reason"] else ""
        lines.append(f"{state}: mode {p['mode']}, service {p['service']}{when} by {p['by']}{until}{reason}")
    for mode, m in status["modes"].items():
        if m.get("farLeases"):
            lines.append(
                f"STALE LEASES: mode {mode}, {m['farLeases']} networks leased further ahead than LEASE_SECONDS "
                "allows (no holder renews them): the next claim takes them over"
            )
    if "sinks" in status:
        from .sinksview import summary

        lines += ["", summary(status["sinks"])]
    return "\n".join(lines)
