"""All a sink may import: the `Sink` base class a destination implements, the outcomes it reports for each
document, the failures it raises for a whole batch, and `Doc`, one stored item as a destination receives it.

A sink is found by its kind through the `likeastore.sinks` entry-point group (registry.py), as connectors are
through `likeastore.connectors`. It only talks to its destination: where it stands, retries, back-off, splitting,
dead letters, pausing and stopping are the sink service's (delivery.py), the same for every sink.

    class Search(Sink):
        kind = "mysearch"
        options = (Option("INDEX", "the index written", default="items"),)

        def deliver(self, batch):
            answer = self.http.post(...)                 # raise BatchRefused / TooLarge / AuthFailed as it says
            return [DONE if ok else Reject("why") for ok in ...]  # one outcome per document, in order
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

from ..net.urls import where
from ..sdk.redaction import clip
from ..settings import SettingsError

__all__ = [
    "DONE",
    "Answer",
    "AuthFailed",
    "Batch",
    "BatchRefused",
    "Doc",
    "Done",
    "Option",
    "Outcome",
    "Reject",
    "Retry",
    "Sink",
    "SinkConfig",
    "SettingsError",
    "SinkError",
    "TooLarge",
    "answer_failure",
    "json_headers",
    "retry_after",
    "scrub",
    "where",
]


@dataclass(frozen=True)
class Option:
    """A setting a kind of sink takes beyond the common ones: SINK_<NAME>_<name>. Secret ones are masked in
    every output and log (and their values redacted), whatever their name.

    `check`, if given, is called with the option's value in effect (its default when unset; never when empty)
    wherever the settings are checked — before `collector sink` registers anything, by `--check-config`, by every
    command and at a reload — and raises ValueError with the reason when the destination cannot take it
    (`ValueError("must be lower case")`). The reason is printed after the setting's name, the sink's secrets
    masked in it; any other exception is that sink's setting error too. For checks across options, see
    `Sink.check_config`."""

    name: str
    help: str
    default: str = ""
    secret: bool = False
    required: bool = False
    check: Callable[[str], object] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SinkConfig:
    """One configured sink, from SINK_<NAME>_* settings (config.py)."""

    name: str  # lower case, [a-z0-9_]
    kind: str
    url: str
    batch: int = 500  # documents per delivery at most
    concurrency: int = 2  # deliveries in flight at once
    timeout: float = 30.0  # seconds per delivery, the whole request
    services: tuple[str, ...] = ()  # only items of these services (empty: every service)
    backfill: bool = True  # a new sink gets every item already stored
    pace: float = 500.0  # items per second at most, for a backfill or replay
    options: Mapping[str, str] = field(default_factory=dict, repr=False)  # the kind's own Options; secrets too
    secret_values: tuple[str, ...] = field(default=(), repr=False)  # what must never appear in any output


@dataclass(frozen=True)
class Doc:
    """One stored item as a destination receives it: `id` is the item's `_id` as text (24 hex digits for the
    ObjectIds collectors write), `body` the item's fields made JSON-ready (dates ISO 8601 in UTC, ids as text,
    bytes as hex; no `_id`, no collector bookkeeping field)."""

    id: str
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Outcome:
    kind: ClassVar[str] = ""
    reason: str = ""


@dataclass(frozen=True)
class Done(Outcome):
    """The destination holds the document (or a newer version of it: a 409 on a stale version)."""

    kind: ClassVar[str] = "done"


@dataclass(frozen=True)
class Retry(Outcome):
    """The destination could not take the document now (a 429, a 5xx for this one document): tried again later,
    with back-off, however long it takes."""

    kind: ClassVar[str] = "retry"


@dataclass(frozen=True)
class Reject(Outcome):
    """The destination refuses the document for itself (a mapping error, a 400 or 404 for it): tried a bounded
    number of times (SINK_MAX_TRIES), then dead-lettered with this reason. Never blocks the others."""

    kind: ClassVar[str] = "reject"


DONE = Done()


class SinkError(Exception):
    """A failure of a whole batch. Messages name the host and path only, never a credential."""


class BatchRefused(SinkError):
    """The destination refused the whole batch for now (a 429 or 5xx, a connection refused or reset, a timeout):
    every document is retried with back-off and jitter; `retry_after` (seconds) is the server's own wait."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class TooLarge(SinkError):
    """The batch is too large for the destination (a 413): it is split in two and each half sent again; a single
    document too large is rejected."""


class AuthFailed(SinkError):
    """The destination refuses our credentials (a 401 or 403 for the whole request): the sink stops, loudly,
    until the operator resumes it (`collector sinks resume NAME`); the others go on."""


class Sink(ABC):
    """A destination. One instance per configured sink, made once by the sink service; `deliver` may be called
    from `config.concurrency` threads at once (never touch the database here: there is none to touch).

    `http` is the sink's own HTTP client (sinks/http.py): every request bounded by the sink's timeout and in
    bytes read, error messages without credentials; a webhook-style sink that posts to a URL a user could set
    gets the address checks every user host gets."""

    kind: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    checks_addresses: ClassVar[bool] = False  # True: its URL is a user host (a webhook): https, public addresses only
    max_batch_bytes: ClassVar[int] = 8 * 1024 * 1024  # a batch encoded larger is split before it is sent

    @classmethod
    def check_config(cls, config: SinkConfig) -> Iterable[tuple[str, str]]:
        """Checks across the kind's options (each option's own are `Option.check`), made wherever the settings are
        checked, before anything starts: (option name, reason) for each problem, none by default. No I/O beyond a
        local file; never quote a secret."""
        return ()

    def __init__(self, config: SinkConfig, http: Any):
        self.config = config
        self.http = http

    def option(self, name: str) -> str:
        return self.config.options.get(name, "")

    def prepare(self) -> None:  # noqa: B027  # optional hook, empty by default
        """Once before the first delivery and again after a resume: create the index, template or collection
        if needed. Raise AuthFailed or BatchRefused as deliver does (prepare is tried again later)."""

    @abstractmethod
    def deliver(self, batch: Sequence[Doc]) -> Sequence[Outcome]:
        """Send `batch`; return one Outcome per document, in order. Raise BatchRefused, TooLarge or AuthFailed
        for a failure of the whole batch. Any other exception counts as BatchRefused. The service hands a `Batch`:
        its `id` is the same at every retry of the same documents (for a destination that drops repeats)."""

    def close(self) -> None:  # noqa: B027
        """Free what the sink holds (the service is stopping)."""


# --- what a sink needs to read an answer: the failures every destination shares, Retry-After, JSON headers --------
RETRY_AFTER_MAX = 3600.0  # seconds: a server's wait beyond this is taken as this (the service caps it further)


@dataclass(frozen=True)
class Answer:
    """A destination's answer (what `Sink.http.request` gives): its status, its headers (names in lower case) and
    its whole body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


class Batch(tuple[Doc, ...]):
    """The documents of one delivery, in order, with the batch's identity: `id` stays the same for every retry of
    the same batch (a split or a dead letter makes new batches with new ids), `formed` is when it was formed. A
    destination that dedupes (a webhook's `webhook-id`) sends these; `id` is "" for documents handed over without
    one (a test calling `deliver` with a list)."""

    id: str
    formed: datetime | None

    def __new__(cls, docs: Iterable[Doc] = (), id: str = "", formed: datetime | None = None) -> Batch:  # noqa: A002
        batch = super().__new__(cls, docs)
        batch.id, batch.formed = id, formed
        return batch


def scrub(text: object, config: SinkConfig, limit: int = 300) -> str:
    """Text a destination sent back, safe to keep: the sink's secrets masked, then clipped (sdk.redaction.clip)."""
    out = str(text)
    for secret in config.secret_values:
        if secret:
            out = out.replace(secret, "***")
    return clip(out, limit)


def retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The answer's Retry-After in seconds (a number or an HTTP date), at most an hour; None without one."""
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    if value.isdigit():
        return min(float(value), RETRY_AFTER_MAX)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


def answer_failure(answer: Answer, what: str, now: datetime | None = None) -> SinkError | None:
    """The batch failure a status means for every destination: 401/403 AuthFailed, 413 TooLarge, 408/429/5xx
    BatchRefused (with the server's Retry-After), a redirect BatchRefused (not followed); None for the rest."""
    status = answer.status
    if status in (401, 403):
        return AuthFailed(f"{status}: credentials refused: {what}")
    if status == 413:
        return TooLarge(f"413: batch too large: {what}")
    if status in (408, 429) or status >= 500:
        return BatchRefused(f"{status}: batch refused: {what}", retry_after(answer.headers, now))
    if 300 <= status < 400:
        return BatchRefused(f"{status}: redirect not followed: {what}")
    return None


def json_headers(kind: str = "application/json", extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Headers of a JSON request (`kind` its content type), with `extra` (a sink's authentication)."""
    return {"Content-Type": kind, "Accept": "application/json", **{k: str(v) for k, v in (extra or {}).items()}}
