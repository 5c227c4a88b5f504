"""`collector sinks`: where each sink stands, read from MongoDB (the `sinks`, `sinkQueue` and `sinkDeadLetters`
collections the sink service keeps, and the items not yet queued), and the operator's pause, resume and replay,
written through the sinks' store (sinks/store.py). The reads are bounded (MAX_SINKS documents) and take only what
they can use (a queue's oldest *date*, a sink name that is text).

Whatever the documents hold (a mongo shell may have written anything): text is cut, masked and escaped, counts
are whole numbers from 0 to 10^12, times are datetimes or nothing. `status` shows a line of this, and
`status --check` warns on it (statuscheck.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ..engine.store import lease_state
from ..sdk.redaction import clip
from ..sdk.timeutil import as_utc
from ..sinks.store import DEAD, QUEUE, SERVICE_ID, SERVICE_LEASE_SECONDS, SINKS, lease_doc, oldest, outbox_pending
from ..textout import printable
from .ids import equal
from .pauses import who
from .statusfields import count, text

MAX_SINKS = 200  # sink documents read; a configuration has a handful, a flood of junk must not exhaust memory
FAILURE_KINDS = ("refused", "tooLarge", "rejected", "auth")
COUNTS = ("delivered", "deadLettered", "retried", "gone")
REASON = 200  # characters of a reason shown


def when(value: Any) -> datetime | None:
    return as_utc(value) if isinstance(value, datetime) else None


def age(now: datetime, value: Any) -> float | None:
    at = when(value)
    return (now - at).total_seconds() if at is not None else None


def reason(value: Any) -> str:
    return printable(clip(value, REASON))[: 2 * REASON] if value is not None else ""


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --- reading -------------------------------------------------------------------------------------------------------
def sink_documents(db: Any) -> list[dict]:
    """The sinks' documents (not the lease's), at most MAX_SINKS, in name order."""
    found = db[SINKS].find().sort("_id", 1).limit(MAX_SINKS + 1)  # the lease's left out here, not by a `$ne`
    return [d for d in found if d.get("_id") != SERVICE_ID][:MAX_SINKS]


def lease(db: Any, now: datetime) -> dict[str, Any] | None:
    """The service lease as its document says: who holds it, whether it is live (its end in the future and no
    further ahead than the service's lease reaches: a `stale` one, further, is no holder's that renews it, and the
    next service takes it over), how old its last beat is."""
    doc = lease_doc(db)
    return None if doc is None else lease_row(doc, now)


def lease_row(doc: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The service lease's document as `lease` shows it (pure)."""
    until = when(doc.get("leaseUntil"))
    state = lease_state(doc.get("leaseUntil"), now, SERVICE_LEASE_SECONDS)
    beat = doc.get("beatAt")
    return {
        "owner": text(doc.get("owner")),
        "host": text(doc.get("host")),
        "pid": count(doc.get("pid")),
        "since": when(doc.get("since")),  # when this holder took the lease
        "leaseUntil": until,
        "live": state == "held",
        "stale": state in ("far", "junk"),
        "beatAt": when(beat),
        "beatAge": age(now, beat),
        "blocked": blocked_by(doc),
    }


def blocked_by(doc: Mapping[str, Any]) -> list[str]:
    """The registered sinks the lease holder's settings do not configure, as it said (the mover holds the items
    marked meanwhile); what another holder said before is not its."""
    said = mapping(doc.get("blocked"))
    names = said.get("sinks")
    if said.get("owner") != doc.get("owner") or not isinstance(names, list):
        return []
    return [text(n) for n in names[:MAX_SINKS]]


def queue_figures(db: Any, name: Any, now: datetime) -> dict[str, Any]:
    """A sink's backlog (queue entries), its lag (since the date of its oldest entry, as the service's metric
    counts it: sinks/store.py `oldest`; 0 when none) and the dead letters kept for it now."""
    backlog = db[QUEUE].count_documents({"sink": name})
    lag = max(age(now, oldest(db[QUEUE], name)) or 0.0, 0.0)
    return {"backlog": backlog, "lagSeconds": lag, "deadLetters": db[DEAD].count_documents({"sink": name})}


def recent_dead_letters(db: Any, name: str, limit: int = 5) -> list[dict[str, Any]]:
    """The sink's newest dead letters: the item, when, the destination's status and reason (masked, cut)."""
    from ..sinks.store import dead_letters

    return [
        {
            "item": text(d.get("item")),
            "at": when(d.get("at")),
            "status": count(d.get("status")) or None,
            "reason": reason(d.get("reason")),
        }
        for d in dead_letters(db, name, limit)
    ]


def empty_queue() -> dict[str, Any]:
    return {"backlog": 0, "lagSeconds": 0.0, "deadLetters": 0}


def sink_counts(value: Any) -> dict[str, Any]:
    counts = mapping(value)
    failed = mapping(counts.get("failed"))
    return {**{k: count(counts.get(k)) for k in COUNTS}, "failed": {k: count(failed.get(k)) for k in FAILURE_KINDS}}


def state(value: Any, *fields: str) -> dict[str, Any] | None:
    """`paused` or `stopped` as the document holds it (None when not set): at, and the given text fields."""
    if not value:
        return None
    doc = mapping(value)
    return {"at": when(doc.get("at")), **{f: reason(doc.get(f)) for f in fields}}


def backfill(value: Any, now: datetime) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    return {
        "since": when(value.get("since")),
        "startedAt": when(value.get("startedAt")),
        "by": text(value.get("by")),
        "enqueued": count(value.get("enqueued")),
        "doneAt": when(value.get("doneAt")),
        "running": value.get("doneAt") is None,
        "cursor": text(value.get("cursor")) if value.get("cursor") is not None else None,
    }


def sink_row(doc: Mapping[str, Any], now: datetime, configured: bool | None) -> dict[str, Any]:
    stats = mapping(doc.get("stats"))
    return {
        "name": text(doc.get("_id")),
        "kind": text(doc.get("kind")),
        "configured": configured,
        "registered": True,
        "createdAt": when(doc.get("createdAt")),
        "paused": state(doc.get("paused"), "by", "reason"),
        "stopped": state(doc.get("stopped"), "reason"),
        "backfill": backfill(doc.get("backfill"), now),
        "counts": sink_counts(doc.get("counts")),
        "stats": {"at": when(stats.get("at")), "owner": text(stats.get("owner"))},
        "failing": failing(doc.get("failing"), now),
    }


def failing(value: Any, now: datetime) -> dict[str, Any] | None:
    """A sink's failing streak as the service wrote it (sinks/health.py): since (the first failure of the streak),
    at (the last), its reason (masked, cut, printable), and for how many seconds now; None when it delivers."""
    doc = mapping(value)
    since = when(doc.get("since"))
    if since is None:
        return None
    seconds = max((now - since).total_seconds(), 0.0)
    return {"since": since, "at": when(doc.get("at")), "reason": reason(doc.get("reason")), "seconds": seconds}


def gather(db: Any, now: datetime, configured: Iterable[str] | None = None) -> dict[str, Any]:
    """Every sink the database knows or the settings configure: its state, counts and queue; the service lease;
    the items not yet queued (only once a sink service ran: before, no index serves that count). Without
    `configured` (the SINKS names) whether a sink is configured is not said (None)."""
    names = tuple(configured or ())
    rows = []
    for doc in sink_documents(db):
        row = sink_row(doc, now, doc.get("_id") in names if configured is not None else None)
        name = doc.get("_id")  # only a text name is looked for in the queue: a document id is no query
        rows.append({**row, **(queue_figures(db, name, now) if isinstance(name, str) else empty_queue())})
    known = {r["name"] for r in rows}
    for name in names:
        if name not in known:  # configured, not yet registered by a sink service
            rows.append(unregistered(name))
    service = lease(db, now)
    ran = service is not None or bool(known)  # a sink service ran: the index on sinkPending exists
    outbox = outbox_pending(db) if ran else None
    return {"at": now, "sinks": sorted(rows, key=lambda r: r["name"]), "service": service, "outboxPending": outbox}


def unregistered(name: str) -> dict[str, Any]:
    return {
        "name": text(name),
        "kind": "",
        "configured": True,
        "registered": False,
        "createdAt": None,
        "paused": None,
        "stopped": None,
        "backfill": None,
        "counts": sink_counts(None),
        "stats": {"at": None, "owner": ""},
        "failing": None,
        **empty_queue(),
    }


# --- the configured sinks --------------------------------------------------------------------------------------------
def masked_options(config: Any, secret_names: Iterable[str]) -> dict[str, str]:
    """A sink's own options, secret ones (by the kind's declaration, by name, or by value) as ***."""
    from ..settings.masking import SECRET_WORDS

    hidden = set(secret_names)
    values = set(getattr(config, "secret_values", ()))
    out = {}
    for name, value in sorted(mapping(getattr(config, "options", {})).items()):
        secret = name in hidden or any(w in name.upper() for w in SECRET_WORDS) or value in values
        out[text(name)] = "***" if secret and value else text(value)
    return out


def host_of(url: Any) -> str:
    """A URL's host (and port) only: no credentials, path or query reach the output."""
    try:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(not a URL)"
    host = f"[{host}]" if ":" in host else host
    return text(f"{parts.scheme}://{host}" + (f":{port}" if port else "") if host else "(no host)")


def configured_row(config: Any, secret_names: Iterable[str]) -> dict[str, Any]:
    return {
        "name": text(config.name),
        "kind": text(config.kind),
        "host": host_of(config.url),
        "batch": config.batch,
        "concurrency": config.concurrency,
        "timeout": config.timeout,
        "services": [text(s) for s in config.services] or None,
        "backfill": config.backfill,
        "pace": config.pace,
        "options": masked_options(config, secret_names),
    }


def listing(db: Any, configs: list[Any], secret_names: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """The configured sinks, and the sinks the database knows that are no longer configured."""
    names = {c.name for c in configs}
    rows = [configured_row(c, secret_names.get(c.kind, ())) for c in configs]
    gone = [
        {"name": text(d.get("_id")), "kind": text(d.get("kind")), "createdAt": when(d.get("createdAt"))}
        for d in sink_documents(db)
        if d.get("_id") not in names
    ]
    return {"configured": rows, "unconfigured": gone}


# --- the operator's writes -------------------------------------------------------------------------------------------
def known(db: Any, configured: Iterable[str]) -> set[str]:
    """Sink names the settings configure or the database knows."""
    names = {d["_id"] for d in db[SINKS].find({}, {"_id": 1}).limit(MAX_SINKS + 1) if d["_id"] != SERVICE_ID}
    return {n for n in names if isinstance(n, str)} | set(configured)


NOT_REGISTERED = "no sink service has registered it yet (start `collector sink`)"


def pause(db: Any, name: str, reason_text: str, now: datetime, by: str | None = None) -> tuple[bool, str]:
    """Pause a sink (who: `by`, or this process's user@host); (False, why) when no sink service registered it."""
    from ..sinks import store

    if not store.pause(db, name, by if by is not None else who(), clip(reason_text, 500), now):
        return False, printable(f"cannot pause sink {name}: {NOT_REGISTERED}")
    said = f": {reason_text}" if reason_text else ""
    return True, printable(f"paused sink {name}{said}; deliveries in flight finish, its items keep queueing")


def resume(db: Any, name: str, now: datetime) -> tuple[bool, str]:
    """Lift a pause and a stop (credentials refused); (False, why) when the sink was neither."""
    from ..sinks import store

    doc = mapping(db[SINKS].find_one({"_id": equal(name)}))
    was = [word for word in ("paused", "stopped") if doc.get(word)]
    if not was or not store.resume(db, name, now):
        return False, printable(f"sink {name} is neither paused nor stopped")
    return True, printable(f"resumed sink {name} (was {' and '.join(was)})")


def forget(db: Any, name: str, now: datetime) -> tuple[bool, str]:
    """Forget a sink removed from the settings on purpose: its document and queue entries deleted, its dead
    letters kept. Refused while a live sink service still serves it (its figures written in the last minute)."""
    from ..sinks import store

    doc = mapping(db[SINKS].find_one({"_id": equal(name)}))
    stats, service = mapping(doc.get("stats")), lease(db, now)
    fresh = age(now, stats.get("at"))
    if (
        service
        and service["live"]
        and service["owner"] == text(stats.get("owner"))
        and fresh is not None
        and fresh <= 60
    ):
        return False, printable(
            f"cannot forget sink {name}: the sink service {service['owner']} still serves it; remove it from "
            "that service's SINKS first"
        )
    queued = store.forget(db, name)
    if queued is None:
        return False, printable(f"cannot forget sink {name}: {NOT_REGISTERED}")
    dead = db[DEAD].count_documents({"sink": name})
    return True, printable(
        f"forgot sink {name}: its document and {queued} queue entries deleted; its {dead} dead letters are kept "
        "(sinkDeadLetters); configured again later, it is a new sink (with a backfill unless BACKFILL is false)"
    )


def replay(db: Any, name: str, since: datetime, now: datetime, by: str | None = None) -> tuple[bool, str]:
    """Start a replay walk of the items dated `since` or later; a walk under way is taken over (the new walk
    starts from the first item and covers both), and the line says so."""
    from ..sinks import store

    walk = store.replay(db, name, since, by if by is not None else who(), now)
    if walk is None:
        return False, printable(f"cannot replay sink {name}: {NOT_REGISTERED}")
    start = walk["since"]
    items = f"every item dated from {start:%Y-%m-%d %H:%M:%S} UTC" if start is not None else "every item"
    joined = mapping(walk.get("joined"))
    took = ""
    if "since" in joined:
        was = when(joined.get("since"))
        old = f"a replay of items from {was:%Y-%m-%d %H:%M:%S} UTC" if was is not None else "a backfill"
        took = f" ({old} was under way: it starts over with this one, which covers both)"
    return True, printable(
        f"replay of sink {name} started: {items} is queued again, at the sink's pace{took}; "
        "`collector sinks status` shows how far it got"
    )
