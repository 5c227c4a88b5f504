"""The sinks' HTTP client: one urllib3 pool per sink (a connection for each delivery in flight, and one more),
every request bounded as a whole, answers bounded in bytes, no redirect followed, messages naming host and path.

- **A deadline per request**: SINK_<NAME>_TIMEOUT bounds connecting, sending, the status line and the whole
  answer, however slowly a server trickles it: the wire's deadline watch (net/deadline.py) shuts the socket of a
  request past it. A request it cut, a connection refused or reset, an exchange that did not end cleanly (interim
  answers past their bound, an unasked 101, bytes after the answer: net/answers.py): `BatchRefused`.
- **Answers bounded, a 2xx never lost for its size**: a 2xx whose body is needed (per-document results) is read up
  to 16 MiB, past that `AnswerTooLarge` (a `TooLarge`: the batch is split); one whose body is not needed
  (`keep_body=False`, a webhook) is read and dropped up to 64 MiB, then its connection closed, and counts; an error
  answer keeps its first 64 KiB for the reason, its status deciding.
- **Addresses**: a sink whose URL a user could set (`Sink.checks_addresses`, a webhook) gets the checks every user
  host gets (net/connections.py): https only, and every connection made to a public address only, checked at the
  address actually connected to — unless ALLOW_PRIVATE_HOSTS. The connections of the other sinks are not checked:
  their URL is the operator's own search cluster, often on a private network.
- **Messages** name the method, host and path only: never the URL's credentials or query, a header, or the body
  sent. `scrub` masks the sink's secrets in any text a destination sends back (a reason, an error).

`answer_failure` maps the statuses every destination shares (401/403, 413, 429, 5xx) to the SDK's batch failures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import NewConnectionError

from ..net.addresses import Policy, is_public, literal_address
from ..net.body import finish, read_capped, read_prefix
from ..net.connections import POOL_CLASSES
from ..net.deadline import WATCH, begin
from ..net.errors import AddressRefused, AnswerUnclear, BodyTooLarge, wire_error
from ..net.urls import where
from ..sdk.redaction import clip
from ..sdk.timeutil import utcnow
from ..settings import Settings, SettingsError
from .sdk import AuthFailed, BatchRefused, SinkConfig, SinkError, TooLarge

__all__ = [
    "MAX_ANSWER_BYTES",
    "Answer",
    "AnswerTooLarge",
    "SinkHttp",
    "answer_failure",
    "make_http",
    "retry_after",
    "scrub",
]

MAX_ANSWER_BYTES = 16 * 1024 * 1024  # a 2xx whose body is needed (per-document results): larger, the batch is split
DROP_BYTES = 64 * 1024 * 1024  # a 2xx whose body is not needed: read and dropped up to this, then the connection closed
REASON_BYTES = 64 * 1024  # an error answer: this much of its body kept for the reason, the rest not read
RETRY_AFTER_MAX = 3600.0  # seconds: a server's wait beyond this is taken as this (the service caps it further)


class AnswerTooLarge(TooLarge):
    """A 2xx whose body holds the per-document results is over MAX_ANSWER_BYTES: the batch is split in halves
    (delivery.py), a single document rejected; never sent again unchanged."""


@dataclass(frozen=True)
class Answer:
    """A destination's answer: its status, its headers (names in lower case) and its whole body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


class SinkHttp:
    """One sink's HTTP client; `request` may be called from several threads at once."""

    def __init__(self, config: SinkConfig, user_agent: str, policy: Policy):
        self.config = config
        self.timeout = float(config.timeout)
        self.policy = policy
        self.cutoff: float | None = None
        self.headers = {"User-Agent": user_agent, "Accept-Encoding": "identity"}
        self.pools = urllib3.PoolManager(
            num_pools=4,
            maxsize=max(1, config.concurrency) + 1,  # the deliveries in flight, and prepare() beside them
            block=False,
            retries=False,
            timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout),
        )
        self.pools.pool_classes_by_scheme = dict(POOL_CLASSES)
        self.lock = threading.Lock()

    def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        keep_body: bool = True,
    ) -> Answer:
        """Send one request and read its answer (any status; redirects are answers too). A 2xx's body is read whole
        (AnswerTooLarge past MAX_ANSWER_BYTES: the batch is split), or with `keep_body=False` read and dropped (up
        to DROP_BYTES, then the connection closed; the answer counts with an empty body, even when the deadline
        cuts the dropping). Any other status keeps the first REASON_BYTES of its body, for the reason."""
        what = f"{method} {where(url)}"
        try:
            entry = begin(self, self.timeout, self.cutoff, self.policy, what)
        except Exception:
            raise BatchRefused(f"sink stopping: {what} not started") from None
        try:
            answer, settled = self._exchange(method, url, body, {**self.headers, **(headers or {})}, keep_body, what)
            if entry.fired and not settled:
                raise BatchRefused(f"deadline of {self.timeout:g}s exceeded: {what}")
            return answer
        except SinkError:
            raise
        except Exception as exc:
            raise self._failure(exc, entry.fired, what) from None
        finally:
            WATCH.end(entry)

    def _exchange(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], keep_body: bool, what: str
    ) -> tuple[Answer, bool]:
        """The answer, and whether it stands whatever became of the rest of its body (a 2xx dropped)."""
        response = self.pools.urlopen(
            method, url, body=body, headers=headers, retries=False, redirect=False, preload_content=False
        )
        status = response.status
        names = {name.lower(): value for name, value in response.headers.items()}
        try:
            if not 200 <= status < 300:
                reason, whole = read_prefix(response, REASON_BYTES)
                finish(response, whole)  # past the prefix: closed, the status says what happened
                return Answer(status, names, reason), False
            if not keep_body:
                return Answer(status, names, b""), drop(response)
            try:
                chunks = read_capped(response, MAX_ANSWER_BYTES)
            except BodyTooLarge as exc:
                raise AnswerTooLarge(f"{status}: answer {str(exc).removeprefix('body ')}: {what}") from None
        except BaseException:
            response.close()  # never reuse a connection read halfway
            raise
        response.release_conn()
        return Answer(status, names, b"".join(chunks)), False

    def _failure(self, exc: Exception, fired: bool, what: str) -> SinkError:
        if fired:
            return BatchRefused(f"deadline of {self.timeout:g}s exceeded: {what}")
        unclean = wire_error(exc)  # interim answers past their bound, an unasked 101, bytes after the answer
        if unclean is not None:
            return BatchRefused(f"{unclean}: {what}")
        if isinstance(exc, AddressRefused):
            return BatchRefused(f"{exc}: {what}")
        cause = exc.__context__ if isinstance(exc, Urllib3Error) else exc
        if isinstance(cause, AddressRefused):
            return BatchRefused(f"{cause}: {what}")
        if isinstance(exc, NewConnectionError):  # a subclass of urllib3's TimeoutError, for history's sake
            return BatchRefused(f"connection failed: {what}")
        if isinstance(exc, (TimeoutError, urllib3.exceptions.TimeoutError)):
            return BatchRefused(f"timed out after {self.timeout:g}s: {what}")
        if isinstance(exc, (OSError, Urllib3Error)):
            return BatchRefused(f"connection failed ({type(exc).__name__}): {what}")
        return BatchRefused(f"request failed ({type(exc).__name__}): {what}")

    def interrupt_after(self, seconds: float) -> None:
        """The service is stopping: requests still running `seconds` from now are cut, later ones refused."""
        with self.lock:
            cutoff = time.monotonic() + max(seconds, 0.0)
            self.cutoff = cutoff if self.cutoff is None else min(self.cutoff, cutoff)
        WATCH.clamp(self, self.cutoff)

    def close(self) -> None:
        self.pools.clear()


def drop(response: Any) -> bool:
    """Read a 2xx's body to its end and drop it (at most DROP_BYTES; past them the connection is closed): True,
    the answer stands however the dropping ends — unless bytes followed its end (AnswerUnclear: which answer
    belongs to which request is no longer known)."""
    try:
        _, whole = read_prefix(response, DROP_BYTES, keep=False)
    except AnswerUnclear:
        raise
    except Exception:  # cut by the deadline, reset, cut short: the status was final, and it said yes
        whole = False
    finish(response, whole)
    return True


def make_http(config: SinkConfig, settings: Settings, check_addresses: bool) -> SinkHttp:
    """The sink's client. With `check_addresses` (a webhook): an https URL whose host is not a non-public address
    literal, and every connection checked by address, unless ALLOW_PRIVATE_HOSTS. SettingsError naming the
    setting when the URL cannot be used (the URL itself is not quoted: it may hold credentials)."""
    setting = f"SINK_{config.name.upper()}_URL"
    try:
        parts = urlsplit(config.url)
        host, _port = parts.hostname, parts.port
    except ValueError:
        raise SettingsError(setting, "not a valid URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise SettingsError(setting, "must be an http(s)://host URL")
    if parts.username or parts.password:
        raise SettingsError(setting, "must not hold credentials: give them as the sink's own options")
    allow = bool(settings.allow_private_hosts)
    if check_addresses and not allow:
        if parts.scheme != "https":
            raise SettingsError(setting, "must be an https URL (or set ALLOW_PRIVATE_HOSTS=true)")
        if literal_address(host) and not is_public(host):
            raise SettingsError(
                setting, f"host {host} is a non-public address; set ALLOW_PRIVATE_HOSTS=true to allow it"
            )
    policy = Policy(allow_private=allow or not check_addresses, trusted_hosts=frozenset())
    return SinkHttp(config, settings.user_agent, policy)


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
    seconds = (when - (now or utcnow())).total_seconds()
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
    return {"Content-Type": kind, "Accept": "application/json", **{k: str(v) for k, v in (extra or {}).items()}}
