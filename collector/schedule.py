"""Pure scheduling rules: from a network, what happened to its run, the settings and the time, the state change.

No I/O and no clock here: `now` and the backoff `jitter` (a number in [0, 1)) are passed in.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Mapping

from .sdk.connector import Result

from .sdk.errors import Interrupted, NetworkError, RateLimited, Retired, Transient, Unauthorized, redact
from .settings import Settings

MODES = ("initial", "normal")


@dataclass
class Update:
    values: dict[str, Any] = field(default_factory=dict)  # fields to $set
    unset: set[str] = field(default_factory=set)  # fields to $unset


def effective_mode(network: Mapping[str, Any]) -> str:
    """The mode a run works in: a rateLimit network resumes its prevMode; a missing mode is initial."""
    mode = network.get("mode")
    if mode is None:
        return "initial"
    if mode == "rateLimit":
        prev = network.get("prevMode")
        return prev if prev in MODES else "initial"
    if mode in MODES:
        return mode
    raise ValueError(f"field 'mode' must be one of initial, normal, rateLimit, got {mode!r}")


def interval(mode: str, service: str, settings: Settings) -> timedelta:
    if mode == "normal":
        return timedelta(seconds=settings.normal_interval)
    return timedelta(seconds=settings.initial_interval_for(str(service)))


def backoff(errors: int, settings: Settings, jitter: float) -> timedelta:
    """Exponential in the error count, capped, with 'equal jitter': between half and all of the delay."""
    delay = min(settings.backoff_max, settings.backoff_base * 2 ** max(errors - 1, 0))
    return timedelta(seconds=delay * (0.5 + jitter / 2))


def rate_limited(mode: str, reset: datetime | None, settings: Settings, now: datetime,
                 jitter: float = 0.0) -> Update:
    """Enter rateLimit: come back at the reset the API gave, else after RATE_LIMIT_INTERVAL; a reset already past
    waits RATE_LIMIT_MIN_WAIT (with jitter), never "now", and none waits longer than RATE_LIMIT_MAX_WAIT
    (servers send any number)."""
    at = reset if reset is not None else now + timedelta(seconds=settings.rate_limit_interval)
    return Update({"mode": "rateLimit", "prevMode": mode, "scheduledTo": clamp_wait(at, settings, now, jitter)})


def clamp_wait(at: datetime, settings: Settings, now: datetime, jitter: float = 0.0) -> datetime:
    """A time a server asked us to wait until, at most now + RATE_LIMIT_MAX_WAIT; one not in the future becomes
    now + RATE_LIMIT_MIN_WAIT (+ up to 50% jitter)."""
    if at <= now:  # a reset already past (clock skew, a stale header) would mean "now": wait the minimum
        at = now + timedelta(seconds=settings.rate_limit_min_wait * (1 + jitter / 2))
    return min(at, now + timedelta(seconds=settings.rate_limit_max_wait))


def on_success(network: Mapping[str, Any], mode: str, result: Result, settings: Settings,
               now: datetime, jitter: float = 0.0) -> Update:
    next_mode = "normal" if mode == "initial" and result.done else mode
    base = {**result.state, "errors": 0, "lastExecution": now, "lastSuccess": now}
    if result.quota is not None and result.quota.exhausted():
        reset = result.quota.reset
        if reset is not None and result.wait_until is not None:
            reset = max(reset, result.wait_until)
        update = rate_limited(next_mode, reset or result.wait_until, settings, now, jitter)
        update.values = {**base, **update.values}
        return update
    scheduled = now + interval(next_mode, network.get("service", ""), settings)
    if result.wait_until is not None:  # the API asked for a pause (Stack Exchange `backoff`): no sooner
        latest = now + timedelta(seconds=settings.rate_limit_max_wait)
        scheduled = max(scheduled, min(result.wait_until, latest))
    return Update({**base, "mode": next_mode, "scheduledTo": scheduled}, {"prevMode"})


def on_failure(network: Mapping[str, Any], mode: str | None, error: NetworkError, settings: Settings,
               now: datetime, jitter: float, secrets=()) -> Update:
    if isinstance(error, RateLimited):
        update = rate_limited(mode or "initial", error.reset, settings, now, jitter)
        update.values["lastExecution"] = now
        return update
    if isinstance(error, Interrupted):  # the collector is stopping: leave the network as it was, due again
        return Update()
    last_error = {"status": error.status, "kind": error.kind,
                  "message": redact(error.message, secrets), "at": now}
    if isinstance(error, Unauthorized):
        return Update({"unauthorized": True, "lastError": last_error, "lastExecution": now})
    if isinstance(error, Retired):
        return Update({"disabled": True, "lastError": last_error, "lastExecution": now})
    errors = _error_count(network) + 1
    if isinstance(error, Transient):
        scheduled = now + backoff(errors, settings, jitter)
    else:
        scheduled = now + interval(mode or "initial", network.get("service", ""), settings)
    update = Update({"errors": errors, "lastError": last_error, "lastExecution": now, "scheduledTo": scheduled})
    if errors >= settings.max_errors:
        update.values["disabled"] = True
    return update


def _error_count(network: Mapping[str, Any]) -> int:
    value = network.get("errors")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
