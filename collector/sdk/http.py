"""The HTTP session connectors share, with every request bounded and every connection checked.

`Http` is the facade; each concern has its own private module behind it:

- **A deadline per request** (net/deadline.py). `HTTP_TIMEOUT` bounds the whole request: connecting, the status line
  and headers, and the body, however slowly a server trickles them. One watch thread per process shuts down the
  socket of a request that passes its deadline; reads carry no socket timeout of their own.
- **Addresses** (net/connections.py, under net/addresses.py's `Policy`). Every socket to a host that is not one of the
  collector's configured API hosts is checked at the address actually connected to (no loopback, private,
  link-local or translated address unless ALLOW_PRIVATE_HOSTS), on every redirect hop.
- **The session and adapter** (_session.py): no cookies, at most 5 redirects and never from https to http,
  retries of failed connects only; a plain GET prepared and sent without requests' per-call merging.
- **URLs** (net/urls.py): prepared once per URL and parameters; `where` names a request by host and path.
- **A size cap** (net/answers.py, the sinks' read too). Bodies are read as received up to `HTTP_MAX_BYTES` (past it:
  refused, the connection dropped), then decoded (gzip/deflate, decoding.py) in bounded steps up to
  `HTTP_MAX_BYTES` decoded.
- **Slots** (here). With `slots` (slots.py) each request waits for a slot of its run's service and of the whole
  before it is sent, and gives them back once its body is read (still encoded): the concurrency bounds exchanges,
  not runs. The body is decoded after that, a large one under the run's turn (slots.py: one run at a time).
- **Stopping** (here, with net/deadline.py). `interrupt_after(seconds)` cuts every request still running after that
  many seconds, and refuses new ones: a collector that is asked to stop is done within the deadline.

Error messages name the host and path only: a query string may carry credentials for some services. A request that
got no answer says why (net/causes.py: certificate verify failed, proxy unreachable, name not resolved, ...). The
session trusts the authorities CA_BUNDLE names (settings/trust.py), or certifi's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import urlsplit

import requests
import urllib3

from ..net.addresses import Policy
from ..net.answers import read_capped
from ..net.causes import cause
from ..net.deadline import WATCH, Entry, begin
from ..net.errors import AddressRefused, BodyTooLarge, Stopping, wire_error
from ..net.pollloop import Answer, Expired, Lane, Outgoing, TooLarge, Unsent, tls_context
from ..net.urls import prepared_url, where
from ..settings import Settings
from ._polls import Asked, as_response, request_head
from ._session import Adapter, RedirectRefused, make_session, send
from ._session import Session as _Session  # noqa: F401  # the name tests/sdk/test_hostile_http.py imports
from .decoding import bounded_decompress, decode_body
from .errors import BadResponse, Interrupted, OutOfDescriptors, Transient, exhausted
from .headers import install as install_header_parser
from .poll import Poll
from .slots import Slots, give_turn, take_turn

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Answer",
    "Asked",
    "Expired",
    "TooLarge",
    "Unsent",
    "TURN_BYTES",
    "TURN_RAW_BYTES",
    "AddressRefused",
    "Http",
    "RedirectRefused",
    "bounded_decompress",
    "make_session",
    "trusted_hosts",
    "where",
]

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
TURN_BYTES = 32 * 1024  # an answer this large (decoded) waits for the turn to be turned into items (slots.py)
TURN_RAW_BYTES = 4 * 1024  # a body this large as received waits for the turn to be decoded (JSON gzips ~8 to 1)
UNFOLLOWABLE = (
    requests.exceptions.InvalidURL,
    requests.exceptions.MissingSchema,
    requests.exceptions.InvalidSchema,
    requests.exceptions.URLRequired,
)


class Http:
    def __init__(self, settings: Settings, session: requests.Session | None = None, pool_size: int = 32):
        self.session = session or make_session(settings.user_agent, pool_size)
        self.configure(settings)
        self.cutoff: float | None = None
        self.counts = threading.local()
        self.slots: Slots | None = None  # request slots (slots.py), given by the engine: None, no limit here
        self.lane: Lane | None = None  # the polls' event loop (net/pollloop.py), started by the first poll sent
        install_header_parser()  # http.client's header parsing without the email parser for plain lines

    def configure(self, settings: Settings) -> None:
        """The settings HTTP follows (at start, and at each reload, for the requests that begin after it): the
        whole-request timeout, the body limit, the User-Agent, the authorities to trust (kept from the start: a
        reload keeps CA_BUNDLE) and which hosts may be on private addresses."""
        self.timeout = settings.http_timeout
        self.max_bytes = getattr(settings, "http_max_bytes", DEFAULT_MAX_BYTES)
        self.ca_bundle = getattr(self, "ca_bundle", settings.ca_bundle)  # kept from the start, as `verify`
        self.session.headers["User-Agent"] = settings.user_agent
        self.session.verify = settings.ca_bundle or True  # CA_BUNDLE, resolved (settings/trust.py), or certifi's
        policy = Policy(settings.allow_private_hosts, trusted_hosts(settings))
        if getattr(self, "policy", policy) != policy:  # pooled connections were checked under the old policy
            for adapter in self.session.adapters.values():
                if isinstance(adapter, Adapter):
                    adapter.forget_connections()
        self.policy = policy
        if getattr(self, "lane", None) is not None:
            self.lane.configure(self.timeout, self.max_bytes, policy)  # type: ignore[union-attr]

    def get(self, url: str, *, params=None, headers=None, auth=None) -> requests.Response:
        return self.request("GET", url, params=params, headers=headers, auth=auth)

    def post(self, url: str, *, data=None, headers=None, auth=None) -> requests.Response:
        return self.request("POST", url, data=data, headers=headers, auth=auth)

    def interrupt_after(self, seconds: float) -> None:
        """The collector is stopping: requests still running `seconds` from now are cut, later ones refused."""
        cutoff = time.monotonic() + max(seconds, 0.0)
        self.cutoff = cutoff if self.cutoff is None else min(self.cutoff, cutoff)
        WATCH.clamp(self, self.cutoff)
        if self.lane is not None:
            self.lane.clamp(self.cutoff)

    # --- polls on the event loop (net/pollloop.py, engine/dispatch.py) -------------------------------------
    def outgoing(self, poll: Poll, headers: Mapping[str, str], auth: Any) -> tuple[Outgoing, Asked] | None:
        """A declared poll as the lane sends it, with the connector's `headers` and `auth` (the request the
        session would send), and what it asks (`Asked`: the run's GET that its answer is for); None when it must
        take the session's path: a stand-in for requests' transport (a test double), a proxy, a stop under way, or
        a request the lane does not speak (not http(s), a header not Latin-1, a value with a line break)."""
        if not self.lane_speaks() or self.cutoff is not None:
            return None
        asked = Asked(prepared_url(poll.url, poll.params), {**headers, **(poll.headers or {})})
        outgoing = request_head(self.session, asked, auth)
        return None if outgoing is None else (outgoing, asked)

    def lane_speaks(self) -> bool:
        """Whether requests this session sends may go on the lane: requests' own transport (not a stand-in that
        replaced it, such as `responses`), our adapters, no proxy, no client certificate."""
        session = self.session
        return (
            getattr(requests.adapters.HTTPAdapter.send, "__module__", "") == "requests.adapters"
            and not session.trust_env
            and not session.proxies
            and session.cert is None
            and isinstance(session.adapters.get("http://"), Adapter)
            and isinstance(session.adapters.get("https://"), Adapter)
        )

    def lane_started(self, scheme: str) -> Lane:
        """The lane, started at the first poll; its TLS authorities read at the first https one."""
        if self.lane is None:
            self.lane = Lane(self.timeout, self.max_bytes, self.policy, None, self.cutoff)
        if scheme == "https" and self.lane.tls is None:
            self.lane.tls = tls_context(self.ca_bundle, requests.utils.DEFAULT_CA_BUNDLE_PATH)  # certifi's
        return self.lane

    @contextmanager
    def priming(self, asked: Asked, answer: Answer) -> Iterator[None]:
        """This thread's first GET as `asked` (its URL and headers) gets `answer` (read on the lane) instead of
        being sent; any other request is sent as always."""
        self.counts.primed = (asked, answer)
        try:
            yield
        finally:
            self.counts.primed = None

    def _primed(self, method: str, url: str, params: Any, headers: Any) -> requests.Response | None:
        primed = getattr(self.counts, "primed", None)
        if primed is None or method != "GET":
            return None
        asked, answer = primed
        try:
            if asked.url != prepared_url(url, params) or asked.headers != dict(headers or {}):
                return None
        except Exception:  # a URL requests refuses: sent (and refused) as always
            return None
        self.counts.primed = None
        return as_response(answer, asked.url)

    def requests_made(self) -> int:
        """Requests this thread has made through this Http (a run's count is the difference)."""
        return getattr(self.counts, "n", 0)

    def codes_seen(self) -> dict[str, int]:
        """Of those, how many ended with each HTTP status ("error": no response at all)."""
        return dict(getattr(self.counts, "codes", {}))

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        self.counts.n = getattr(self.counts, "n", 0) + 1
        what = f"{method} {where(url)}"
        give_turn()  # a run asking again lets the next run with an answer turn it into items meanwhile
        primed = self._primed(method, url, kwargs.get("params"), kwargs.get("headers"))
        if primed is not None:  # read on the lane already: counted, decoded, as if sent here
            codes = self.counts.__dict__.setdefault("codes", {})
            codes[str(primed.status_code)] = codes.get(str(primed.status_code), 0) + 1
            self._decode(primed, what)
            return primed
        held = None
        if self.slots is not None:  # wait for a slot: the deadline starts once the request may go
            held = self.slots.take(lambda: self.cutoff)
            if held is None:
                raise Interrupted(f"collector stopping: {what} not started")
        try:
            response = self._exchange(method, url, what, **kwargs)
        finally:
            if held is not None:
                held.release()
        self._decode(response, what)
        return response

    def _exchange(self, method: str, url: str, what: str, **kwargs: Any) -> requests.Response:
        """Send under the deadline (net/deadline.py), check the answer is final, read its body (still encoded); any
        failure as the SDK's errors (`failure`), and the answer's status counted."""
        try:
            entry = begin(self, self.timeout, self.cutoff, self.policy, what)
        except Stopping as exc:
            raise Interrupted(str(exc)) from None
        code = "error"
        try:
            response = send(self.session, self.timeout, method, url, **kwargs)
            code = str(response.status_code)
            check_final(response, what)
            self._read_body(response, what)
            if entry.fired:
                raise Transient("cut")  # a body ended by the watch may look complete: never trust it
            return response
        except Exception as exc:
            error = failure(exc, entry, self.timeout, what)
            if error is exc:
                raise
            raise error from None
        finally:
            WATCH.end(entry)
            codes = self.counts.__dict__.setdefault("codes", {})
            codes[code] = codes.get(code, 0) + 1

    def _read_body(self, response: requests.Response, what: str) -> None:
        """Read the whole body as it came (every Content-Encoding layer still on), at most max_bytes; drop the
        connection past that. It is decoded once the request's slot is given back (`_decode`). An error answer
        (4xx, 5xx) over the cap has an empty body instead: its status and headers say what happened."""
        try:
            chunks = self._read_chunks(response, what)
        except BadResponse:
            response.close()
            if response.status_code < 400:
                raise
            chunks = []
        else:
            response.raw.release_conn()
        response._content = chunks  # type: ignore[assignment]  # raw until _decode
        response._content_consumed = True  # type: ignore[attr-defined]

    def _read_chunks(self, response: requests.Response, what: str) -> list[bytes]:
        """The body as it came (net/answers.py, the sinks' read too); BadResponse past the cap, AnswerUnclear (a
        Transient, `failure`) when bytes followed it."""
        try:
            return read_capped(response.raw, self.max_bytes)
        except BodyTooLarge as exc:
            told = f" of {exc.length} bytes" if exc.length is not None else ""
            raise BadResponse(f"body{told} exceeds the {exc.cap}-byte cap: {what}", response.status_code) from None

    def decoded(self, response: requests.Response) -> requests.Response:
        """An answer read on the lane (`as_response`) with its body decoded, as a request here decodes it (no body
        and no encoding, a 304's case: nothing to undo)."""
        if not response._content and "Content-Encoding" not in response.headers:
            response._content = b""
        else:
            self._decode(response, f"GET {where(response.url)}")
        return response

    def _decode(self, response: requests.Response, what: str) -> None:
        """The body read by `_read_body`, decoded (gzip/deflate, bounded steps, decoding.py). A large answer takes
        the turn first (slots.py: one run at a time turns answers into items, decoding included). An error answer
        (4xx, 5xx) whose body cannot be decoded has an empty one (as one over the cap, `_read_body`): its status
        and headers still say what happened (a 429's Retry-After, a 401), which a `badResponse` about its body would
        hide."""
        chunks = cast("list[bytes]", response._content)
        if sum(map(len, chunks)) >= TURN_RAW_BYTES:
            take_turn()
        try:
            body = decode_body(chunks, response.headers.get("Content-Encoding", ""), self.max_bytes)
        except BadResponse as error:
            if response.status_code < 400:
                raise BadResponse(f"{error.message}: {what}", response.status_code) from None
            body = b""
        response._content = body
        if len(body) >= TURN_BYTES:
            take_turn()

    def close(self) -> None:
        if self.lane is not None:
            self.lane.close()
        self.session.close()


def trusted_hosts(settings: Settings) -> frozenset[str]:
    """Hosts the operator configured (GITHUB_API_URL, e.g. a GitHub Enterprise server on a private network)."""
    hosts = set()
    for url in (settings.github_api_url,):
        host = urlsplit(url).hostname
        if host:
            hosts.add(host.lower())
    return frozenset(hosts)


def check_final(response: requests.Response, what: str) -> None:
    """Refuse an answer that is not the final one (the connection closed: nothing more is read from it)."""
    status = response.status_code
    if status < 200:
        # an interim answer taken for the final one (net/answers.py skips them on the checked connections; a
        # connection through a proxy is urllib3's own): the real answer may still come on this connection and
        # would be read as the next request's, so the connection is closed
        response.close()
        raise Transient(f"{status} interim response taken as the answer: {what}")
    if 300 <= status < 400 and status != 304:
        # redirects with a usable Location were followed: this one has none (or one nobody can follow).
        # Never an empty page: that would end a history walk as if it were complete
        response.close()
        raise BadResponse(f"{status} redirect without a usable Location: {what}", status)


def failure(exc: Exception, entry: Entry, timeout: float, what: str) -> Exception:
    """The SDK's error for a request that raised `exc`: a refused address or redirect is a bad response, a request
    the watch cut `expired`; `exc` itself when it is the SDK's own already."""
    if isinstance(exc, (AddressRefused, RedirectRefused)):
        return BadResponse(f"{exc}: {what}")
    if isinstance(exc, requests.TooManyRedirects):
        return BadResponse(f"more than 5 redirects: {what}")
    if entry.fired:
        return expired(entry, timeout, what)
    if isinstance(exc, (BadResponse, Transient, Interrupted)):
        return exc
    unclean = wire_error(exc)  # interim answers past their bound, an unasked 101, bytes after the answer
    if unclean is not None:
        return Transient(f"{unclean}: {what}")
    return transport_failure(exc, timeout, what)


def transport_failure(exc: Exception, timeout: float, what: str) -> Exception:
    """requests' and urllib3's errors as the SDK's; `exc` itself when it is none of theirs (a bug: raised as is)."""
    if exhausted(exc):
        return OutOfDescriptors(f"collector out of file descriptors: {what}")
    if isinstance(exc, UNFOLLOWABLE):
        return BadResponse(f"a redirect (or URL) that cannot be followed: {what}")
    if isinstance(exc, requests.Timeout):
        return Transient(f"timed out after {timeout:g}s: {what}")
    if isinstance(exc, (requests.ConnectionError, OSError, urllib3.exceptions.ProtocolError)):
        return Transient(f"{cause(exc) or 'connection failed'}: {what}")  # named: certificate, proxy, refused, ...
    if isinstance(exc, (requests.RequestException, urllib3.exceptions.HTTPError)):
        return Transient(f"{cause(exc) or f'request failed ({type(exc).__name__})'}: {what}")
    return exc


def expired(entry: Entry, timeout: float, what: str) -> Exception:
    """The error of a request the watch cut: `Interrupted` at the collector's stop cutoff, else `Transient`."""
    if entry.cutoff:
        return Interrupted(f"collector stopping: {what} cut short")
    return Transient(f"deadline of {timeout:g}s exceeded: {what}")
