"""The requests session and adapter the collector's one `Http` uses, and how a request is handed to them.

The session keeps no cookie, follows at most 5 redirects (never from https to http, nor to a URL with
credentials), retries only failures to connect, and reads proxy settings from the environment only where proxies
are configured. The adapter builds its pools from checked connections (net/connections.py). `send` prepares a plain
GET itself and hands it to `Session.send` (requests' whole path re-merges the session's settings on every call).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from http.cookiejar import DefaultCookiePolicy
from typing import Any
from urllib.parse import urljoin, urlsplit
from urllib.request import getproxies

import requests
from requests._internal_utils import to_native_string
from requests.adapters import HTTPAdapter
from requests.cookies import RequestsCookieJar
from requests.structures import CaseInsensitiveDict
from requests.utils import check_header_validity, get_encoding_from_headers
from urllib3.util import Timeout
from urllib3.util.retry import Retry

from ..net.connections import POOL_CLASSES
from ..net.urls import prepared_url

NO_COOKIES = DefaultCookiePolicy(allowed_domains=[])  # a cookie jar under it keeps nothing


class RedirectRefused(Exception):
    """A redirect the collector will not follow (https to http, credentials in the URL)."""


class NoCookies(RequestsCookieJar):
    """The jar of the collector's one session and of every request it prepares: it keeps nothing and does not even
    read Set-Cookie (one server's cookie must never travel with another user's request)."""

    def __init__(self) -> None:
        super().__init__(NO_COOKIES)

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class Adapter(HTTPAdapter):
    """requests' adapter with our connection pools, and without work it would redo on every request of a request
    that goes through no proxy: the pool of an origin is looked up once (requests parses the URL and builds the
    pool key each time), the path is the request's own, and a pool's certificate settings are set once. Through
    the subclassing hooks requests documents; `send` stays requests' own (and `responses` can stand in for it).
    It remembers at most as many pools as the manager keeps (pool_connections): at most twice that many pools stay
    open, with their idle connections, where the manager alone would keep one set."""

    def init_poolmanager(self, connections: int, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(connections, *args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(POOL_CLASSES)
        self.pools: dict[tuple, Any] = {}
        self.pools_kept = connections  # what the manager keeps

    def forget_connections(self) -> None:
        """Close the idle pooled connections and let go of the pools: the next request connects afresh (and is
        checked afresh). Requests in flight finish on their connection, which is then closed, not reused."""
        self.pools.clear()
        self.poolmanager.clear()

    def get_connection_with_tls_context(self, request: Any, verify: Any, proxies: Any = None, cert: Any = None) -> Any:
        if proxies or cert is not None or not isinstance(verify, (bool, str)) or not isinstance(request.url, str):
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

    def proxy_manager_for(self, proxy: Any, **proxy_kwargs: Any) -> Any:
        """requests' manager for a proxy, its pools made of checked connections too (net/connections.py: the
        deadline watch, and answers read by net/answers.py); the check by address is the proxy's."""
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not getattr(manager, "collector_checked", False) and hasattr(manager, "pool_classes_by_scheme"):
            manager.pool_classes_by_scheme = dict(POOL_CLASSES)
            manager.collector_checked = True
        return manager

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        settled = (url[:5].lower() == "https", verify, cert)
        if getattr(conn, "_collector_cert", None) != settled:  # the same settings again: set already
            super().cert_verify(conn, url, verify, cert)
            conn._collector_cert = settled

    def request_url(self, request: Any, proxies: Any) -> str:
        return request.path_url if not proxies else super().request_url(request, proxies)

    def build_response(self, req: Any, resp: Any) -> requests.Response:
        """requests' own, without reading the answer's Set-Cookie headers into the response's jar: the session
        keeps no cookie (`NoCookies`) and nothing reads a response's, and that reading looked through every
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


class Session(requests.Session):
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
    session = Session()
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
    adapter = Adapter(max_retries=retry, pool_connections=pool_size, pool_maxsize=pool_size)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    session.headers = Headers(session.headers)
    session.headers["User-Agent"] = user_agent
    # one session serves every network: a cookie one server sets must not travel with another user's requests
    session.cookies = NoCookies()
    # requests re-reads proxy variables (and ~/.netrc) from the environment on every request, which costs
    # about as much CPU as the request itself; do it only where proxies are configured.
    session.trust_env = bool(getproxies())
    return session


@functools.lru_cache(maxsize=8)
def connect_only(seconds: float) -> Timeout:
    """`seconds` for connecting as urllib3's Timeout, made once per value (the adapter would make one per request;
    urllib3 clones it before use); reads have none, the deadline watch ends them (net/deadline.py)."""
    return Timeout(connect=seconds, read=None)


def send(session: requests.Session, timeout: float, method: str, url: str, **kwargs: Any) -> requests.Response:
    """A GET without a body and without proxies is prepared here and handed to `Session.send` (the adapter's
    pool, redirects and response hooks as requests does them): `Session.request` would merge the session's
    settings, cookies and environment again on every call, as much CPU as the exchange itself. Any other
    request takes requests' whole path."""
    data = kwargs.pop("data", None)
    if method != "GET" or data is not None or session.trust_env or session.proxies or session.params or session.auth:
        # the session's authorities (CA_BUNDLE), which requests would let REQUESTS_CA_BUNDLE override
        return session.request(method, url, data=data, timeout=timeout, stream=True, verify=session.verify, **kwargs)
    prepared = requests.PreparedRequest()
    prepared.method = "GET"
    prepared.url = prepared_url(url, kwargs.get("params"))
    prepared.headers = merged_headers(session, kwargs.get("headers"))
    prepared._cookies = NoCookies()  # type: ignore[attr-defined]  # (make_session)
    prepared.body = None
    prepared.hooks = {"response": list(session.hooks.get("response") or ())}  # the session's hooks
    prepared.prepare_auth(kwargs.get("auth"), prepared.url)
    return session.send(
        prepared,
        timeout=connect_only(timeout),  # type: ignore[arg-type]  # urllib3's Timeout (adapter docs)
        stream=True,
        allow_redirects=True,
        proxies={},
        verify=session.verify,
        cert=session.cert,
    )


def merged_headers(session: requests.Session, headers: Mapping[str, Any] | None) -> CaseInsensitiveDict:
    """The session's headers and the call's (None removes one), each checked as requests checks them (no CR,
    LF or leading space: a value from a document cannot add a header)."""
    own = {name.lower(): (name, value) for name, value in session.headers.items()}
    return CaseInsensitiveDict(list(header_pairs(own, headers or {}).values()))


def header_pairs(base: Mapping[str, tuple[str, Any]], call: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """`base` (headers by lower-case name: their spelling and value, as CaseInsensitiveDict keeps them) with the
    call's over them: None removes one, a name given again in another case takes its place and its spelling, each
    checked as requests checks them."""
    merged = dict(base)
    for name, value in call.items():
        if value is None:
            merged.pop(name.lower(), None)
            continue
        if type(name) is not str or type(value) is not str or not _NAME.match(name) or not _VALUE.match(value):
            check_header_validity((name, value))  # requests' own check, in its words (and bytes)
            name = to_native_string(name)
        merged[name.lower()] = (name, value)
    return merged


# what requests' check_header_validity accepts of a name and a value as text (requests/_internal_utils.py): a text
# header these match is one it accepts, so it is not asked (~0.45 µs a header of every poll)
_NAME = re.compile(r"^[^:\s][^:\r\n]*\Z")
_VALUE = re.compile(r"^\S[^\r\n]*\Z|^\Z")


class Headers(CaseInsensitiveDict):
    """The session's headers, which keep them by lower-case name as the lane's request heads take them in
    (`pairs`), made again only after a change."""

    def __init__(self, data: Any = None, **kwargs: Any) -> None:
        self._pairs: dict[str, tuple[str, Any]] | None = None
        super().__init__(data, **kwargs)

    def __setitem__(self, key: str, value: Any) -> None:
        self._pairs = None
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._pairs = None
        super().__delitem__(key)

    def pairs(self) -> dict[str, tuple[str, Any]]:
        """{lower-case name: (name, value)}; not to be changed (a copy is)."""
        if self._pairs is None:
            self._pairs = {name.lower(): (name, value) for name, value in self.items()}
        return self._pairs
