"""The one HTTP server core (collector/net/core.py) under both ports, over real sockets: one answer to a head
refused however much more of it comes, a body read whole within its bound and deadline, and the monitor, out of
descriptors, closes its own oldest connections to accept as the metrics port does."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from collector.daemon.httpserver import HttpServer
from collector.monitor import httpd
from collector.net.core import Core
from collector.net.head import HEAD_LIMIT

from helpers.monitorserver import MonitorServer
from helpers.proc import wait_until

pytestmark = pytest.mark.system


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


async def echo(request: httpd.Request) -> httpd.Answer:
    return httpd.Answer(200, f"{request.method} {len(request.body)}\n".encode(), "text/plain")


def talk(port: int, parts: list[bytes]) -> bytes:
    """Send `parts` one by one (a peer that stopped reading ends the sending), then read to the end."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            for part in parts:
                sock.sendall(part)
        except OSError:
            pass
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    return data


def test_both_ports_run_on_the_one_core():
    metrics = HttpServer(hello, "127.0.0.1", 0)
    try:
        with MonitorServer(echo) as monitor:
            assert isinstance(metrics.core, Core) and isinstance(monitor.server.core, Core)
            assert talk(metrics.port, [b"GET / HTTP/1.1\r\n\r\n"]).endswith(b"\r\n\r\nhello\n")
            assert talk(monitor.port, [b"GET / HTTP/1.1\r\n\r\n"]).endswith(b"\r\n\r\nGET 0\n")
    finally:
        metrics.close()


@pytest.mark.parametrize("size", [HEAD_LIMIT + 1, 2 * HEAD_LIMIT + 7, 4 * HEAD_LIMIT])
@pytest.mark.parametrize("pieces", [1, 3, 16])
def test_a_head_refused_gets_one_answer_however_much_more_of_it_comes(size, pieces):
    request = b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * size
    step = -(-len(request) // pieces)
    parts = [request[i : i + step] for i in range(0, len(request), step)]
    metrics = HttpServer(hello, "127.0.0.1", 0)
    try:
        with MonitorServer(echo) as monitor:
            for port, closed in ((metrics.port, metrics.closed), (monitor.port, monitor.server.closed)):
                data = talk(port, parts)
                assert data.startswith(b"HTTP/1.1 431 ") and data.count(b"HTTP/1.1") == 1, data[:200]
                assert closed["refused"] == 1
    finally:
        metrics.close()


@pytest.mark.parametrize("length", [0, 1, 999, httpd.BODY_LIMIT])
def test_a_body_within_its_bound_reaches_the_handler_whole_however_it_comes(length):
    body = bytes(range(256)) * (length // 256) + b"b" * (length % 256)
    head = f"POST /x HTTP/1.1\r\nContent-Length: {length}\r\n\r\n".encode()
    with MonitorServer(echo) as monitor:
        for parts in ([head + body], [head, body[: length // 2], body[length // 2 :]]):
            data = talk(monitor.port, parts)
            assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(f"\r\n\r\nPOST {length}\n".encode())


@pytest.mark.parametrize(
    "head, status",
    [
        (f"Content-Length: {httpd.BODY_LIMIT + 1}", 413),
        (f"Content-Length: {10 * httpd.BODY_LIMIT}", 413),
        ("Transfer-Encoding: chunked", 411),
    ],
)
def test_a_body_past_its_bound_is_refused_before_it_is_read(head, status):
    with MonitorServer(echo) as monitor:
        data = talk(monitor.port, [f"POST /x HTTP/1.1\r\n{head}\r\n\r\n".encode()])
        assert data.startswith(f"HTTP/1.1 {status} ".encode()) and b'"ok": false' in data
        assert monitor.server.closed == {"refused": 1}


@pytest.mark.parametrize("sent", [0, 1, 150])
def test_a_body_not_whole_within_the_deadline_is_answered_408(monkeypatch, sent):
    monkeypatch.setattr(httpd, "REQUEST_TIMEOUT", 0.3)
    with MonitorServer(echo) as monitor:
        data = talk(monitor.port, [b"POST /x HTTP/1.1\r\nContent-Length: 200\r\n\r\n" + b"b" * sent])
        assert data.startswith(b"HTTP/1.1 408 ") and monitor.server.closed == {"timeout": 1}
        assert talk(monitor.port, [b"GET / HTTP/1.1\r\n\r\n"]).endswith(b"GET 0\n")  # the next one is served


STARVED = """
import asyncio, json, resource, sys
from collector.monitor import httpd

async def hello(request):
    return httpd.Answer(200, b"hello\\n", "text/plain")

async def main():
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    httpd.MAX_CONNECTIONS = 1000
    server = httpd.Server(hello)
    print(await server.start("127.0.0.1", 0), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await server.close()
    print(json.dumps(server.closed), flush=True)

asyncio.run(main())
"""


def still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
    return False


@pytest.mark.parametrize("clients", [100, 250])
def test_the_monitor_out_of_descriptors_closes_its_oldest_connections_and_still_answers(clients):
    server = subprocess.Popen(
        [sys.executable, "-c", STARVED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    held: list[socket.socket] = []
    try:
        assert server.stdout is not None and server.stdin is not None
        port = int(server.stdout.readline())
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(clients)]
        wait_until(lambda: talk(port, [b"GET / HTTP/1.1\r\n\r\n"]).endswith(b"hello\n"), timeout=60)
        kept = [still_open(c) for c in held]
        assert 0 < kept.count(True) < 64 and kept == sorted(kept)  # the oldest were closed, the newest kept
        server.stdin.write("stop\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline()) == {"starved": kept.count(False)}
        assert server.wait(30) == 0
        assert "closed to free a file descriptor (the process had none left)" in server.stderr.read()
    finally:
        for sock in held:
            sock.close()
        if server.poll() is None:
            server.kill()
            server.wait()
