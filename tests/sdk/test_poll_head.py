"""The head the lane writes for a poll with a bearer token (`request_head`'s own path) is the one requests'
PreparedRequest gives for the same GET (its general path, taken by any other authentication), byte for byte."""

from __future__ import annotations

import re
from typing import Any

import pytest
from requests.exceptions import InvalidHeader

from collector.sdk._polls import Asked, request_head
from collector.sdk._session import make_session
from collector.sdk.auth import BearerAuth, QueryParamAuth


class SameBearer(BearerAuth):
    """Adds the header as BearerAuth does; not BearerAuth itself, so it takes the PreparedRequest path."""


def both(headers: dict[str, Any], url: str = "https://api.github.com/user/starred?per_page=10", **session: Any):
    http = make_session("likeastore-collector/test")
    http.headers.update(session)
    asked = Asked(url, headers)
    return request_head(http, asked, BearerAuth("tok-1234", "token")), request_head(
        http, asked, SameBearer("tok-1234", "token")
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Accept": "application/vnd.github.star+json", "If-None-Match": 'W/"0-1-10"'},
        {"user-agent": "another/1.0"},  # another case: takes the session header's place, in the call's spelling
        {"Accept-Encoding": None},  # None takes the session's header out
        {b"X-Bytes-Name": "v"},  # a bytes name, as requests turns it into text
        {"Authorization": "Basic xyz"},  # the token's header wins over the call's
        {"X-Latin": "café"},
    ],
)
def test_a_bearer_polls_head_is_the_one_requests_prepares(headers: dict[str, Any]) -> None:
    fast, general = both(headers)
    assert fast is not None and general is not None
    assert fast == general
    assert b"\r\nAuthorization: token tok-1234\r\n" in fast.head


@pytest.mark.parametrize(
    ("url", "first", "port"),
    [
        ("https://api.example.com", b"GET / HTTP/1.1\r\nHost: api.example.com\r\n", 443),
        ("http://user:pw@api.example.com:8080/a?b=c", b"GET /a?b=c HTTP/1.1\r\nHost: api.example.com:8080\r\n", 8080),
        ("https://api.example.com/?q=%20", b"GET /?q=%20 HTTP/1.1\r\nHost: api.example.com\r\n", 443),
    ],
)
def test_the_request_line_host_and_port_are_the_ones_requests_prepares(url: str, first: bytes, port: int) -> None:
    fast, general = both({"Accept": "*/*"}, url)
    assert fast == general and fast is not None
    assert fast.head.startswith(first) and fast.port == port  # the Host line leaves the URL's user out


def test_a_request_the_lane_does_not_speak_is_refused_on_both_paths() -> None:
    assert both({}, "ftp://api.example.com/x") == (None, None)
    assert both({"X-Value": "naïve ✓"}) == (None, None)  # not Latin-1
    with pytest.raises(InvalidHeader):
        both({"X-Injected": "a\r\nX-Other: 1"})
    with pytest.raises(InvalidHeader):
        request_head(make_session("t"), Asked("https://a.example/", {"X-Injected": "a\r\nX-Other: 1"}), SameBearer("t"))


def test_a_token_with_a_line_break_is_not_sent_on_the_lane() -> None:
    asked = Asked("https://api.example.com/x", {})
    assert request_head(make_session("t"), asked, BearerAuth("bad\r\nX-Injected: 1")) is None


def test_an_authentication_that_moves_the_url_is_followed_to_its_request_line() -> None:
    outgoing = request_head(make_session("t"), Asked("https://api.example.com/x?a=1", {}), QueryParamAuth("key", "k1"))
    assert outgoing is not None
    assert outgoing.head.startswith(b"GET /x?a=1&key=k1 HTTP/1.1\r\nHost: api.example.com\r\n")


def test_the_lane_reads_its_tls_authorities_at_its_first_https_poll_and_only_then(monkeypatch):
    """Reading the CA bundle costs 20-40 ms of CPU: a lane that only polls over http never pays it, one that polls
    over https pays it once."""
    import ssl

    from collector.sdk import http as http_module
    from collector.settings import settings_for_tests

    read: list[tuple] = []
    monkeypatch.setattr(http_module, "tls_context", lambda *given: read.append(given) or ssl.create_default_context())
    http = http_module.Http(settings_for_tests())
    try:
        lane = http.lane_started("http")
        assert lane.tls is None and read == []
        assert http.lane_started("https") is lane and isinstance(lane.tls, ssl.SSLContext) and len(read) == 1
        assert http.lane_started("https") is lane and len(read) == 1
    finally:
        http.close()


def test_an_answer_read_on_the_lane_is_a_response_as_requests_makes_one_each_with_its_own_parts():
    """`as_response` makes its Response without requests' __init__: the same attributes, the mutable ones its own."""
    import requests

    from collector.net.pollloop import Answer
    from collector.sdk._polls import as_response

    headers = [("ETag", '"a"'), ("etag", '"b"'), ("Content-Type", "application/json; charset=latin-1")]
    first, second = (as_response(Answer(304, "Not Modified", headers, []), "https://x.test/s") for _ in range(2))
    assert first.__dict__.keys() == requests.Response().__dict__.keys()
    assert (first.status_code, first.reason, first.url, first.ok) == (304, "Not Modified", "https://x.test/s", True)
    assert first.headers["ETAG"] == '"a", "b"' and first.encoding == "latin-1" and first.elapsed.total_seconds() == 0
    assert first.history == [] and first.history is not second.history
    assert first.headers is not second.headers and first.cookies is not second.cookies
    first.history.append(first)
    assert second.history == [] and requests.Response().history == []


def test_the_headers_requests_would_refuse_are_refused_on_the_fast_path_as_requests_words_it():
    """`header_pairs` asks requests' own check only of headers its patterns do not pass: the patterns are requests'
    own (a release that changes them fails here), and every header requests refuses is refused, in its words."""
    from requests import _internal_utils
    from requests.utils import check_header_validity

    from collector.sdk._session import _NAME, _VALUE, header_pairs

    assert (_NAME.pattern, _VALUE.pattern) == (
        _internal_utils._VALID_HEADER_NAME_RE_STR.pattern,
        _internal_utils._VALID_HEADER_VALUE_RE_STR.pattern,
    )
    cases = [
        ("X-A", "v\n"),
        ("X-A", "v\r"),
        ("X-A", " v"),
        ("X-A", "a\nb"),
        ("X-A:", "v"),
        (" X-A", "v"),
        ("X\nA", "v"),
    ]
    cases += [("X-A", ""), ("X-A", "v"), ("X-A", "café"), (b"X-B", "v"), ("X-A", b"v"), ("X-A", 5)]
    for name, value in cases:
        try:
            check_header_validity((name, value))
        except InvalidHeader as refused:
            with pytest.raises(InvalidHeader, match=re.escape(str(refused))):
                header_pairs({}, {name: value})
        else:
            assert list(header_pairs({}, {name: value}).values()) == [
                (str(name, "ascii") if isinstance(name, bytes) else name, value)
            ]


def test_a_change_to_the_sessions_headers_reaches_the_next_poll_head():
    http = make_session("likeastore-collector/test")
    asked = Asked("https://api.github.com/user/starred", {})
    first = request_head(http, asked, BearerAuth("tok-1234", "token"))
    http.headers["X-Added"] = "one"
    http.headers.update({"User-Agent": "another/2"})
    second = request_head(http, asked, BearerAuth("tok-1234", "token"))
    del http.headers["X-Added"]
    third = request_head(http, asked, BearerAuth("tok-1234", "token"))
    assert first is not None and second is not None and third is not None
    assert b"X-Added: one" in second.head and b"User-Agent: another/2" in second.head
    assert b"X-Added" not in third.head and b"User-Agent: another/2" in third.head
    assert b"likeastore-collector/test" in first.head and b"likeastore-collector/test" not in second.head
