"""The monitor's server over real sockets, on the MongoDB stand-in: one set of reads per refresh whatever the number
of pages open, every page fed; idle, slow and surplus clients bounded without stalling the others; an outage of
the database said on the page and recovered from."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.request
from collections import Counter
from datetime import UTC, datetime

import pytest
from pymongo import MongoClient, monitoring

from collector.devtools.mongowire import WireServer
from collector.monitor import httpd, serve
from collector.monitor.app import Monitor

from helpers.proc import wait_until

pytestmark = pytest.mark.system
# find collectors; on networks 6 aggregates (status's counts, per mode and service, through the index's ranges) and 6
# finds (the most behind, in and not yet in the due range, per mode; the latest errors; the networks waiting for
# re-authorisation); 2 aggregates and a count on items; find control; find sinks
PER_REFRESH = 18


class Commands(monitoring.CommandListener):
    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        target = event.command.get(event.command_name)
        self.seen[(event.command_name, target if isinstance(target, str) else "")] += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


class Running:
    """A Monitor served on a thread of its own, on 127.0.0.1 and a free port."""

    def __init__(self, monitor: Monitor):
        self.monitor, self.port, self.ready = monitor, 0, threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self.main(),), daemon=True)

    async def main(self) -> None:
        self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()
        await self.monitor.run("127.0.0.1", 0, self.stop, self.started)

    def started(self, port: int) -> None:
        self.port = port
        self.ready.set()

    def __enter__(self) -> Running:
        self.thread.start()
        assert self.ready.wait(60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(60)

    def snapshot(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/snapshot", timeout=10) as reply:
            return json.loads(reply.read())


class Page:
    """An open event stream, read on a thread: the events it got."""

    def __init__(self, port: int, read: bool = True):
        self.sock = socket.socket()
        if not read:  # a page that never reads: a small window, so the server's queue fills
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.data = bytearray()
        if read:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := self._recv():
            self.data += chunk

    def _recv(self) -> bytes:
        try:
            return self.sock.recv(65536)
        except OSError:
            return b""

    def events(self, name: str) -> int:
        return bytes(self.data).count(b"event: " + name.encode() + b"\n")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def fleet():
    with WireServer() as wire:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        now = datetime.now(UTC)
        db.collectors.insert_one({"_id": "c1", "mode": "normal", "statsAt": now, "heartbeatAt": now})
        db.networks.insert_one({"user": "a@x", "service": "github", "scheduledTo": now})
        listener = Commands()
        watched = MongoClient(wire.uri, tz_aware=True, event_listeners=[listener], serverSelectionTimeoutMS=1000)
        yield wire, Monitor(watched.get_default_database()), listener


def test_ten_pages_cost_the_database_what_one_does_and_every_page_is_fed(fleet):
    _, monitor, commands = fleet
    with Running(monitor) as running:
        one = Page(running.port)
        wait_until(lambda: one.events("snapshot") >= 3, timeout=60)
        reads, finds, total = monitor.reads, commands.seen[("find", "collectors")], sum(commands.seen.values())
        pages = [Page(running.port) for _ in range(10)]
        wait_until(lambda: all(p.events("snapshot") >= 4 for p in pages), timeout=60)
        more_reads = monitor.reads - reads
        assert commands.seen[("find", "collectors")] - finds in (more_reads, more_reads + 1)  # one read in flight
        assert sum(commands.seen.values()) - total <= PER_REFRESH * (more_reads + 1)  # not ten times as many
        assert running.snapshot()["monitor"]["viewers"] == 11
        assert all(p.events("history") == 1 for p in pages) and one.events("history") == 1
        for page in [one, *pages]:
            page.close()
    # a refresh is one set of commands (the fleet, and the work: status's counts, the most behind, the errors)
    refreshes = commands.seen[("find", "collectors")]
    assert sum(commands.seen.values()) <= PER_REFRESH * refreshes
    assert commands.seen[("find", "control")] <= refreshes


def test_idle_slow_and_surplus_clients_are_cut_and_never_stall_the_others(fleet, monkeypatch):
    _, monitor, _ = fleet
    monkeypatch.setattr(httpd, "REQUEST_TIMEOUT", 1.0)
    monkeypatch.setattr(httpd, "STREAM_BACKLOG", 64 * 1024)
    monkeypatch.setattr(httpd, "MAX_CONNECTIONS", 8)
    with Running(monitor) as running:
        idle = socket.create_connection(("127.0.0.1", running.port))  # says nothing
        assert idle.recv(100).startswith(b"HTTP/1.1 408")  # answered and closed at the request timeout
        slow = Page(running.port, read=False)  # reads nothing: its stream is cut past the backlog
        reader = Page(running.port)
        wait_until(lambda: running.snapshot()["monitor"]["viewers"] == 2, timeout=60)
        monitor.history = httpd.event("history", b"x" * 200_000)  # big events fill the slow page's backlog fast
        original = monitor.publish

        def heavy(now, point):
            original(now, point)
            monitor.server.broadcast(httpd.event("padding", b"y" * 500_000))

        monitor.publish = heavy
        wait_until(lambda: running.snapshot()["monitor"]["viewers"] == 1, timeout=60)
        # the cut page's connection, its unread bytes and its descriptor are let go of at once (an abort)
        wait_until(lambda: monitor.server.connections <= 3, timeout=60)
        before = reader.events("snapshot")
        wait_until(lambda: reader.events("snapshot") >= before + 2, timeout=60)  # the reader still gets every one
        held = [socket.create_connection(("127.0.0.1", running.port)) for _ in range(8)]
        surplus = socket.create_connection(("127.0.0.1", running.port))
        surplus.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert surplus.recv(100).startswith(b"HTTP/1.1 200")  # room made: the oldest idle one closed for it
        assert held[0].recv(100) == b""
        for sock in [*held, surplus, slow.sock]:
            sock.close()
        reader.close()


def test_the_page_says_the_database_is_unreachable_and_recovers_when_it_comes_back(fleet):
    wire, monitor, _ = fleet
    with Running(monitor) as running:
        page = Page(running.port)
        wait_until(lambda: running.snapshot().get("fleet"), timeout=60)
        wire.stop()
        down = wait_until(lambda: (s := running.snapshot())["database"]["ok"] is False and s, timeout=60)
        assert down["database"]["error"].startswith("cannot reach MongoDB") and down["database"]["since"]
        assert down["fleet"][0]["id"] == "c1"  # the last figures stay on the page
        events = page.events("snapshot")
        wait_until(lambda: page.events("snapshot") > events + 1, timeout=60)  # the page keeps hearing from it
        wire.start()
        up = wait_until(lambda: (s := running.snapshot())["database"]["ok"] and s, timeout=60)
        assert up["database"]["error"] is None and up["fleet"][0]["id"] == "c1"
        page.close()


def test_the_page_and_its_assets_are_served_with_a_policy_allowing_only_its_own_scripts(fleet):
    _, monitor, _ = fleet
    with Running(monitor) as running:
        for path, kind in (
            ("/", "text/html"),
            ("/static/monitor.js", "text/javascript"),
            ("/static/monitor.css", "text/css"),
        ):
            with urllib.request.urlopen(f"http://127.0.0.1:{running.port}{path}", timeout=10) as reply:
                assert reply.headers["Content-Type"].startswith(kind)
                assert reply.headers["Content-Security-Policy"] == httpd.CSP
                assert reply.headers["X-Content-Type-Options"] == "nosniff"
        html = urllib.request.urlopen(f"http://127.0.0.1:{running.port}/", timeout=10).read().decode()
        assert "<script>" not in html and "style=" not in html and "http" not in html.replace("http-equiv", "")
        request = urllib.request.Request(f"http://127.0.0.1:{running.port}/", headers={"Host": "evil.example:80"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 421
    assert serve.TIMEOUTS_MS["serverSelectionTimeoutMS"] <= 5000
