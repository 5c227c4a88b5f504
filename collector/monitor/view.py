"""The page's figures from what reading.py read: pure, whatever the documents hold.

Every string taken from a document is masked, cut and made printable here (`text`), so the JSON the page gets
holds no secret, no control character and nothing of unbounded size; the page puts it in the DOM as text only.
Numbers from documents are finite and bounded (`status.count`), times are UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bson import json_util

from ..engine.store.control import Pause
from ..ops import sinks as ops_sinks
from ..ops import status
from ..ops.networks import format_id, masked, state_of
from ..ops.sinksview import state_word
from ..sdk.redaction import MASK, MIN_LENGTH, clip, secret_values
from ..sdk.timeutil import as_utc
from ..sdk.validate import SECRET_FIELDS
from ..textout import printable
from .rates import SERIES

MESSAGE = 300  # characters of an error message
FIELD = 2000  # characters of one field in the drill-down
RUNNING = 20  # networks shown per collector (the document may list thousands)
MAX_ROWS = 200  # collectors sent to the page (the alive ones first); `fleetCount` says how many there are
MIN_STALE = 3.0  # seconds: never call a collector stale sooner


def text(value: Any, limit: int = status.MAX_TEXT, hidden: tuple[str, ...] = ()) -> str:
    """Masked (the process's secrets, credential shapes, and `hidden`: the document's own secrets), cut, made
    printable."""
    if hidden and isinstance(value, str):
        for secret in hidden:
            value = value.replace(secret, MASK)
    return printable(clip(value, limit))[:limit]


def own_secrets(doc: dict[str, Any]) -> tuple[str, ...]:
    """A network's own credentials (top level and nested under secret names), longest first: a server that
    echoed one into an error message, or a program that wrote one anywhere, shows it masked."""
    found = [doc.get(name) for name in SECRET_FIELDS] + secret_values(doc)
    return tuple(sorted({s for s in found if isinstance(s, str) and len(s) >= MIN_LENGTH}, key=len, reverse=True))


def when(value: Any) -> datetime | None:
    return as_utc(value) if isinstance(value, datetime) else None


def lag(scheduled: Any, now: datetime) -> float:
    at = when(scheduled)
    return round(max((now - at).total_seconds(), 0.0), 1) if at is not None else 0.0


def fleet(docs: list[dict[str, Any]], now: datetime, heartbeat_seconds: float, point: dict[str, Any]) -> list[dict]:
    rows = [collector(doc, now, heartbeat_seconds, point) for doc in docs]
    return sorted(rows, key=lambda r: (not r["alive"], r["mode"], r["id"]))


def collector(doc: dict[str, Any], now: datetime, heartbeat_seconds: float, point: dict[str, Any]) -> dict:
    """One collector as the page shows it: alive while its stats beat (or, for a collector without one, its
    heartbeat) is fresh."""
    listed = doc.get("running")
    running: list[Any] = listed if isinstance(listed, list) else []
    seen = status.instance({**doc, "running": running[:RUNNING]}, now, heartbeat_seconds)
    stats_at, started = when(doc.get("statsAt")), when(doc.get("startedAt"))
    every = max(status.number(doc.get("statsSeconds")), 0.0) or heartbeat_seconds
    age = (now - stats_at).total_seconds() if stats_at else None
    alive = seen["live"] if age is None else -status.MAX_SKEW <= age <= max(3 * min(every, 3600), MIN_STALE)
    held = doc.get("process")
    process: dict[str, Any] = held if isinstance(held, dict) else {}
    scope = seen["services"]
    name = status.text(doc.get("_id"))  # as rates.py names it
    rates = point["by"].get(name) or dict.fromkeys(SERIES, 0.0)
    return {
        "id": seen["instance"],
        "mode": seen["mode"],
        "host": seen["host"],
        "pid": seen["pid"],
        "version": text(doc.get("version"), 40),
        "services": ", ".join(scope["only"]) if scope["only"] else "all",
        "exclude": ", ".join(scope["exclude"]),
        "startedAt": started,
        "uptimeS": round((now - started).total_seconds(), 1) if started else None,
        "heartbeatAt": seen["heartbeatAt"],
        "statsAt": stats_at,
        "ageS": round(age, 1) if age is not None else None,
        "alive": alive,
        "inflight": seen["inflight"],
        "rssBytes": status.count(process.get("rssBytes")) or None,
        "cpuPercent": point["cpu"].get(name),
        "running": [
            {**r, "seconds": None if r["seconds"] is None else round(r["seconds"], 1)} for r in seen["running"]
        ],
        "runningCount": len(running),
        "rates": rates if alive else dict.fromkeys(SERIES, 0.0),
    }


def work(read: dict[str, Any], now: datetime) -> dict[str, Any]:
    at: datetime = read["at"]
    modes = {}
    for mode, m in read["modes"].items():
        due = read["due"][mode]
        oldest = [g.get("oldest") for g in due]
        modes[mode] = {
            "networks": m["networks"],
            "due": sum(status.count(g.get("due")) for g in due),
            "lagS": max((lag(o, at) for o in oldest), default=None) if due else None,
            "rateLimit": m["rateLimit"],
            "disabled": m["disabled"],
            "unauthorized": m["unauthorized"],
            "leased": sum(m["leased"].values()),
            "expiredLeases": m["expiredLeases"],
            "farLeases": m.get("farLeases", 0),
        }
    return {
        "at": at,
        "modes": modes,
        "services": services(read),
        "items": read["items"],
        "pauses": [pause(p, now) for p in read["pauses"]],
        "behind": sorted((behind(n, at) for n in read["behind"]), key=lambda r: -r["lagS"])[:10],
        "errors": [error_row(n) for n in read["errors"]],
        "renewals": [renewal(n) for n in read.get("renewals") or []],
        "sinks": sinks(read.get("sinks") or [], at),
    }


def sinks(docs: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """The sinks as the page shows them, from their documents (ops/sinks.py's rows: text masked, cut, printable):
    each one's state, the backlog and lag the sink service last wrote, delivered and dead-lettered counts, its
    failing streak (since when, why); and the service lease."""
    rows, service = [], None
    for doc in docs:
        if doc.get("_id") == ops_sinks.SERVICE_ID:
            lease = ops_sinks.lease_row(doc, now)
            service = {k: lease[k] for k in ("owner", "host", "live", "stale", "leaseUntil")}
            continue
        row = ops_sinks.sink_row(doc, now, None)
        held = doc.get("stats")
        stats: dict[str, Any] = held if isinstance(held, dict) else {}
        rows.append(
            {
                "name": row["name"],
                "kind": row["kind"],
                "state": state_word(row),
                "backlog": status.count(stats.get("backlog")),
                "lagS": round(status.number(stats.get("lagSeconds")), 1),
                "delivered": row["counts"]["delivered"],
                "deadLetters": row["counts"]["deadLettered"],
                "failing": row["failing"],
            }
        )
    return {"rows": rows[:MAX_ROWS], "service": service}


def services(read: dict[str, Any]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {
        name: {"service": name, **counts, "due": 0, "lagS": None} for name, counts in read["services"].items()
    }
    for groups in read["due"].values():
        for g in groups:
            row = rows.setdefault(
                text(g.get("_id")),
                {"service": text(g.get("_id")), "networks": 0, "erroring": 0, "disabled": 0, "due": 0, "lagS": None},
            )
            row["due"] += status.count(g.get("due"))
            behind_by = lag(g.get("oldest"), read["at"])
            row["lagS"] = max(row["lagS"] or 0.0, behind_by)
    return sorted(rows.values(), key=lambda r: (-r["due"], r["service"]))[:200]


def pause(p: Pause, now: datetime) -> dict[str, Any]:
    return {
        "scope": text(p.scope, 200),
        "mode": text(p.mode),
        "service": text(p.service),
        "reason": text(p.reason, 500),
        "by": text(p.by, 200),
        "at": p.at,
        "until": p.until,
        "expired": p.expired(now),
    }


def behind(network: dict[str, Any], now: datetime) -> dict[str, Any]:
    return {
        "id": text(format_id(network.get("_id")), 200),
        "user": text(network.get("user")),
        "service": text(network.get("service")),
        "mode": text(network.get("mode") or "initial"),
        "scheduledTo": when(network.get("scheduledTo")),
        "lagS": lag(network.get("scheduledTo"), now),
        "errors": status.count(network.get("errors")),
    }


def last_error(network: dict[str, Any]) -> dict[str, Any] | None:
    error = network.get("lastError")
    if not isinstance(error, dict):
        return None
    hidden = own_secrets(network)
    return {
        "kind": text(error.get("kind")),
        "message": text(error.get("message"), MESSAGE, hidden),
        "at": when(error.get("at")),
    }


def renewal(network: dict[str, Any]) -> dict[str, Any]:
    """A network waiting for re-authorisation, as the page names it: its id (as `networks list` prints it), user
    and service, printable."""
    return {
        "id": text(format_id(network.get("_id")), 200),
        "user": text(network.get("user")),
        "service": text(network.get("service")),
    }


def error_row(network: dict[str, Any]) -> dict[str, Any]:
    error = last_error(network) or {}
    return {
        "id": text(format_id(network.get("_id")), 200),
        "user": text(network.get("user")),
        "service": text(network.get("service")),
        **error,
    }


def network(doc: dict[str, Any], now: datetime, items: int | None) -> dict[str, Any]:
    """One network for the drill-down: its state, last error, next run, and every field (secrets masked)."""
    return {
        "id": text(format_id(doc.get("_id")), 200),
        "user": text(doc.get("user"), 200),
        "service": text(doc.get("service")),
        "mode": text(doc.get("mode") or "initial"),
        "state": state_of(doc, now),
        "scheduledTo": when(doc.get("scheduledTo")),
        "lastError": last_error(doc),
        "errors": status.count(doc.get("errors")),
        "disabled": doc.get("disabled") is True,
        "unauthorized": doc.get("unauthorized") is True,  # waits for re-authorisation: the page offers "renew"
        "items": items,
        "document": {text(k, 80): field(masked(v, k), own_secrets(doc)) for k, v in list(doc.items())[:200]},
    }


def field(value: Any, hidden: tuple[str, ...] = ()) -> str:
    """One field of a network as text: a string as it is, anything else as MongoDB Extended JSON."""
    if isinstance(value, str):
        return text(value, FIELD, hidden)
    if isinstance(value, datetime):
        return as_utc(value).isoformat()
    try:
        shown = json_util.dumps(value, json_options=json_util.RELAXED_JSON_OPTIONS)
    except (TypeError, ValueError, OverflowError, RecursionError):
        shown = repr(value)
    return text(shown, FIELD, hidden)
