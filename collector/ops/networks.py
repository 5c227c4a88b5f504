"""`collector networks`: what an operator does to networks by hand — list, show, enable, reset.

Pure queries and updates over the `networks` collection; the command line (cli/networks.py) prints what they return.
Secrets are never shown; a network leased to a running collector is not changed under it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from ..engine.store import LEASE_DEFAULT, Store, due_query, lease_horizon, lease_state, not_date
from ..engine.store.sealing import is_sealed
from ..sdk.redaction import clip, redact, secret_name
from ..sdk.timeutil import as_utc
from ..sdk.validate import SECRET_FIELDS
from ..textout import printable
from .ids import AdminError, equal, format_id, parse_id

# the connector's walk through the history: unset by `reset` so the next run starts from the first page
PROGRESS_FIELDS = ("page", "cursor", "seenIds", "sinceLikedAt", "etag", "prevMode", "skippedItems")


class Changes(list):
    """The lines of a change command, one per network; `refused` counts the networks left as they were because a
    collector holds them (or took them between our read and our write)."""

    refused = 0


def state_filter(state: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    if state == "due":  # in the due range, or without a date yet (state_of's "due"), whatever the mode
        query = due_query("initial", now, lease_seconds)
        del query["mode"], query["scheduledTo"]
        query["$or"] = [{"scheduledTo": {"$lte": now}}, *not_date("scheduledTo")["$or"]]
        return query
    filters: dict[str, dict[str, Any]] = {
        "leased": {"leaseUntil": {"$gt": now, "$lte": lease_horizon(now, lease_seconds)}},
        "rateLimit": {"mode": "rateLimit"},
        "disabled": {"disabled": True},
        "unauthorized": {"unauthorized": True},
        "erroring": {"errors": {"$gt": 0}},
        "skipped": {"skip": True},
    }
    return filters[state]


def state_of(network: Mapping[str, Any], now: datetime, lease_seconds: float = LEASE_DEFAULT) -> str:
    """One word for a network, the most pressing first: `staleLease` for a lease whose end lies further ahead
    than a lease of `lease_seconds` reaches (no live holder keeps it: the next claim takes it over)."""
    lease = lease_state(network.get("leaseUntil"), now, lease_seconds)
    if lease in ("held", "far"):
        return "leased" if lease == "held" else "staleLease"
    for field, word in (("disabled", "disabled"), ("unauthorized", "unauthorized"), ("skip", "skipped")):
        if network.get(field) is True:
            return word
    if network.get("mode") == "rateLimit":
        return "rateLimit"
    at = network.get("scheduledTo")
    if not isinstance(at, datetime) or as_utc(at) <= now:
        return "due"
    return "erroring" if _errors(network) else "waiting"


def key_filter(key: str) -> dict[str, Any]:
    """The filter `find` runs for `key`: the user with this email, or the network with this id (ids.parse_id:
    AdminError for an id that is no JSON, NotAnId for a query given as an id); by equality only."""
    if "@" in key and key.strip()[:1] not in ('"', "{", "["):
        return {"user": equal(key)}
    return {"_id": equal(parse_id(key))}


def find(db: Any, key: str) -> list[dict]:
    """The network with this id, or the networks of the user with this email."""
    query = key_filter(key)
    if "user" in query:
        found = list(db.networks.find(query).sort("service", 1))
    else:
        found = [d for d in [db.networks.find_one(query)] if d is not None]
    if not found:
        raise AdminError(f"no network {'of user ' if '@' in key else 'with id '}{printable(clip(key, 200))}")
    return found


def list_query(
    now: datetime, service: str | None, user: str | None, state: str | None, lease_seconds: float = LEASE_DEFAULT
) -> dict[str, Any]:
    query: dict[str, Any] = {}
    if service:
        query["service"] = equal(service)
    if user:
        query["user"] = equal(user)
    if state:
        query.update(state_filter(state, now, lease_seconds))
    return query


def list_networks(
    db: Any,
    now: datetime,
    service: str | None = None,
    user: str | None = None,
    state: str | None = None,
    limit: int = 50,
    lease_seconds: float = LEASE_DEFAULT,
) -> list[dict[str, Any]]:
    query = list_query(now, service, user, state, lease_seconds)
    found = db.networks.find(query).sort([("scheduledTo", 1), ("_id", 1)]).limit(limit)
    return [row(d, now, lease_seconds) for d in found]


def count_networks(
    db: Any,
    now: datetime,
    service: str | None = None,
    user: str | None = None,
    state: str | None = None,
    lease_seconds: float = LEASE_DEFAULT,
) -> int:
    """How many networks `list_networks` would show without a limit."""
    return db.networks.count_documents(list_query(now, service, user, state, lease_seconds))


def row(network: Mapping[str, Any], now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    last = network.get("lastError")
    error: Mapping[str, Any] = last if isinstance(last, Mapping) else {}
    return {
        "id": format_id(network.get("_id")),
        "user": network.get("user"),
        "service": network.get("service"),
        "mode": network.get("mode") or "initial",
        "state": state_of(network, now, lease_seconds),
        "errors": _errors(network),
        "lastErrorKind": error.get("kind"),
        "lastErrorAt": (_when(error.get("at"), now) or _when(network.get("lastExecution"), now)) if error else None,
        "scheduledTo": _when(network.get("scheduledTo"), now),
    }


def shown(network: Mapping[str, Any], now: datetime, lease_seconds: float = LEASE_DEFAULT) -> dict[str, Any]:
    """Every field, secrets masked, times as they are (RFC 3339 once printed as JSON) and, in `relative`, how far
    from now each one is."""
    out: dict[str, Any] = {"_id": network.get("_id")}
    ages: dict[str, str] = {}
    for name, value in network.items():
        out[name] = masked(value, name)
        if isinstance(value, datetime):
            ages[str(name)] = relative(as_utc(value), now)
    out["state"] = state_of(network, now, lease_seconds)
    out["relative"] = ages
    return out


def masked(value: Any, name: object = None, depth: int = 0) -> Any:
    """`value` with every secret hidden: a field whose name holds a secret (at any depth: `accessToken`,
    `oauth.token`, `tokenSecret`, `password`, `apiKey`, …) as `***`, and in every string any secret the
    process knows or any value of a credential's shape (sdk.redaction). A sealed value (TOKEN_KEY) is hidden
    the same way under any name."""
    if name in SECRET_FIELDS or secret_name(name) or is_sealed(value):
        return "***" if value not in (None, "", [], {}) else value
    if depth > 100:
        return "…"
    if isinstance(value, Mapping):
        return {k: masked(v, k, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(v, None, depth + 1) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value


def enable(
    db: Any,
    now: datetime,
    ids: Iterable[str] = (),
    service: str | None = None,
    kind: str | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> Changes:
    """Clear disabled, errors and lastError of the chosen networks and schedule them now; `unauthorized` stays
    (a fresh authorisation clears it) unless `force`. Returns one line per network: what changed, or why not."""

    def plan(network: Mapping[str, Any]) -> tuple[str, dict | None]:
        unset = ["disabled", "lastError"] + (["unauthorized"] if force else [])
        cleared = [f for f in unset if network.get(f) is not None] + (["errors"] if _errors(network) else [])
        kept = bool(network.get("unauthorized")) and not force
        if not cleared and not kept:
            return "nothing to clear", None
        note = "; unauthorized kept (--force clears it)" if kept else ""
        update = {"$set": {"errors": 0, "scheduledTo": now}, "$unset": dict.fromkeys(unset, "")}
        return f"cleared {', '.join(cleared) or 'nothing'}, scheduled now{note}", update

    return _change(db, _chosen(db, ids, service, kind), now, plan, dry_run)


def reset(db: Any, now: datetime, ids: Iterable[str], dry_run: bool = False) -> Changes:
    """Back to `initial` from the start of the history; items are kept (their unique key stops duplicates)."""

    def plan(network: Mapping[str, Any]) -> tuple[str, dict | None]:
        dropped = ", ".join(f for f in PROGRESS_FIELDS if f in network) or "-"
        update = {"$set": {"mode": "initial", "scheduledTo": now}, "$unset": dict.fromkeys(PROGRESS_FIELDS, "")}
        return f"mode {network.get('mode') or 'initial'} -> initial, dropped {dropped}", update

    return _change(db, [n for key in ids for n in find(db, key)], now, plan, dry_run)


def _change(
    db: Any,
    networks: list[dict],
    now: datetime,
    plan: Callable[[Mapping[str, Any]], tuple[str, dict | None]],
    dry_run: bool,
) -> Changes:
    """Apply `plan` to each network not leased now: one line each; the write only matches while the lease is
    still the one read (a collector that claimed it meanwhile wins, and the line says the network was not
    changed)."""
    lines = Changes()
    for network in networks:
        what = printable(f"{format_id(network['_id'])} {network.get('service')} {network.get('user')}")
        if _leased(network, now):
            stale = lease_state(network.get("leaseUntil"), now) == "far"
            note = " (its end lies too far ahead: a collector takes it over at its next claim)" if stale else ""
            lines.append(f"{what}: leased by {network.get('leaseOwner')}, left as it is (try again later){note}")
            lines.refused += 1
            continue
        line, update = plan(network)
        if update is not None and not dry_run:
            if not Store(db).change_unless_leased(network["_id"], network.get("leaseUntil"), update):
                lines.append(f"{what}: not changed: a collector took it (try again later)")
                lines.refused += 1
                continue
        lines.append(f"{what}: {line}")
    return lines


def relative(at: datetime, now: datetime) -> str:
    seconds = (at - now).total_seconds()
    size = abs(seconds)
    text = (
        f"{size:.0f}s"
        if size < 120
        else f"{size / 60:.0f}m"
        if size < 7200
        else f"{size / 3600:.0f}h"
        if size < 172800
        else f"{size / 86400:.0f}d"
    )
    return f"in {text}" if seconds > 0 else f"{text} ago"


HELD = {"disabled": "not until enabled", "unauthorized": "not until authorised", "skipped": "not while skipped"}


def render_rows(rows: list[dict], now: datetime) -> str:
    """`networks list` as a table: `list_networks`' rows, text from documents cut and escaped."""
    lines = [f"{'id':<24} {'user':<28} {'service':<13} {'mode':<9} {'state':<12} {'errors':>6}  last error  next run"]
    for r in rows:
        kind = printable(clip(r["lastErrorKind"], 24))[:24] if r["lastErrorKind"] is not None else None
        error = " ".join(x for x in (kind, r["lastErrorAt"] and relative(r["lastErrorAt"], now)) if x) or "-"
        at = r["scheduledTo"]
        nxt = relative(at, now) if isinstance(at, datetime) else "now"
        nxt = HELD.get(r["state"], nxt)
        user, service, mode = (printable(clip(r[k], 80)) for k in ("user", "service", "mode"))
        lines.append(
            f"{r['id']:<24} {user[:28]:<28} {service[:13]:<13} {mode[:9]:<9} "
            f"{r['state']:<12} {r['errors']:>6}  {error}  {nxt}"
        )
    if not rows:
        lines.append("(no network matches)")
    return "\n".join(lines)


def _chosen(db: Any, ids: Iterable[str], service: str | None, kind: str | None) -> list[dict]:
    ids = list(ids)
    if ids and service:
        raise AdminError("give network ids or --service, not both")
    if ids:
        return [n for key in ids for n in find(db, key)]
    if not service:
        raise AdminError("give network ids or --service")
    query: dict[str, Any] = {"service": equal(service), "$or": [{"disabled": True}, {"errors": {"$gt": 0}}]}
    if kind:
        query["lastError.kind"] = equal(kind)
    return list(db.networks.find(query).sort("_id", 1))


def _leased(network: Mapping[str, Any], now: datetime) -> bool:
    """Whether an operator's change leaves the network alone: any lease end in the future (one too far ahead
    too: the collector that takes it over says so; a change is never made under a holder)."""
    lease = network.get("leaseUntil")
    return isinstance(lease, datetime) and as_utc(lease) > now


def _errors(network: Mapping[str, Any]) -> int:
    errors = network.get("errors")
    return errors if isinstance(errors, int) and not isinstance(errors, bool) else 0


def _when(value: Any, now: datetime) -> datetime | None:
    return as_utc(value) if isinstance(value, datetime) else None
