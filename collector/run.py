"""One network run, in three steps: prepare (checks, no I/O), execute (the connector: HTTP only), and the
state change (pure, schedule.py). The engine does the database work around them on its own thread."""
from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from .sdk.connector import Connector, Job, Result
from .sdk.validate import SECRET_FIELDS
from .registry import Registry

from . import schedule
from .sdk.errors import BadResponse, Malformed, NetworkError, Quota, RateLimited, redact
from .sdk.http import Http
from .quota import QuotaMemory
from .settings import Settings
from .store import item_key
from .sdk.validate import UNSTORABLE, check_item, check_network, check_state

log = logging.getLogger("collector.run")
MAX_REFUSED_SHOWN = 3


@dataclass
class Task:
    network: dict
    job: Job
    connector: Connector
    jitter: float = 0.0


@dataclass
class Outcome:
    network: Mapping[str, Any]
    mode: str | None
    update: schedule.Update
    at: datetime
    items: list[dict] = field(default_factory=list)
    error: NetworkError | None = None
    quota: Quota | None = None  # the last rate-limit facts the API gave
    called: bool = False  # whether the connector ran (made API calls)
    duration: float = 0.0
    new_items: int = 0
    saved: bool = False  # the state write was accepted (the lease was still ours)
    wait_until: datetime | None = None  # no call with this token before then (reset, Retry-After, backoff)
    quota_scope: str | None = None  # whose quota the token spent (the connector's quota group)
    tokens: dict[str, Any] = field(default_factory=dict)  # obtained by a token refresh: saved first, always
    skipped: int = 0  # entries that could not be read or items that could not be stored
    skip_reason: str | None = None
    refused: list[tuple[str, str]] = field(default_factory=list)  # (itemId, why) refused by the database
    # progress of the save, so that a database hiccup retries only what is missing
    docs: list[dict] | None = None
    duplicates: int = 0
    tokens_saved: bool = False
    items_saved: bool = False
    state_saved: bool = False

    @property
    def status(self) -> str:
        if self.error is None:
            return "rateLimit" if self.update.values.get("mode") == "rateLimit" else "ok"
        return self.error.kind

    @property
    def done(self) -> bool:
        return self.state_saved


def secrets_of(network: Mapping[str, Any]) -> list[str]:
    return [network[name] for name in SECRET_FIELDS if isinstance(network.get(name), str)]


def prepare(network: dict, registry: Registry, settings: Settings, http: Http, now: datetime,
            jitter: float, quotas: QuotaMemory | None = None) -> Task | Outcome:
    """A Task ready to run, or the Outcome of a network that cannot or must not run now: an unknown service,
    bad fields, or a token the quota memory knows is spent (moved to its reset time without an API call)."""
    mode = None
    try:
        check_network(network)
        try:
            mode = schedule.effective_mode(network)
        except ValueError as exc:
            raise Malformed(str(exc)) from None
        connector = registry.get(network.get("service"))(settings, http)
        connector.validate(network)
        until = quotas.blocked_until(connector.quota_scope, network["accessToken"], now) if quotas else None
        if until is not None:
            raise RateLimited("token out of quota (remembered); no call made", until)
    except NetworkError as error:
        return fail(network, mode, error, settings, now, jitter)
    return Task(network, Job(network=network, mode=mode, now=now), connector, jitter)


def execute(task: Task, settings: Settings, now: datetime, jitter: float | None = None) -> Outcome:
    """Run the connector. Never raises: every failure becomes the Outcome's error."""
    network, job, connector = task.network, task.job, task.connector
    jitter = task.jitter if jitter is None else jitter
    started = time.perf_counter()
    try:
        result: Result = connector.run(job)
        items, refused = keep_storable(result.items, connector)
        check_state(result.state)
        update = schedule.on_success(network, job.mode, result, settings, now, jitter)
        outcome = Outcome(network, job.mode, update, now, items=items, quota=result.quota,
                          wait_until=result.wait_until, tokens=result.tokens)
        if refused:
            refuse(outcome, refused)
    except NetworkError as error:
        outcome = fail(network, job.mode, error, settings, now, jitter)
    except RecursionError:  # a structure nested too deeply for the mapping: the API's answer, not our bug
        outcome = fail(network, job.mode, BadResponse("the API answer is nested too deeply to read"),
                       settings, now, jitter)
    except Exception as exc:  # a connector bug must not stop the pass
        outcome = crashed(network, job.mode, exc, settings, now, jitter)
    outcome.skipped += connector.skipped
    outcome.skip_reason = outcome.skip_reason or connector.skip_reason
    if outcome.error is None and connector.skipped:
        note_skipped(outcome)
    outcome.called = True
    outcome.quota_scope = connector.quota_scope
    outcome.duration = time.perf_counter() - started
    return outcome


def crashed(network: Mapping[str, Any], mode: str | None, exc: BaseException, settings: Settings,
            now: datetime, jitter: float) -> Outcome:
    """A bug in our code (a connector's or the engine's) while handling one network: an `internal` error there."""
    error = NetworkError(f"internal error: {type(exc).__name__}: {exc}")
    error.kind = "internal"
    error.refreshed = getattr(exc, "refreshed", {}) if isinstance(getattr(exc, "refreshed", None), dict) else {}
    outcome = fail(network, mode, error, settings, now, jitter)  # redacts the message
    # the frames only: an exception's text may hold values (tokens) that only the redacted message hides
    log.error("network %s (%s) crashed: %s\n%s", network.get("_id"), str(network.get("service"))[:40],
              error.message, "".join(traceback.format_tb(exc.__traceback__)).rstrip())
    return outcome


def keep_storable(items: list, connector: Connector) -> tuple[list[dict], list[tuple[str, str]]]:
    """Split a run's items: those that can be stored; those the database would refuse (itemId, why), to be
    named in the network's lastError; the others (no usable itemId, type or source) are skipped and counted
    on the connector. BadResponse when a non-empty list has nothing to store."""
    if not isinstance(items, list):
        raise BadResponse(f"connector returned {type(items).__name__}, not a list of items")
    kept, refused, first = [], [], None
    for item in items:
        if isinstance(item, dict):
            item["type"] = connector.type_of_items  # the engine stamps the type: connectors never set it
        problem = check_item(item, connector.type_of_items)
        if problem is None:
            kept.append(item)
        elif isinstance(item, dict) and problem.startswith(UNSTORABLE):
            refused.append((str(item.get("itemId")), problem[len(UNSTORABLE):]))
        else:
            first = first or problem
    if items and not kept:
        raise BadResponse(f"no item of the page can be stored ({len(items)} items; first: "
                          f"{first or refused[0][1]})")
    connector.skip(len(items) - len(kept) - len(refused), first)
    return kept, refused


def note_skipped(outcome: Outcome) -> None:
    """Count skipped entries in the network: `skippedItems` (a running total) and `lastSkipped`."""
    previous = outcome.network.get("skippedItems")
    total = previous if isinstance(previous, int) and not isinstance(previous, bool) and previous >= 0 else 0
    outcome.update.values["skippedItems"] = min(total + outcome.skipped, 2**62)
    outcome.update.values["lastSkipped"] = {"count": outcome.skipped, "reason": outcome.skip_reason,
                                            "at": outcome.at}


def refuse(outcome: Outcome, refused: list[tuple[str, str]]) -> None:
    """Items the database refused: named in `lastError` (not counted as a failed run), counted as skipped."""
    outcome.refused.extend(refused)
    shown = "; ".join(f"item {item_id[:80]!r}: {why[:160]}" for item_id, why in refused[:MAX_REFUSED_SHOWN])
    more = f" (and {len(refused) - MAX_REFUSED_SHOWN} more)" if len(refused) > MAX_REFUSED_SHOWN else ""
    if outcome.error is None:
        outcome.update.values["lastError"] = {"status": None, "kind": "itemRefused",
                                              "message": f"refused by the database: {shown}{more}",
                                              "at": outcome.at}
        outcome.skipped += len(refused)
        outcome.skip_reason = outcome.skip_reason or f"refused by the database: {refused[0][1][:160]}"
        note_skipped(outcome)


def fail(network, mode, error: NetworkError, settings, now, jitter) -> Outcome:
    secrets = secrets_of(network) + secrets_of(error.refreshed)
    error.message = redact(error.message, secrets)
    update = schedule.on_failure(network, mode, error, settings, now, jitter, secrets)
    update.values.update(error.refreshed)
    wait_until = error.reset if isinstance(error, RateLimited) else None
    return Outcome(network, mode, update, now, error=error, wait_until=wait_until, tokens=dict(error.refreshed))


def stored_items(outcome: Outcome, user_data: dict | None) -> list[dict]:
    """The outcome's items as `items` documents: keyed by (user, type, itemId), with userData and date."""
    user = outcome.network["user"]
    docs = []
    for item in outcome.items:
        doc = {**item, "user": user, "date": outcome.at}
        doc["_id"] = item_key(user, doc["type"], doc["itemId"])
        if user_data is not None:
            doc["userData"] = user_data
        docs.append(doc)
    return docs


def log_run(outcome: Outcome) -> None:
    network = outcome.network
    level = logging.WARNING if outcome.error is not None and outcome.error.counts_as_error else logging.INFO
    message = "run service=%s user=%s mode=%s new_items=%d items=%d skipped=%d duration_ms=%.0f status=%s"
    args = [str(network.get("service"))[:40], str(network.get("user"))[:80], outcome.mode, outcome.new_items,
            len(outcome.items), outcome.skipped, outcome.duration * 1000, outcome.status]
    if outcome.skip_reason:
        message += " skip_reason=%r"
        args.append(outcome.skip_reason)
    if outcome.error is not None:
        message += " error=%r"
        args.append(outcome.error.message)
    log.log(level, message, *args)
