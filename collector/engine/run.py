"""One run: one network executed once (see the glossary in docs/ARCHITECTURE.md).

Its steps: `admit` reads a claimed network once — its fields, its mode, its connector from the registry — into a
`Claimed`; `prepare` (checks, no I/O) gives a `Run` ready to execute, or raises the NetworkError that keeps it
from running now; `execute` (the connector: HTTP and mapping only, on a worker thread) gives what it `Returned`;
decide.py makes the `RunResult` of every one of them. A `RunResult` is an immutable record, returned whole; the
engine saves it on its own thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from ..sdk.connector import Connector, Job, Result
from ..sdk.errors import BadResponse, Malformed, NetworkError, Quota, RateLimited, Sealed
from ..sdk.htmltext import decode_item_text
from ..sdk.http import Answer, Asked, Http
from ..sdk.items import Item
from ..sdk.redaction import SECRETS, secret_values
from ..sdk.slots import serving
from ..sdk.validate import SECRET_FIELDS, UNSTORABLE, check_item, check_network
from ..settings import Settings
from . import rules as schedule
from .quota import QuotaMemory
from .registry import Registry
from .rules import Mode, Update
from .sizing import service_key
from .store import item_key
from .store.sealing import NO_KEYS, Keys, open_network


class Status(StrEnum):
    """How a run ended: `ok`, `rateLimit`, or the kind of its error."""

    OK = "ok"
    RATE_LIMIT = "rateLimit"
    UNAUTHORIZED = "unauthorized"
    TRANSIENT = "transient"
    BAD_RESPONSE = "badResponse"
    MALFORMED = "malformed"
    NOT_CONFIGURED = "notConfigured"
    SEALED = "sealed"
    UNKNOWN_SERVICE = "unknownService"
    RETIRED = "retired"
    INTERRUPTED = "interrupted"
    INTERNAL = "internal"


@dataclass(frozen=True)
class Attempt:
    """A network's try, as deciding its outcome needs it: the document, its mode (None when it could not be
    read), the time the try started and the backoff jitter drawn for it."""

    network: Mapping[str, Any]
    mode: str | None
    now: datetime
    jitter: float
    held: tuple[str, ...] | None = field(default=None, repr=False)  # its secrets hidden since its claim (`admit`)


@dataclass(frozen=True, eq=False)  # one claim is one object: compared by identity
class Claimed:
    """A claimed network read once (`admit`): its document, its mode and its connector class, or the error that
    keeps it from running (bad fields, an unknown or retired service). `service` is what it counts against for the
    per-service cap (None for a garbage value)."""

    network: dict
    mode: str | None
    connector: type[Connector] | None
    problem: Exception | None  # a NetworkError, or a bug of ours met reading it (an `internal` error there)
    service: str | None
    held: tuple[str, ...] = field(default=(), repr=False)  # its secrets (`secrets_of`), read once: hidden until let go


@dataclass(frozen=True)
class Run:
    """A network ready to run: its attempt, the job the connector gets, the connector."""

    attempt: Attempt
    job: Job
    connector: Connector

    @property
    def network(self) -> Mapping[str, Any]:
        return self.attempt.network


@dataclass(frozen=True)
class Returned:
    """What a worker brought back from the connector: its Result, or the exception it raised; the items it kept
    and those the database would refuse; and what the run cost. `called` is False when no connector ran."""

    result: Result | None = None
    error: BaseException | None = None
    items: tuple[Item, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()  # (itemId, why)
    skipped: int = 0  # entries the connector could not map (refused items not counted)
    skip_reason: str | None = None
    called: bool = False
    quota_scope: str | None = None
    requests: int = 0
    codes: tuple[tuple[str, int], ...] = ()
    duration: float = 0.0


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
    held: tuple[str, ...] | None = field(default=None, repr=False)  # the network's secrets hidden since its claim

    @property
    def status(self) -> str:
        if self.error is None:
            return Status.RATE_LIMIT if self.update.values.get("mode") == Mode.RATE_LIMIT else Status.OK
        return self.error.kind


def secrets_of(network: Mapping[str, Any]) -> list[str]:
    """The network's credentials, and every string under a secret-looking name at any depth (a token in a list,
    a nested `oauth.secret`): what its log lines and its lastError must never show; and its tokens as the
    database holds them, sealed ones too (no secret, but not shown whole either)."""
    top = [network[name] for name in SECRET_FIELDS if isinstance(network.get(name), str)]
    top += getattr(network, "stored", {}).values()
    # the claim's own leaseToken: no credential, and the same for a whole batch
    return top + secret_values(network if isinstance(network, dict) else dict(network), leave="leaseToken")


def forget(network: Mapping[str, Any], tokens: Mapping[str, Any], held: tuple[str, ...] | None = None) -> None:
    """The engine lets go of a network: its secrets no longer need hiding from the logs (`held`: those its claim
    hid, read then; None: read again)."""
    SECRETS.remove(held if held is not None else secrets_of(network))
    if tokens:
        SECRETS.remove(v for k, v in tokens.items() if k in SECRET_FIELDS)


def admit(network: dict, registry: Registry, keys: Keys = NO_KEYS) -> Claimed:
    """A claimed network, read once: its sealed tokens opened with `keys` (a token that cannot be is its `sealed`
    error), its fields checked, its mode, its connector class looked up."""
    mode: str | None = None
    network, sealed = open_network(network, keys)
    try:
        if sealed is not None:
            raise Sealed(str(sealed))
        check_network(network)
        try:
            mode = schedule.effective_mode(network)
        except ValueError as exc:
            raise Malformed(str(exc)) from None
        connector = registry.get(network.get("service"))
    except Exception as problem:  # decide.py judges it when the network's turn comes
        return Claimed(network, mode, None, problem, service_key(network), tuple(secrets_of(network)))
    return Claimed(network, mode, connector, None, service_key(network), tuple(secrets_of(network)))


def prepare(
    claimed: Claimed, settings: Settings, http: Http, now: datetime, jitter: float, quotas: QuotaMemory | None = None
) -> Run:
    """A Run ready to execute. Raises the NetworkError of a network that cannot or must not run now: what
    `admit` found, a field its connector refuses, or a token the quota memory knows is spent (moved to its reset
    time without an API call)."""
    if claimed.problem is not None:
        raise claimed.problem
    assert claimed.connector is not None and claimed.mode is not None  # admitted: both read
    network = claimed.network
    connector = claimed.connector(settings, http)
    connector.validate(network)
    until = quotas.blocked_until(connector.quota_scope, network["accessToken"], now) if quotas else None
    if until is not None:
        raise RateLimited("token out of quota (remembered); no call made", until)
    attempt = Attempt(network, claimed.mode, now, jitter, claimed.held)
    return Run(attempt, Job(network=network, mode=claimed.mode, now=now), connector)


def execute(run: Run, primed: tuple[Asked, Answer] | None = None) -> Returned:
    """Run the connector (validated by `prepare`) and keep its storable items. Never raises: an exception is
    returned for decide.py to judge. `primed`: what its poll asked and the answer, read on the lane (engine/polls.py),
    which its first GET of that URL gets instead of sending it."""
    network, job, connector = run.network, run.job, run.connector
    started = time.perf_counter()
    requests_before, codes_before = connector.http.requests_made(), connector.http.codes_seen()
    result: Result | None = None
    error: BaseException | None = None
    items: list[Item] = []
    refused: list[tuple[str, str]] = []
    try:
        with serving(service_key(network)), priming(connector.http, primed):  # slots: sdk/slots.py
            result = connector.run_validated(job)
            items, refused = keep_storable(result.items, connector)
            as_documents(items, network.get("user"), job.now)
    except Exception as exc:  # every failure, a connector's bug too, is judged by decide.py
        error = exc
    codes = connector.http.codes_seen()
    return Returned(
        result=result,  # kept on an error too: tokens a refresh obtained must be saved either way
        error=error,
        items=tuple(items),
        refused=tuple(refused),
        skipped=connector.skipped,
        skip_reason=connector.skip_reason,
        called=True,
        quota_scope=connector.quota_scope,
        requests=connector.http.requests_made() - requests_before,
        codes=tuple(
            (code, n - codes_before.get(code, 0)) for code, n in sorted(codes.items()) if n > codes_before.get(code, 0)
        ),
        duration=time.perf_counter() - started,
    )


@contextmanager
def priming(http: Http, primed: tuple[Asked, Answer] | None) -> Iterator[None]:
    if primed is None:
        yield
        return
    with http.priming(*primed):
        yield


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


def as_documents(items: list[Any], user: Any, now: datetime) -> None:
    """Make checked items `items` documents in place (on the worker, once): keyed by (user, type, itemId), with
    the user and the date. The user's userData is added when saving (stored_items)."""
    for item in items:
        item["user"] = user
        item["date"] = now
        item["_id"] = item_key(user, item["type"], item["itemId"])


SINK_PENDING = "sinkPending"  # on every new item until the sink service has queued it for each sink (sinks/mover.py)


def stored_items(result: RunResult, user_data: dict | None) -> list[dict]:
    """The result's items as `items` documents (as_documents made them), with the user's userData, each marked
    `sinkPending: true`, always, in the same insert: the item is its own outbox for the sinks (sinks/mover.py)."""
    docs = cast("list[dict[str, Any]]", list(result.items))
    for doc in docs:
        if user_data is not None:
            doc["userData"] = user_data
        doc[SINK_PENDING] = True
    return docs
