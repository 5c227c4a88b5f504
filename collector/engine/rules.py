"""Pure scheduling rules: from a network, what happened to its run, the settings and the time, the state change.

No I/O and no clock here: `now` and the backoff `jitter` (a number in [0, 1)) are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..modes import MODES, Mode  # the modes' one home; MODES and Mode are used from here too
from ..sdk.connector import Result
from ..sdk.errors import Interrupted, NetworkError, RateLimited, Retired, Transient, Unauthorized, redact
from ..sdk.redaction import clip
from ..sdk.validate import storable_text
from ..settings import Settings
from .store.filters import park


@dataclass(frozen=True)
class Update:
    """A state change: fields to $set and fields to $unset. Built whole by the rules below; never edited."""

    values: Mapping[str, Any] = field(default_factory=dict)
    unset: frozenset[str] = frozenset()


def effective_mode(network: Mapping[str, Any]) -> Mode:
    """The mode a run works in: a rateLimit network resumes its prevMode; a missing mode is initial."""
    mode = network.get("mode")
    if mode is None:
        return Mode.INITIAL
    if mode == Mode.RATE_LIMIT:
        prev = network.get("prevMode")
        return Mode(prev) if prev in MODES else Mode.INITIAL
    if mode in MODES:
        return Mode(mode)
    raise ValueError(f"field 'mode' must be one of initial, normal, rateLimit, got {mode!r}")


def schedule_lag(networks: Iterable[Mapping[str, Any]], now: datetime) -> float:
    """How overdue the most overdue of these networks is, in seconds (0 for none or none overdue)."""
    lags = [0.0]
    for network in networks:
        at = network.get("scheduledTo")
        if isinstance(at, datetime):
            at = at if at.tzinfo is not None else at.replace(tzinfo=now.tzinfo)
            lags.append((now - at).total_seconds())
    return max(lags)


def interval(mode: str, service: str, settings: Settings) -> timedelta:
    if mode == Mode.NORMAL:
        return timedelta(seconds=settings.normal_interval)
    return timedelta(seconds=settings.initial_interval_for(str(service)))


def backoff(errors: int, settings: Settings, jitter: float) -> timedelta:
    """Exponential in the error count, capped, with 'equal jitter': between half and all of the delay."""
    delay = min(settings.backoff_max, settings.backoff_base * 2 ** max(errors - 1, 0))
    return timedelta(seconds=delay * (0.5 + jitter / 2))


def rate_limited(mode: str, reset: datetime | None, settings: Settings, now: datetime, jitter: float = 0.0) -> Update:
    """Enter rateLimit: come back at the reset the API gave, else after RATE_LIMIT_INTERVAL; a reset already past
    waits RATE_LIMIT_MIN_WAIT (with jitter), never "now", and none waits longer than RATE_LIMIT_MAX_WAIT
    (servers send any number)."""
    at = reset if reset is not None else now + timedelta(seconds=settings.rate_limit_interval)
    return Update(
        {"mode": str(Mode.RATE_LIMIT), "prevMode": str(mode), "scheduledTo": clamp_wait(at, settings, now, jitter)}
    )


def clamp_wait(at: datetime, settings: Settings, now: datetime, jitter: float = 0.0) -> datetime:
    """A time a server asked us to wait until, at most now + RATE_LIMIT_MAX_WAIT; one not in the future becomes
    now + RATE_LIMIT_MIN_WAIT (+ up to 50% jitter)."""
    if at <= now:  # a reset already past (clock skew, a stale header) would mean "now": wait the minimum
        at = now + timedelta(seconds=settings.rate_limit_min_wait * (1 + jitter / 2))
    return min(at, latest_wait(settings, now))


def latest_wait(settings: Settings, now: datetime) -> datetime:
    """The latest any wait a server asks for may end: the one bound on every use of a reset (a network's
    schedule, the quota memory, the facts shared between collectors, housekeeping's repairs)."""
    return now + timedelta(seconds=settings.rate_limit_max_wait)


def on_success(
    network: Mapping[str, Any], mode: str, result: Result, settings: Settings, now: datetime, jitter: float = 0.0
) -> Update:
    next_mode = Mode.NORMAL if mode == Mode.INITIAL and result.done else Mode(mode)
    base = {**result.state, "errors": 0, "lastExecution": now, "lastSuccess": now}
    if result.quota is not None and result.quota.exhausted():
        reset = result.quota.reset
        if reset is not None and result.wait_until is not None:
            reset = max(reset, result.wait_until)
        limited = rate_limited(next_mode, reset or result.wait_until, settings, now, jitter)
        return Update({**base, **limited.values}, limited.unset)
    scheduled = now + interval(next_mode, network.get("service", ""), settings)
    if result.wait_until is not None:  # the API asked for a pause (Stack Exchange `backoff`): no sooner
        scheduled = max(scheduled, min(result.wait_until, latest_wait(settings, now)))
    return Update({**base, "mode": str(next_mode), "scheduledTo": scheduled}, frozenset({"prevMode"}))


def on_failure(
    network: Mapping[str, Any],
    mode: str | None,
    error: NetworkError,
    settings: Settings,
    now: datetime,
    jitter: float,
    secrets=(),
) -> Update:
    if isinstance(error, RateLimited):
        limited = rate_limited(mode or Mode.INITIAL, error.reset, settings, now, jitter)
        return Update({**limited.values, "lastExecution": now}, limited.unset)
    if isinstance(error, Interrupted):  # the collector is stopping: leave the network as it was, due again
        due_at = network.get("scheduledTo")  # as it was due (the claim moved it to the lease's end)
        return Update({"scheduledTo": due_at if isinstance(due_at, datetime) else now})
    last_error = {
        "status": error.status,
        "kind": str(error.kind),
        "message": storable_text(redact(error.message, secrets)),
        "at": now,
    }
    # a network that cannot run leaves the due range (parked: looked at again, in case another program cleared
    # the flag without touching scheduledTo)
    if isinstance(error, Unauthorized):
        return Update({"unauthorized": True, "lastError": last_error, "lastExecution": now, "scheduledTo": park(now)})
    if isinstance(error, Retired):
        return Update({"disabled": True, "lastError": last_error, "lastExecution": now, "scheduledTo": park(now)})
    errors = _error_count(network) + 1
    if isinstance(error, Transient):
        scheduled = now + backoff(errors, settings, jitter)
    else:
        scheduled = now + interval(mode or Mode.INITIAL, network.get("service", ""), settings)
    values = {"errors": errors, "lastError": last_error, "lastExecution": now, "scheduledTo": scheduled}
    if errors >= settings.max_errors and error.disables:
        values.update(disabled=True, scheduledTo=park(now))
    return Update(values)


def with_skips(
    update: Update,
    network: Mapping[str, Any],
    count: int,
    reason: str | None,
    refused: list[tuple[str, str]] | tuple[tuple[str, str], ...],
    now: datetime,
) -> Update:
    """A successful run's update, plus the entries it could not keep: `skippedItems` (a running total) and
    `lastSkipped`; items the database would refuse are named in `lastError` (kind itemRefused, not a failure)."""
    if count <= 0:
        return update
    previous = network.get("skippedItems")
    total = previous if isinstance(previous, int) and not isinstance(previous, bool) and previous >= 0 else 0
    values = {
        **update.values,
        "skippedItems": min(total + count, 2**62),
        "lastSkipped": {
            "count": count,
            "reason": storable_text(reason) if isinstance(reason, str) else reason,
            "at": now,
        },
    }
    if refused:
        shown = "; ".join(
            f"item {clip(item_id, 80)!r}: {clip(why, 160)}" for item_id, why in refused[:MAX_REFUSED_SHOWN]
        )
        more = f" (and {len(refused) - MAX_REFUSED_SHOWN} more)" if len(refused) > MAX_REFUSED_SHOWN else ""
        values["lastError"] = {
            "status": None,
            "kind": "itemRefused",
            "message": storable_text(f"refused by the database: {shown}{more}"),
            "at": now,
        }
    return Update(values, update.unset)


MAX_REFUSED_SHOWN = 3


def _error_count(network: Mapping[str, Any]) -> int:
    value = network.get("errors")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
