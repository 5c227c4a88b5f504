"""The sinks' HTTP client: one urllib3 pool per sink (a connection for each delivery in flight, and one more),
every request bounded as a whole, answers bounded in bytes, no redirect followed, messages naming host and path.

- **A deadline per request**: SINK_<NAME>_TIMEOUT bounds connecting, sending, the status line and the whole
  answer, however slowly a server trickles it: the wire's deadline watch (net/deadline.py) shuts the socket of a
  request past it. A request it cut, a connection refused or reset, an exchange that did not end cleanly (interim
  answers past their bound, an unasked 101, bytes after the answer: net/answers.py): `BatchRefused`, a
  request that got no answer saying why (net/causes.py). TLS trusts the authorities CA_BUNDLE names
  (settings/trust.py), or the system's.
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

What a sink reads an answer with (`Answer`, `answer_failure`, `retry_after`, `json_headers`, `scrub`) is the SDK's
(sinks/sdk.py): a sink imports nothing else of the collector.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import NewConnectionError

from ..net.addresses import Policy
from ..net.answers import read_capped, read_end
from ..net.causes import cause
from ..net.connections import POOL_CLASSES
from ..net.deadline import WATCH, begin
from ..net.errors import AddressRefused, AnswerUnclear, BodyTooLarge, wire_error
from ..net.urls import where
from ..settings import Settings
from ..settings.trust import pool_options
from .checks import check_url
from .sdk import Answer, BatchRefused, SinkConfig, SinkError, TooLarge, answer_failure, retry_after, scrub

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


class AnswerTooLarge(TooLarge):
    """A 2xx whose body holds the per-document results is over MAX_ANSWER_BYTES: the batch is split in halves
    (delivery.py), a single document rejected; never sent again unchanged."""


class SinkHttp:
    """One sink's HTTP client; `request` may be called from several threads at once."""

    def __init__(self, config: SinkConfig, user_agent: str, policy: Policy, ca_bundle: str = ""):
        self.config = config
        self.timeout = float(config.timeout)
        self.policy = policy
        self.cutoff: float | None = None
        self.headers = {"User-Agent": user_agent, "Accept-Encoding": "identity"}
        trust = pool_options(ca_bundle)
        self.pools = urllib3.PoolManager(
            num_pools=4,
            maxsize=max(1, config.concurrency) + 1,  # the deliveries in flight, and prepare() beside them
            block=False,
            retries=False,
            # the deadline watch ends a request at SINK_<NAME>_TIMEOUT; the socket's own read timeout is only a backstop
            # behind it, never a second timer of the same length racing it (which of the two fired decided the text)
            timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout * 2 + 1),
            ca_certs=trust.get("ca_certs"),  # CA_BUNDLE resolved (settings/trust.py); none: the system's authorities
            ca_cert_dir=trust.get("ca_cert_dir"),
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
                reason = read_end(response, REASON_BYTES)  # past the prefix: closed, the status says what happened
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
        context = exc.__context__ if isinstance(exc, Urllib3Error) else exc
        if isinstance(context, AddressRefused):
            return BatchRefused(f"{context}: {what}")
        named = cause(exc)  # certificate, TLS, proxy, name, refused, reset, ... (net/causes.py)
        if named is not None and named != "timed out":
            return BatchRefused(f"{named}: {what}")
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
        read_end(response, DROP_BYTES, keep=False)
    except AnswerUnclear:
        raise
    except Exception:  # cut by the deadline, reset, cut short: the status was final, and it said yes
        response.close()
    return True


def make_http(config: SinkConfig, settings: Settings, check_addresses: bool) -> SinkHttp:
    """The sink's client. With `check_addresses` (a webhook): an https URL whose host is not a non-public address
    literal (checks.py), and every connection checked by address, unless ALLOW_PRIVATE_HOSTS. SettingsError naming
    the setting when the URL cannot be used (the URL itself is not quoted: it may hold credentials)."""
    allow = bool(settings.allow_private_hosts)
    check_url(config, check_addresses, allow)  # made up front too (config.py): here for a client made otherwise
    policy = Policy(allow_private=allow or not check_addresses, trusted_hosts=frozenset())
    return SinkHttp(config, settings.user_agent, policy, settings.ca_bundle)
