"""One network run, in three steps: prepare (checks, no I/O), execute (the connector: HTTP only), and the
state change (pure, schedule.py). The engine does the database work around them on its own thread."""
from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from connectors.base import SECRET_FIELDS, Connector, Job, Result
from connectors.registry import Registry

from . import schedule
from .errors import BadResponse, Malformed, NetworkError, Quota, RateLimited, redact
from .http import Http
from .quota import QuotaMemory
from .settings import Settings
from .store import item_key

log = logging.getLogger("collector.executor")


@dataclass
class Task:
    network: dict
    job: Job
    connector: Connector


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
    saved: bool = False
    wait_until: datetime | None = None  # no call with this token before then (reset, Retry-After, backoff)
    quota_scope: str | None = None  # whose quota the token spent (the connector's quota group)

    @property
    def status(self) -> str:
        if self.error is None:
            return "rateLimit" if self.update.values.get("mode") == "rateLimit" else "ok"
        return self.error.kind


def secrets_of(network: Mapping[str, Any]) -> list[str]:
    return [network[name] for name in SECRET_FIELDS if isinstance(network.get(name), str)]


def prepare(network: dict, registry: Registry, settings: Settings, http: Http, now: datetime,
            jitter: float, quotas: QuotaMemory | None = None) -> Task | Outcome:
    """A Task ready to run, or the Outcome of a network that cannot or must not run now: an unknown service,
    bad fields, or a token the quota memory knows is spent (moved to its reset time without an API call)."""
    mode = None
    try:
        if not isinstance(network.get("user"), str) or not network["user"]:
            raise Malformed("field 'user' must be the user's email")
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
    return Task(network, Job(network=network, mode=mode, now=now), connector)


def execute(task: Task, settings: Settings, now: datetime, jitter: float) -> Outcome:
    """Run the connector. Never raises: every failure becomes the Outcome's error."""
    network, job = task.network, task.job
    started = time.perf_counter()
    try:
        result: Result = task.connector.run(job)
        check_items(result.items, task.connector.name)
        outcome = Outcome(network, job.mode, schedule.on_success(network, job.mode, result, settings, now), now,
                          items=result.items, quota=result.quota, wait_until=result.wait_until)
    except NetworkError as error:
        outcome = fail(network, job.mode, error, settings, now, jitter)
    except Exception as exc:  # a connector bug must not stop the pass
        error = NetworkError(f"internal error in connector: {type(exc).__name__}: {exc}")
        error.kind = "internal"
        error.refreshed = getattr(exc, "refreshed", {})
        outcome = fail(network, job.mode, error, settings, now, jitter)  # redacts the message
        # the frames only: an exception's text may hold values (tokens) that only the redacted message hides
        log.error("connector %s crashed: %s\n%s", network.get("service"), error.message,
                  "".join(traceback.format_tb(exc.__traceback__)).rstrip())
    outcome.called = True
    outcome.quota_scope = task.connector.quota_scope
    outcome.duration = time.perf_counter() - started
    return outcome


def check_items(items: list, service: str) -> None:
    """Every item needs a non-empty string itemId, its service as type, and a source URL before anything is
    saved."""
    for item in items:
        if not isinstance(item, dict):
            raise BadResponse(f"connector returned an item that is not a dict: {type(item).__name__}")
        for name in ("itemId", "type", "source"):
            if not isinstance(item.get(name), str) or not item[name]:
                raise BadResponse(f"item field {name!r} must be a non-empty string, got {item.get(name)!r}")
        if item["type"] != service:
            raise BadResponse(f"item type {item['type']!r} is not the connector's service {service!r}")


def fail(network, mode, error: NetworkError, settings, now, jitter) -> Outcome:
    secrets = secrets_of(network) + secrets_of(error.refreshed)
    error.message = redact(error.message, secrets)
    update = schedule.on_failure(network, mode, error, settings, now, jitter, secrets)
    update.values.update(error.refreshed)
    wait_until = error.reset if isinstance(error, RateLimited) else None
    return Outcome(network, mode, update, now, error=error, wait_until=wait_until)


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
    message = "run service=%s user=%s mode=%s new_items=%d items=%d duration_ms=%.0f status=%s"
    args = [network.get("service"), network.get("user"), outcome.mode, outcome.new_items,
            len(outcome.items), outcome.duration * 1000, outcome.status]
    if outcome.error is not None:
        message += " error=%r"
        args.append(outcome.error.message)
    log.log(level, message, *args)
