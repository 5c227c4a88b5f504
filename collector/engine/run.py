"""One run: one network executed once (see the glossary in docs/ARCHITECTURE.md).

Three steps: `prepare` (checks, no I/O) gives a `Run` ready to execute, or the `RunResult` of a network that must
not run now; `execute` (the connector: HTTP and mapping only, on a worker thread) gives its `RunResult`; the state
change inside it comes from the pure rules in rules.py. A `RunResult` is an immutable record, returned whole;
the engine saves it on its own thread.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from ..sdk.connector import Connector, Job
from ..sdk.errors import BadResponse, Malformed, NetworkError, OutOfDescriptors, Quota, RateLimited, exhausted, redact
from ..sdk.htmltext import decode_item_text
from ..sdk.http import Http
from ..sdk.items import Item
from ..sdk.redaction import clip, secret_values
from ..sdk.redaction import redact as mask_everywhere
from ..sdk.slots import serving
from ..sdk.validate import SECRET_FIELDS, UNSTORABLE, check_item, check_network, check_state
from ..settings import Settings
from . import rules as schedule
from .quota import QuotaMemory
from .registry import Registry
from .rules import Mode, Update
from .sizing import service_key
from .store import item_key

log = logging.getLogger("collector.run")


class Status(StrEnum):
    """How a run ended: `ok`, `rateLimit`, or the kind of its error."""

    OK = "ok"
    RATE_LIMIT = "rateLimit"
    UNAUTHORIZED = "unauthorized"
    TRANSIENT = "transient"
    BAD_RESPONSE = "badResponse"
    MALFORMED = "malformed"
    NOT_CONFIGURED = "notConfigured"
    UNKNOWN_SERVICE = "unknownService"
    RETIRED = "retired"
    INTERRUPTED = "interrupted"
    INTERNAL = "internal"


@dataclass(frozen=True)
class Run:
    """A network ready to run: its document, the job the connector gets, the connector, the backoff jitter."""

    network: Mapping[str, Any]
    job: Job
    connector: Connector
    jitter: float = 0.0


@dataclass(frozen=True)
class RunResult:
    """What one run did, whole: the state change to save, the items, and what was learnt on the way."""

    network: Mapping[str, Any]
    mode: str | None  # a Mode, or None when the document's mode could not be read
    update: Update
    at: datetime
    items: tuple[Item, ...] = ()
    error: NetworkError | None = None
    quota: Quota | None = None  # the last rate-limit facts the API gave
    wait_until: datetime | None = None  # no call with this token before then (reset, Retry-After, backoff)
    quota_scope: str | None = None  # whose quota the token spent (the connector's quota group)
    tokens: Mapping[str, Any] = field(default_factory=dict)  # obtained by a token refresh: saved first, always
    skipped: int = 0  # entries that could not be read, or items that could not be stored
    skip_reason: str | None = None
    refused: tuple[tuple[str, str], ...] = ()  # (itemId, why) of items the database would refuse
    called: bool = False  # whether the connector ran (made API calls)
    duration: float = 0.0
    requests: int = 0  # HTTP requests the run made
    codes: tuple[tuple[str, int], ...] = ()  # of those, how many ended with each HTTP status ("error": none)

    @property
    def status(self) -> str:
        if self.error is None:
            return Status.RATE_LIMIT if self.update.values.get("mode") == Mode.RATE_LIMIT else Status.OK
        return self.error.kind


def secrets_of(network: Mapping[str, Any]) -> list[str]:
    """The network's credentials, and every string under a secret-looking name at any depth (a token in a list,
    a nested `oauth.secret`): what its log lines and its lastError must never show."""
    top = [network[name] for name in SECRET_FIELDS if isinstance(network.get(name), str)]
    document = dict(network)
    document.pop("leaseToken", None)  # the claim's own token: no credential, and the same for a whole batch
    return top + secret_values(document)


def prepare(
    network: dict,
    registry: Registry,
    settings: Settings,
    http: Http,
    now: datetime,
    jitter: float,
    quotas: QuotaMemory | None = None,
) -> Run | RunResult:
    """A Run ready to execute, or the RunResult of a network that cannot or must not run now: an unknown service,
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
    return Run(network, Job(network=network, mode=mode, now=now), connector, jitter)


def execute(run: Run, settings: Settings, now: datetime) -> RunResult:
    """Run the connector. Never raises: every failure becomes the RunResult's error."""
    network, job, connector = run.network, run.job, run.connector
    started = time.perf_counter()
    requests_before, codes_before = connector.http.requests_made(), connector.http.codes_seen()
    refused: list[tuple[str, str]] = []
    try:
        with serving(service_key(network)):  # its requests take its service's request slots (sdk/slots.py)
            result = connector.run(job)
            items, refused = keep_storable(result.items, connector)
            as_documents(items, network.get("user"), now)
        check_state(result.state)
        update = schedule.on_success(network, job.mode, result, settings, now, run.jitter)
        update = schedule.with_skips(
            update,
            network,
            connector.skipped + len(refused),
            connector.skip_reason or (refused[0][1] if refused else None),
            refused,
            now,
        )
        outcome = RunResult(
            network,
            job.mode,
            update,
            now,
            items=tuple(items),
            quota=result.quota,
            wait_until=result.wait_until,
            tokens=result.tokens,
        )
    except NetworkError as error:
        outcome = fail(network, job.mode, error, settings, now, run.jitter)
    except RecursionError:  # a structure nested too deeply for the mapping: the API's answer, not our bug
        outcome = fail(
            network, job.mode, BadResponse("the API answer is nested too deeply to read"), settings, now, run.jitter
        )
    except Exception as exc:  # a connector bug must not stop the pass
        if exhausted(exc):  # the collector's own trouble: the network is left as it was
            own = OutOfDescriptors(f"collector out of file descriptors ({type(exc).__name__})")
            outcome = fail(network, job.mode, own, settings, now, run.jitter)
        else:
            outcome = crashed(network, job.mode, exc, settings, now, run.jitter)
    succeeded = outcome.error is None
    return replace(
        outcome,
        called=True,
        requests=connector.http.requests_made() - requests_before,
        codes=tuple(
            (code, n - codes_before.get(code, 0))
            for code, n in sorted(connector.http.codes_seen().items())
            if n > codes_before.get(code, 0)
        ),
        quota_scope=connector.quota_scope,
        duration=time.perf_counter() - started,
        skipped=connector.skipped + (len(refused) if succeeded else 0),
        skip_reason=connector.skip_reason or (refused[0][1] if refused and succeeded else None),
        refused=tuple(refused) if succeeded else (),
    )


def crashed(
    network: Mapping[str, Any], mode: str | None, exc: BaseException, settings: Settings, now: datetime, jitter: float
) -> RunResult:
    """A bug in our code (a connector's or the engine's) while handling one network: an `internal` error there."""
    error = NetworkError(f"internal error: {type(exc).__name__}: {exc}")
    error.kind = Status.INTERNAL
    refreshed = getattr(exc, "refreshed", None)
    error.refreshed = refreshed if isinstance(refreshed, dict) else {}
    outcome = fail(network, mode, error, settings, now, jitter)  # redacts the message
    # the frames only: an exception's text may hold values (tokens) that only the redacted message hides
    log.error(
        "network %s (%s) crashed: %s\n%s",
        network.get("_id"),
        clip(network.get("service"), 40),
        error.message,
        "".join(traceback.format_tb(exc.__traceback__)).rstrip(),
    )
    return outcome


def keep_storable(items: list, connector: Connector) -> tuple[list[Item], list[tuple[str, str]]]:
    """Split a run's items: those that can be stored; those the database would refuse (itemId, why), to be
    named in the network's lastError; the others (no usable itemId or source) are skipped and counted on the
    connector. BadResponse when a non-empty list has nothing to store. The engine stamps each item's type."""
    if not isinstance(items, list):
        raise BadResponse(f"connector returned {type(items).__name__}, not a list of items")
    kept: list[Item] = []
    refused: list[tuple[str, str]] = []
    first = None
    kind = connector.type_of_items
    for item in items:
        if isinstance(item, dict):
            item["type"] = kind
            decode_item_text(item)  # one rule for every connector: character references in text decoded
        problem = check_item(item, kind)
        if problem is None:
            kept.append(item)
        elif isinstance(item, dict) and problem.startswith(UNSTORABLE):
            refused.append((str(item.get("itemId")), problem[len(UNSTORABLE) :]))
        else:
            first = first or problem
    if items and not kept:
        raise BadResponse(f"no item of the page can be stored ({len(items)} items; first: {first or refused[0][1]})")
    connector.skip(len(items) - len(kept) - len(refused), first)
    return kept, refused


def fail(
    network: Mapping[str, Any], mode: str | None, error: NetworkError, settings: Settings, now: datetime, jitter: float
) -> RunResult:
    secrets = secrets_of(network) + secrets_of(error.refreshed)
    # the network's own credentials, then every secret the process knows (app keys, client secrets) and every
    # value of a credential's shape, wherever a server echoed it
    error.message = mask_everywhere(redact(error.message, secrets))
    update = schedule.on_failure(network, mode, error, settings, now, jitter, secrets)
    update = Update({**update.values, **error.refreshed}, update.unset)
    wait_until = error.reset if isinstance(error, RateLimited) else None
    return RunResult(network, mode, update, now, error=error, wait_until=wait_until, tokens=dict(error.refreshed))


def as_documents(items: list[Any], user: Any, now: datetime) -> None:
    """Make checked items `items` documents in place (on the worker, once): keyed by (user, type, itemId), with
    the user and the date. The user's userData is added when saving (stored_items)."""
    for item in items:
        item["user"] = user
        item["date"] = now
        item["_id"] = item_key(user, item["type"], item["itemId"])


def stored_items(result: RunResult, user_data: dict | None) -> list[dict]:
    """The result's items as `items` documents (as_documents made them), with the user's userData."""
    docs = cast("list[dict[str, Any]]", list(result.items))
    if user_data is not None:
        for doc in docs:
            doc["userData"] = user_data
    return docs
