"""The HTTP session connectors share, with every request bounded and every connection checked.

- **A deadline per request.** `HTTP_TIMEOUT` bounds the whole request: connecting, the status line and headers,
  and the body, however slowly a server trickles them. One watch thread per process shuts down the socket of a
  request that passes its deadline (socket timeouts alone only bound each read). A GET's reads carry no socket
  timeout of their own, nor does its request sent on a kept-alive connection: the watch is their bound (a
  timeout costs a poll() before every read and write, and switching it two ioctl() calls per request, each a
  hand-over of the interpreter lock); connecting keeps HTTP_TIMEOUT as its timeout, since the watch takes a
  socket once it is connected.
- **A size cap.** Bodies are read as received up to `HTTP_MAX_BYTES` (past it: refused, the connection dropped),
  then decoded (gzip/deflate) in bounded steps up to `HTTP_MAX_BYTES` decoded (past it: refused).
- **Addresses.** Every socket to a host that is not one of the collector's configured API hosts is checked at the
  address actually connected to (no loopback, private, link-local or translated address unless
  ALLOW_PRIVATE_HOSTS), on every redirect hop; a redirect may not leave https.
- **Slots.** With `slots` (slots.py) each request waits for a slot of its run's service and of the whole before it
  is sent, and gives them back once its body is read (still encoded): the concurrency bounds exchanges, not runs.
  The body is decoded after that, a large one under the run's turn (slots.py: one run at a time).
- **Stopping.** `interrupt_after(seconds)` cuts every request still running after that many seconds, and
  refuses new ones: a collector that is asked to stop is done within the deadline.

Error messages name the host and path only: a query string may carry credentials for some services.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import socket
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookiejar import DefaultCookiePolicy
from typing import Any, cast
from urllib.parse import urljoin, urlsplit
from urllib.request import getproxies

import requests
import urllib3
from requests._internal_utils import to_native_string
from requests.adapters import HTTPAdapter
from requests.cookies import RequestsCookieJar
from requests.structures import CaseInsensitiveDict
from requests.utils import check_header_validity, get_encoding_from_headers
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import Timeout
from urllib3.util import connection as urllib3_connection
from urllib3.util.retry import Retry

from ..settings import Settings
from .decoding import CHUNK, decode_body
from .errors import BadResponse, Interrupted, OutOfDescriptors, Transient, exhausted
from .headers import install as install_header_parser
from .safeurl import is_public
from .slots import Slots, give_turn, take_turn

log = logging.getLogger(__name__)
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
NO_COOKIES = DefaultCookiePolicy(allowed_domains=[])  # a cookie jar under it keeps nothing
NO_CONTENT = frozenset({204, 304})  # statuses that have no body
TURN_BYTES = 32 * 1024  # an answer this large (decoded) waits for the turn to be turned into items (slots.py)
TURN_RAW_BYTES = 4 * 1024  # a body this large as received waits for the turn to be decoded (JSON gzips ~8 to 1)


class AddressRefused(Exception):
    """A connection to a non-public address from a host the collector does not trust."""


class RedirectRefused(Exception):
    """A redirect the collector will not follow (https to http, credentials in the URL)."""


@dataclass(frozen=True)
class Policy:
    allow_private: bool
    trusted_hosts: frozenset[str]

    def must_check(self, host: str | None) -> bool:
        return not self.allow_private and (host or "").lower().strip("[]") not in self.trusted_hosts


@dataclass(eq=False)
class _Entry:
    """One request under watch: its deadline (monotonic seconds) and the connections it uses."""

    owner: Any
    deadline: float
    cutoff: bool  # the deadline is the owner's stop cutoff, not the request's own
    policy: Policy
    conns: list = field(default_factory=list)
    done: bool = False
    fired: bool = False


class _Watch:
    """Shuts down the sockets of requests that pass their deadline. One daemon thread, started on first use."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # RLock: a signal handler on the main thread may call clamp()
        self.wake = threading.Condition(self.lock)
        self.heap: list[tuple[float, int, _Entry]] = []
        self.active: set[_Entry] = set()
        self.local = threading.local()
        self.seq = itertools.count()
        self.thread: threading.Thread | None = None

    def begin(self, owner: Any, deadline: float, cutoff: bool, policy: Policy) -> _Entry:
        entry = _Entry(owner, deadline, cutoff, policy)
        self.local.entry = entry
        with self.lock:
            self.active.add(entry)
            self._push(entry)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="http-deadlines", daemon=True)
                self.thread.start()
        return entry

    def end(self, entry: _Entry) -> None:
        self.local.entry = None
        with self.lock:
            entry.done = True
            entry.conns = []  # a finished entry may wait in the heap a while: it holds no connection meanwhile
            self.active.discard(entry)
            if len(self.heap) > 1024 and len(self.heap) > 4 * len(self.active):
                self.heap = [item for item in self.heap if not item[2].done]
                heapq.heapify(self.heap)

    def current(self) -> _Entry | None:
        return getattr(self.local, "entry", None)

    def attach(self, conn: Any, sock: socket.socket | None) -> None:
        """Put a connection (and its socket) under the current request's deadline."""
        entry = self.current()
        if entry is None or sock is None:
            return
        with self.lock:
            conn._collector_entry = entry  # a pooled connection belongs to the request that uses it now
            entry.conns.append((conn, sock))
            if entry.fired:
                _shutdown(conn, sock)

    def clamp(self, owner: Any, deadline: float) -> None:
        """Bring the deadline of every running request of `owner` forward to `deadline`."""
        with self.lock:
            for entry in list(self.active):
                if entry.owner is owner and deadline < entry.deadline:
                    entry.deadline, entry.cutoff = deadline, True
                    self._push(entry)

    def _push(self, entry: _Entry) -> None:
        heapq.heappush(self.heap, (entry.deadline, next(self.seq), entry))
        if self.heap[0][2] is entry:  # only an earlier deadline than the one the watch sleeps towards wakes it
            self.wake.notify()

    def _run(self) -> None:
        with self.lock:
            while True:
                while self.heap and (self.heap[0][2].done or self.heap[0][2].fired):
                    heapq.heappop(self.heap)
                if not self.heap:
                    self.wake.wait()
                    continue
                deadline, _, entry = self.heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self.wake.wait(delay)
                    continue
                heapq.heappop(self.heap)
                if deadline > entry.deadline:
                    continue  # an older, later deadline of a clamped entry
                entry.fired = True
                for conn, sock in entry.conns:
                    if getattr(conn, "_collector_entry", None) is entry:
                        _shutdown(conn, sock)


READ_BUFFER = 64 * 1024  # bytes http.client's response reader takes per read (its default: 8 KiB)


def _quiet_class(base: type[socket.socket]) -> type:
    """`base` (a socket class) whose settimeout() does nothing when the timeout is already that value: urllib3
    sets it twice per request, and each set is an ioctl() that gives the interpreter lock to another thread. Its
    response reader (makefile) reads up to 64 KiB at a time: a page that arrived whole (a 560 KB page is ~32 KB
    gzipped) is taken in by the read that finds its status line, not by a second read for the rest (every read
    is a system call that lets go of the lock, and under load getting it back costs up to a switch interval)."""

    def settimeout(self: socket.socket, value: Any) -> None:
        if (value is None or type(value) in (int, float)) and value == self.gettimeout():
            return
        base.settimeout(self, value)

    def makefile(self: socket.socket, mode: str = "r", buffering: int | None = None, **kwargs: Any) -> Any:
        if mode == "rb" and buffering is None:  # http.client's reader of a response
            buffering = READ_BUFFER
        return base.makefile(self, mode, buffering, **kwargs)  # type: ignore[call-overload]

    return type(
        f"Quiet{base.__name__}",
        (base,),
        {"__slots__": (), "settimeout": settimeout, "makefile": makefile, "quiet": True},
    )


_QUIET: dict[type, type] = {}


def _quiet(sock: Any) -> None:
    """Give a connected socket (plain or TLS) the settimeout() of `_quiet_class` (a subclass with no slots of its
    own: the object's layout is unchanged, so its class may be swapped)."""
    if isinstance(sock, socket.socket) and not getattr(sock, "quiet", False):
        kind = type(sock)
        sock.__class__ = _QUIET.get(kind) or _QUIET.setdefault(kind, _quiet_class(kind))


def _shutdown(conn: Any, sock: socket.socket) -> None:
    target = getattr(conn, "sock", None) or sock
    try:
        socket.socket.shutdown(target, socket.SHUT_RDWR)  # the plain socket's: safe under a TLS reader
    except (OSError, TypeError, ValueError):
        pass


_WATCH = _Watch()


class _Guarded:
    """Connection mix-in: the deadline watch, and the address check made before connecting. For a host the
    collector does not trust (a user-supplied instance, a redirect elsewhere), the name is resolved once, every
    address is checked, and a connection is opened only to an address that passed — so no TCP connection ever
    reaches a non-public address (no port-scan oracle: open and closed ports give the same refusal), and a name
    that answers a public address first and loopback next cannot rebind: the address checked is the address
    connected to. Behind a proxy the socket reaches the proxy; the check by address is the proxy's."""

    host: str
    port: int
    proxy: Any
    sock: Any
    timeout: Any
    source_address: Any
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        entry = _WATCH.current()
        if entry is not None and not self.proxy and entry.policy.must_check(self.host):
            sock = self._connect_checked(entry)
        else:
            if entry is not None:  # the watch cannot cut a socket still connecting: no attempt outlives the deadline
                self.timeout = self._within(entry)
            sock = super()._new_conn()  # type: ignore[misc]
        _WATCH.attach(self, sock)
        return sock

    def _within(self, entry: _Entry) -> Any:
        """The connect timeout, cut to what is left of the request's deadline; ConnectTimeoutError when none is."""
        left = entry.deadline - time.monotonic()
        if left <= 0:
            raise ConnectTimeoutError(self, f"connection to {self.host}: the request's deadline passed")
        return min(self.timeout, left) if isinstance(self.timeout, (int, float)) else left

    def _connect_checked(self, entry: _Entry) -> socket.socket:
        host = getattr(self, "_dns_host", self.host)
        try:
            infos = socket.getaddrinfo(host, self.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]
        passed = [info for info in infos if is_public(str(info[4][0]))]
        if not passed:
            raise AddressRefused(f"connection to {self.host} refused: non-public address (ALLOW_PRIVATE_HOSTS is off)")
        error: Exception | None = None
        for _family, _type, _proto, _name, sockaddr in passed:  # a name may have dozens of addresses: one deadline
            try:
                return urllib3_connection.create_connection(
                    (str(sockaddr[0]), self.port),
                    self._within(entry),
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as exc:
                error = ConnectTimeoutError(self, f"connection to {self.host} timed out")
                error.__cause__ = exc
            except OSError as exc:
                error = NewConnectionError(self, f"failed to connect to {self.host}: {exc}")  # type: ignore[arg-type]
                error.__cause__ = exc
        assert error is not None
        raise error

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _quiet(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        if self.sock is not None:  # a pooled connection, reused: under this request's deadline now
            _WATCH.attach(self, self.sock)
            if _WATCH.current() is not None:
                self.timeout = None  # sent as its reads are read: bounded by the watch (module docstring)
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_Guarded, HTTPConnection):
    pass


class _HTTPSConnection(_Guarded, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _NoCookies(RequestsCookieJar):
    """The jar of the collector's one session and of every request it prepares: it keeps nothing and does not even
    read Set-Cookie (one server's cookie must never travel with another user's request)."""

    def __init__(self) -> None:
        super().__init__(NO_COOKIES)

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class _Adapter(HTTPAdapter):
    """requests' adapter with our connection pools, and without work it would redo on every request of a request
    that goes through no proxy: the pool of an origin is looked up once (requests parses the URL and builds the
    pool key each time), the path is the request's own, and a pool's certificate settings are set once. Through
    the subclassing hooks requests documents; `send` stays requests' own (and `responses` can stand in for it).
    It remembers at most as many pools as the manager keeps (pool_connections): at most twice that many pools stay
    open, with their idle connections, where the manager alone would keep one set."""

    def init_poolmanager(self, connections: int, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(connections, *args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
        self.pools: dict[tuple, Any] = {}
        self.pools_kept = connections  # what the manager keeps

    def get_connection_with_tls_context(self, request: Any, verify: Any, proxies: Any = None, cert: Any = None) -> Any:
        if proxies or cert is not None or not isinstance(verify, bool) or not isinstance(request.url, str):
            return super().get_connection_with_tls_context(request, verify, proxies, cert)
        parts = urlsplit(request.url)
        key = (parts.scheme, parts.netloc, verify)
        pool = self.pools.get(key)
        if pool is None:
            pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
            if len(self.pools) >= self.pools_kept:
                self.pools.clear()
            self.pools[key] = pool
        return pool

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        settled = (url[:5].lower() == "https", verify, cert)
        if getattr(conn, "_collector_cert", None) != settled:  # the same settings again: set already
            super().cert_verify(conn, url, verify, cert)
            conn._collector_cert = settled

    def request_url(self, request: Any, proxies: Any) -> str:
        return request.path_url if not proxies else super().request_url(request, proxies)

    def build_response(self, req: Any, resp: Any) -> requests.Response:
        """requests' own, without reading the answer's Set-Cookie headers into the response's jar: the session
        keeps no cookie (`_NoCookies`) and nothing reads a response's, and that reading looked through every
        header of every answer (`email.message` lookups)."""
        response = requests.Response()
        response.status_code = getattr(resp, "status", None)  # type: ignore[assignment]
        response.headers = CaseInsensitiveDict(getattr(resp, "headers", {}))
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = resp
        response.reason = resp.reason
        response.url = req.url.decode("utf-8") if isinstance(req.url, bytes) else req.url
        response.request = req
        response.connection = self
        return response

    def close(self) -> None:
        self.pools.clear()
        super().close()


class _Session(requests.Session):
    def get_redirect_target(self, resp: requests.Response) -> str | None:
        try:
            target = super().get_redirect_target(resp)
            if target is None:
                return None
            parts = urlsplit(urljoin(resp.url, target))
        except (ValueError, UnicodeError):  # `http://[::1`, bytes that are not UTF-8
            raise RedirectRefused("redirect to a Location that cannot be read refused") from None
        if urlsplit(resp.url).scheme == "https" and parts.scheme != "https":
            raise RedirectRefused(f"redirect from https to {parts.scheme or 'none'}:// refused")
        if parts.username or parts.password:
            raise RedirectRefused("redirect to a URL with credentials refused")
        return target


def make_session(user_agent: str, pool_size: int = 32) -> requests.Session:
    session = _Session()
    session.max_redirects = 5
    # Retry only failures to connect, quickly; status codes are the executor's business (backoff, rateLimit).
    retry = Retry(
        total=2,
        connect=2,
        read=0,
        status=0,
        other=0,
        redirect=5,
        backoff_factor=0.2,
        allowed_methods=frozenset({"GET"}),
        raise_on_status=False,
        respect_retry_after_header=False,
    )
    adapter = _Adapter(max_retries=retry, pool_connections=pool_size, pool_maxsize=pool_size)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    session.headers["User-Agent"] = user_agent
    # one session serves every network: a cookie one server sets must not travel with another user's requests
    session.cookies = _NoCookies()
    # requests re-reads proxy variables (and ~/.netrc) from the environment on every request, which costs
    # about as much CPU as the request itself; do it only where proxies are configured.
    session.trust_env = bool(getproxies())
    return session


def where(url: str) -> str:
    """host/path of a URL, without the query or credentials: safe to log (no secret travels in a URL's host or
    path, and this runs for every request: it is cut, not masked)."""
    try:
        parts = urlsplit(url)
        return f"{parts.hostname or ''}{parts.path}"[:300]
    except ValueError:
        return "(unreadable URL)"


def trusted_hosts(settings: Settings) -> frozenset[str]:
    """Hosts the operator configured (GITHUB_API_URL, e.g. a GitHub Enterprise server on a private network)."""
    hosts = set()
    for url in (settings.github_api_url,):
        host = urlsplit(url).hostname
        if host:
            hosts.add(host.lower())
    return frozenset(hosts)


def bounded_decompress(data: bytes, limit: int, wbits: int) -> bytes:
    """zlib/gzip data decompressed to at most `limit` bytes; BadResponse past it (a decompression bomb), or when
    the stream does not end (cut short: the part that came is not the page)."""
    decompressor = zlib.decompressobj(wbits)
    out = decompressor.decompress(data, limit + 1)
    if len(out) > limit:
        raise BadResponse(f"decompressed body exceeds the {limit}-byte cap")
    if not decompressor.eof:
        raise BadResponse("body cut short: its compressed stream does not end")
    return out


def prepared_url(url: str, params: Any) -> str:
    """The URL as requests prepares it (checked, IDNA host, quoted, parameters encoded); remembered for plain
    parameters (str/int/float values): the same poll URL serves every network of a service."""
    pairs = _plain(params)
    if pairs is None:
        request = requests.PreparedRequest()
        request.prepare_url(url, params)
        assert request.url is not None
        return request.url
    return _prepared_url(url, pairs)


@functools.lru_cache(maxsize=4096)
def _prepared_url(url: str, pairs: tuple) -> str:
    request = requests.PreparedRequest()
    request.prepare_url(url, pairs or None)
    assert request.url is not None
    return request.url


def _plain(params: Any) -> tuple | None:
    """(name, value) pairs of parameters that can be remembered ((): none), or None when they are not plain."""
    if params is None:
        return ()
    if not isinstance(params, Mapping):
        return None
    pairs = tuple(params.items())
    for name, value in pairs:
        if not isinstance(name, str) or type(value) not in (str, int, float):
            return None
    return pairs


@functools.lru_cache(maxsize=8)
def connect_only(seconds: float) -> Timeout:
    """`seconds` for connecting as urllib3's Timeout, made once per value (the adapter would make one per request;
    urllib3 clones it before use); reads have none, the deadline watch ends them (module docstring)."""
    return Timeout(connect=seconds, read=None)


class Http:
    def __init__(self, settings: Settings, session: requests.Session | None = None, pool_size: int = 32):
        self.timeout = settings.http_timeout
        self.max_bytes = getattr(settings, "http_max_bytes", DEFAULT_MAX_BYTES)
        self.session = session or make_session(settings.user_agent, pool_size)
        self.policy = Policy(settings.allow_private_hosts, trusted_hosts(settings))
        self.cutoff: float | None = None
        self.counts = threading.local()
        self.slots: Slots | None = None  # request slots (slots.py), given by the engine: None, no limit here
        install_header_parser()  # http.client's header parsing without the email parser for plain lines

    def get(self, url: str, *, params=None, headers=None, auth=None) -> requests.Response:
        return self.request("GET", url, params=params, headers=headers, auth=auth)

    def post(self, url: str, *, data=None, headers=None, auth=None) -> requests.Response:
        return self.request("POST", url, data=data, headers=headers, auth=auth)

    def interrupt_after(self, seconds: float) -> None:
        """The collector is stopping: requests still running `seconds` from now are cut, later ones refused."""
        cutoff = time.monotonic() + max(seconds, 0.0)
        self.cutoff = cutoff if self.cutoff is None else min(self.cutoff, cutoff)
        _WATCH.clamp(self, self.cutoff)

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
        now = time.monotonic()
        deadline, cutoff = now + self.timeout, False
        if self.cutoff is not None:
            if now >= self.cutoff:
                raise Interrupted(f"collector stopping: {what} not started")
            if self.cutoff < deadline:
                deadline, cutoff = self.cutoff, True
        entry = _WATCH.begin(self, deadline, cutoff, self.policy)
        code = "error"
        try:
            response = self._send(method, url, **kwargs)
            code = str(response.status_code)
            if response.status_code < 200:
                # an interim answer (103 Early Hints) that http.client took for the final one: the real answer may
                # still come on this connection and would be read as the next request's, so the connection is closed
                response.close()
                raise Transient(f"{response.status_code} interim response taken as the answer: {what}")
            if 300 <= response.status_code < 400 and response.status_code != 304:
                # redirects with a usable Location were followed: this one has none (or one nobody can follow).
                # Never an empty page: that would end a history walk as if it were complete
                response.close()
                raise BadResponse(
                    f"{response.status_code} redirect without a usable Location: {what}", response.status_code
                )
            self._read_body(response, what)
            if entry.fired:
                raise Transient("cut")  # a body ended by the watch may look complete: never trust it
            return response
        except (BadResponse, Transient, Interrupted) as error:
            if entry.fired:
                raise self._expired(entry, what) from None
            raise error
        except AddressRefused as exc:
            raise BadResponse(f"{exc}: {what}") from None
        except RedirectRefused as exc:
            raise BadResponse(f"{exc}: {what}") from None
        except requests.TooManyRedirects:
            raise BadResponse(f"more than 5 redirects: {what}") from None
        except Exception as exc:
            if entry.fired:
                raise self._expired(entry, what) from None
            if exhausted(exc):
                raise OutOfDescriptors(f"collector out of file descriptors: {what}") from None
            if isinstance(
                exc,
                (
                    requests.exceptions.InvalidURL,
                    requests.exceptions.MissingSchema,
                    requests.exceptions.InvalidSchema,
                    requests.exceptions.URLRequired,
                ),
            ):
                raise BadResponse(f"a redirect (or URL) that cannot be followed: {what}") from None
            if isinstance(exc, requests.Timeout):
                raise Transient(f"timed out after {self.timeout:g}s: {what}") from None
            if isinstance(exc, (requests.ConnectionError, OSError, urllib3.exceptions.ProtocolError)):
                raise Transient(f"connection failed: {what}") from None
            if isinstance(exc, (requests.RequestException, urllib3.exceptions.HTTPError)):
                raise Transient(f"request failed ({type(exc).__name__}): {what}") from None
            raise
        finally:
            _WATCH.end(entry)
            codes = self.counts.__dict__.setdefault("codes", {})
            codes[code] = codes.get(code, 0) + 1

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        """A GET without a body and without proxies is prepared here and handed to `Session.send` (the adapter's
        pool, redirects and response hooks as requests does them): `Session.request` would merge the session's
        settings, cookies and environment again on every call, as much CPU as the exchange itself. Any other
        request takes requests' whole path."""
        data = kwargs.pop("data", None)
        session = self.session
        if (
            method != "GET"
            or data is not None
            or session.trust_env
            or session.proxies
            or session.params
            or session.auth
        ):
            return session.request(method, url, data=data, timeout=self.timeout, stream=True, **kwargs)
        prepared = requests.PreparedRequest()
        prepared.method = "GET"
        prepared.url = prepared_url(url, kwargs.get("params"))
        prepared.headers = self._headers(kwargs.get("headers"))
        prepared._cookies = _NoCookies()  # type: ignore[attr-defined]  # (make_session)
        prepared.body = None
        prepared.hooks = {"response": list(session.hooks.get("response") or ())}  # the session's hooks
        prepared.prepare_auth(kwargs.get("auth"), prepared.url)
        return session.send(
            prepared,
            timeout=connect_only(self.timeout),  # type: ignore[arg-type]  # urllib3's Timeout (adapter docs)
            stream=True,
            allow_redirects=True,
            proxies={},
            verify=session.verify,
            cert=session.cert,
        )

    def _headers(self, headers: Mapping[str, Any] | None) -> CaseInsensitiveDict:
        """The session's headers and the call's (None removes one), each checked as requests checks them (no CR,
        LF or leading space: a value from a document cannot add a header)."""
        merged = CaseInsensitiveDict(self.session.headers)
        for name, value in (headers or {}).items():
            if value is None:
                merged.pop(name, None)
                continue
            check_header_validity((name, value))
            merged[to_native_string(name)] = value
        return merged

    def _expired(self, entry: _Entry, what: str) -> Exception:
        if entry.cutoff:
            return Interrupted(f"collector stopping: {what} cut short")
        return Transient(f"deadline of {self.timeout:g}s exceeded: {what}")

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
        cap = self.max_bytes
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > cap:
            raise BadResponse(f"body of {length} bytes exceeds the {cap}-byte cap: {what}", response.status_code)
        if response.status_code in NO_CONTENT:  # no body by definition (RFC 9110): nothing to decode
            response.raw.read(decode_content=False)  # read to its end: the connection is free for the next
            return []
        chunks: list[bytes] = []
        received = 0
        for chunk in response.raw.stream(CHUNK, decode_content=False):
            received += len(chunk)
            if received > cap:
                raise BadResponse(f"body exceeds the {cap}-byte cap: {what}", response.status_code)
            chunks.append(chunk)
        return chunks

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
        self.session.close()
