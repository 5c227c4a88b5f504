"""The one HTTP/1.1 request-head parser (collector/net/head.py): what it accepts and what it refuses, and the same
answer from both servers that use it (the metrics port and the monitor), over real sockets."""

from __future__ import annotations

import socket

import pytest

from collector.daemon.httpserver import HttpServer
from collector.monitor import httpd
from collector.net.head import HEAD_LIMIT, HeadError, head_end, parse

from helpers.monitorserver import MonitorServer

ACCEPTED = {
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n": ("GET", "/", "", {"host": "a"}),
    b"GET /x?y=1&z HTTP/1.0\n\n": ("GET", "/x", "y=1&z", {}),  # bare LF ends lines (RFC 9112 lets a server)
    b"HEAD http://box:8089/healthz?a HTTP/1.1\r\n\r\n": ("HEAD", "/healthz", "a", {}),  # the absolute form
    b"POST /api/pause HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n": (
        "POST",
        "/api/pause",
        "",
        {"content-length": "2, 2"},  # repeats that agree
    ),
    b"GET /%7e HTTP/1.1\r\nX-A: one\r\nX-A: two\r\nX-T:\tpad \t\r\nX-L: caf\xe9\r\n\r\n": (
        "GET",
        "/%7e",
        "",
        {"x-a": "one, two", "x-t": "pad", "x-l": "caf\xe9"},
    ),
}

REFUSED = {
    b"garbage\r\n\r\n": 400,
    b"\r\nGET / HTTP/1.1\r\n\r\n": 400,  # an empty line before the request line
    b"GET /\r\n\r\n": 400,
    b"GET / HTTP/1.1 extra\r\n\r\n": 400,
    b"GET  / HTTP/1.1\r\n\r\n": 400,  # two spaces
    b"GET / HTTP/1.10\r\n\r\n": 400,
    b"GET / HTTP/2.0\r\n\r\n": 400,
    b"GET / http/1.1\r\n\r\n": 400,
    b"G\xc9T / HTTP/1.1\r\n\r\n": 400,  # the method is not a token
    b"GET healthz HTTP/1.1\r\n\r\n": 400,
    b"OPTIONS * HTTP/1.1\r\n\r\n": 400,
    b"GET /a#frag HTTP/1.1\r\n\r\n": 400,
    b"GET /\x7f HTTP/1.1\r\n\r\n": 400,
    b"GET / HTTP/1.1\r\nNo colon\r\n\r\n": 400,
    b"GET / HTTP/1.1\r\nHost : a\r\n\r\n": 400,  # blank between the name and its colon
    b"GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n": 400,
    b"GET / HTTP/1.1\r\nX-A: 1\r\n\tfolded\r\n\r\n": 400,
    b"GET / HTTP/1.1\r\nX-A: a\x00b\r\n\r\n": 400,
    b"GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n": 400,  # a bare CR
    b"GET / HTTP/1.1\r\nX-A: a\x1bb\r\n\r\n": 400,
    b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n": 400,
    b"GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n": 400,
    b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n": 400,
    b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n": 400,
    b"POST / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n": 400,
    b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n": 400,
}


@pytest.mark.parametrize("raw", list(ACCEPTED))
def test_a_well_formed_head_is_read_the_same_with_or_without_its_empty_line(raw):
    method, path, query, headers = ACCEPTED[raw]
    end = head_end(raw)
    assert end == len(raw)
    for whole in (raw, raw[:end].rstrip(b"\r\n")):
        head = parse(whole)
        assert (head.method, head.path, head.query, head.headers) == (method, path, query, headers)


@pytest.mark.parametrize("raw", list(REFUSED))
def test_a_head_the_rules_refuse_is_refused_with_its_status(raw):
    with pytest.raises(HeadError) as refused:
        parse(raw)
    assert refused.value.status == REFUSED[raw] and refused.value.reason


def test_a_head_over_the_limit_is_431_and_the_end_is_found_where_it_is():
    for size in (HEAD_LIMIT + 10, 3 * HEAD_LIMIT):
        raw = b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * size + b"\r\n\r\n"
        with pytest.raises(HeadError) as refused:
            parse(raw)
        assert refused.value.status == 431
    assert head_end(b"GET / HTTP/1.1\r\nA: b\r\n") == -1
    assert head_end(b"GET / HTTP/1.1\r\n\r\nbody\n\n") == len(b"GET / HTTP/1.1\r\n\r\n")
    assert head_end(b"GET / HTTP/1.1\nA: b\n\nmore") == len(b"GET / HTTP/1.1\nA: b\n\n")
    assert parse(b"GET / HTTP/1.1\r\nContent-Length: 12\r\n\r\n").content_length == 12
    assert parse(b"GET / HTTP/1.1\r\n\r\n").content_length == 0


# --- both servers, over real sockets ------------------------------------------------------------------------------
def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


async def monitor_hello(request: httpd.Request) -> httpd.Answer:
    return httpd.Answer(200, b"hello\n", "text/plain")


def status_of(port: int, raw: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while b"\r\n" not in data and (chunk := sock.recv(4096)):
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_both_servers_answer_every_head_alike():
    metrics = HttpServer(hello, "127.0.0.1", 0)
    try:
        with MonitorServer(monitor_hello) as monitor:
            for raw in [*ACCEPTED, *REFUSED]:
                if raw.startswith(b"POST") and raw in ACCEPTED:
                    raw += b"{}"
                expected = REFUSED.get(raw, 200)
                assert status_of(metrics.port, raw) == expected, raw
                assert status_of(monitor.port, raw) == expected, raw
            big = b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * (HEAD_LIMIT + 100) + b"\r\n\r\n"
            assert status_of(metrics.port, big) == status_of(monitor.port, big) == 431
    finally:
        metrics.close()
