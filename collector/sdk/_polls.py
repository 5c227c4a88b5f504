"""What the lane's requests and answers are to the SDK (sdk/http.py): `Asked`, the GET a primed answer is for;
`request_head`, the bytes of the request the session would send for it; `as_response`, an answer read on the lane
as requests' Response; `unsendable`, a header the lane will not write."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from ..net.pollloop import Answer, Outgoing
from ._bearer import BearerAuth
from ._session import Headers, NoCookies, header_pairs, merged_headers


@dataclass(frozen=True)
class Asked:
    """What a run's GET asks, as `Connector.get` passes it: the URL with its parameters (before authentication
    adds any), and the headers (the connector's and the call's). A primed answer is for that GET only."""

    url: str
    headers: Mapping[str, str] = field(repr=False)  # an If-None-Match, an app's key: never in a repr


def request_head(session: requests.Session, asked: Asked, auth: Any) -> Outgoing | None:
    """The GET `asked` as the session would send it (its headers merged with the call's, `auth` applied), as the
    lane writes it; None for a request the lane does not speak (not http(s), a header not Latin-1, a line break in
    a value). A bearer token, every poll's case, is added as `BearerAuth` adds it, without building requests'
    PreparedRequest (~45 µs a poll, against ~10): the head is the same, byte for byte (tests/sdk/test_poll_head.py)."""
    target = _target(asked.url)
    if target is None:
        return None
    if type(auth) is BearerAuth:
        own = session.headers
        base = own.pairs() if type(own) is Headers else _base(tuple(own.items()))
        headers = header_pairs(base, asked.headers)
        headers["authorization"] = ("Authorization", f"{auth.scheme} {auth.token}")
        pairs: Iterable[tuple[str, Any]] = headers.values()
    else:
        prepared = requests.PreparedRequest()
        prepared.method, prepared.url = "GET", asked.url
        prepared.headers = merged_headers(session, asked.headers)
        prepared.prepare_auth(auth, asked.url)
        if prepared.url != asked.url:  # an authentication that moved the request elsewhere
            target = _target(prepared.url)
            if target is None:
                return None
        pairs = prepared.headers.items()
    scheme, host, port, first = target
    lines = [first]
    for name, value in pairs:
        if not isinstance(value, str) or not isinstance(name, str) or unsendable(name) or unsendable(value):
            return None  # (a token with a line break: the session's path refuses it, in its words)
        if name.lower() != "host":
            lines.append(f"{name}: {value}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        return None
    return Outgoing(scheme, host, port, head)


@functools.lru_cache(maxsize=1024)
def _target(url: str | None) -> tuple[str, str, int, str] | None:
    """Where a prepared URL goes, and the head's first lines (its path as requests' `path_url`, its Host); None
    when the lane does not speak it. Remembered: one poll URL serves every network of a service."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, f"GET {path} HTTP/1.1\r\nHost: {parts.netloc.rpartition('@')[2]}"


@functools.lru_cache(maxsize=16)
def _base(items: tuple[tuple[str, Any], ...]) -> dict[str, tuple[str, Any]]:
    """The session's headers by lower-case name (as CaseInsensitiveDict keeps them), remembered while they last."""
    return {name.lower(): (name, value) for name, value in items}


def unsendable(text: str) -> bool:
    """Whether a header name or value holds what would end the line (CR, LF) or a NUL."""
    return "\r" in text or "\n" in text or "\0" in text


def as_response(answer: Answer, url: str) -> requests.Response:
    """An answer read on the lane as requests' Response, its body still encoded (`Http._decode` decodes it);
    headers sent more than once joined by ", " (as urllib3 joins them)."""
    headers: dict[str, str] = {}
    lower: dict[str, str] = {}
    for name, value in answer.headers:
        key = lower.setdefault(name.lower(), name)
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    response = _blank_response()
    response.status_code = answer.status
    response.headers = CaseInsensitiveDict(headers)
    response.encoding = get_encoding_from_headers(response.headers)
    response.reason = answer.reason
    response.url = url
    response.cookies = NoCookies()
    response._content = answer.chunks  # type: ignore[assignment]  # raw until _decode
    response._content_consumed = True  # type: ignore[attr-defined]
    return response


# what a new Response holds, when it holds only what requests 2.x has always put there: a copy of it is made
# without Response's __init__ (its cookie jar, a lock inside, ~1.5 µs of a 304's ~7); the three mutable ones are
# replaced with the copy's own (`as_response` sets the headers and the cookies, `_blank_response` the history)
_TEMPLATE = requests.Response().__dict__
_KNOWN = {"_content", "_content_consumed", "_next", "status_code", "headers", "raw", "url", "encoding", "history"}
_KNOWN |= {"reason", "cookies", "elapsed", "request"}
_BLANK = dict(_TEMPLATE) if _TEMPLATE.keys() == _KNOWN else None


def _blank_response() -> requests.Response:
    """A new Response, as `requests.Response()` makes it but for its headers and cookies (set by the caller)."""
    if _BLANK is None:  # a requests that holds more: its own __init__
        return requests.Response()
    response = requests.Response.__new__(requests.Response)
    response.__dict__.update(_BLANK)
    response.history = []
    return response
