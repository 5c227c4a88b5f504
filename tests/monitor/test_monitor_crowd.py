"""The monitor as deployed (`collector monitor`, a real process) under a crowd: idle clients never keep a page
load or an action out, clients that never read cannot grow it past its byte budget, and its Host check knows the
machine's own names."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from pymongo import MongoClient

from collector.devtools.mongowire import WireServer
from collector.monitor import httpd

from helpers import free_port
from helpers.proc import start, stop, wait_until, write_env

pytestmark = pytest.mark.system
TOKEN = "crowd-token-0123456789abcdef"
SAID = {"nothing": b"", "half a head": b"GET /api/snap", "a head but its end": b"GET / HTTP/1.1\r\nHost: x\r\n"}


class Monitor:
    """`collector monitor --port PORT` against the stand-in, with a token: its port, pid and snapshot."""

    def __init__(self, tmp_path, uri: str, *args: str):
        self.port = free_port()
        env = write_env(tmp_path / "monitor.env", MONGODB_URI=uri, MONITOR_TOKEN=TOKEN)
        self.log = tmp_path / "monitor.log"
        self.process = start(["monitor", "--port", str(self.port), *args], env, self.log)
        wait_until(lambda: self.snapshot().get("monitor"), timeout=60)

    def snapshot(self, host: str = "127.0.0.1") -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/snapshot", headers={"Host": host})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read())

    def memory(self, field: str) -> int:
        """VmRSS (now) or VmHWM (the peak) of the process, in bytes."""
        with open(f"/proc/{self.process.pid}/status") as status:
            line = next(line for line in status if line.startswith(field + ":"))
        return int(line.split()[1]) * 1024

    def close(self) -> None:
        assert stop(self.process) == 0, self.log.read_text()

    def cut_short(self) -> list[str]:
        """The monitor's summary lines of connections cut short (one a minute at most, one more at the stop)."""
        return [line for line in self.log.read_text().splitlines() if "monitor: connections cut short: " in line]


@pytest.fixture
def wire():
    with WireServer() as server:
        db = MongoClient(server.uri, tz_aware=True).get_default_database()
        at = datetime.now(UTC)
        db.collectors.insert_one({"_id": "c1", "mode": "normal", "statsAt": at, "heartbeatAt": at})
        yield server, db


def connect(port: int, said: bytes = b"", reading: bool = True) -> socket.socket:
    sock = socket.socket()
    if not reading:  # a client that never reads: a small window, so what the monitor sends waits in the monitor
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    if said:
        sock.sendall(said)
    return sock


def page_load(port: int) -> None:
    """The page and its first snapshot event, as a browser loads them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as reply:
        assert reply.status == 200 and b"<html" in reply.read().lower()
    with connect(port, b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as page:
        page.settimeout(30)
        data = b""
        while b"event: snapshot\n" not in data:
            chunk = page.recv(65536)
            assert chunk, data[:200]
            data += chunk
        assert data.startswith(b"HTTP/1.1 200 ")


def act(port: int, path: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps({"mode": "normal"}).encode(),
        headers={"Content-Type": "application/json", "X-Monitor-Token": TOKEN},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        assert reply.status == 200
        return json.loads(reply.read())


@pytest.mark.parametrize("said", list(SAID))
@pytest.mark.parametrize("count", [210, 256, 300, 520])
def test_idle_clients_never_keep_a_page_load_or_an_action_out(tmp_path, wire, count, said):
    monitor = Monitor(tmp_path, wire[0].uri)
    idle: list[socket.socket] = []
    try:
        idle = [connect(monitor.port, SAID[said]) for _ in range(count)]
        # all taken in by the monitor (the kernel's accept queue lets some wait a second or more)
        wait_until(lambda: monitor.snapshot()["monitor"]["accepted"] >= count + 1, timeout=60)
        page_load(monitor.port)
        assert act(monitor.port, "/api/pause")["ok"] and wire[1].control.count_documents({}) == 1
        assert act(monitor.port, "/api/resume")["ok"]
        seen = monitor.snapshot()["monitor"]
        assert seen["connections"] <= httpd.MAX_CONNECTIONS
        if count >= httpd.MAX_CONNECTIONS:  # room was made by closing idle ones
            wait_until(lambda: monitor.snapshot()["monitor"]["cut"].get("evicted", 0) >= 1, timeout=60)
        else:  # nobody is closed while there is room
            assert "evicted" not in seen["cut"]
        assert "slow" not in seen["cut"]
    finally:
        for sock in idle:
            sock.close()
        monitor.close()
    lines = monitor.cut_short()
    assert len(lines) <= 2 and all("slowly" not in line for line in lines), lines
    if count >= httpd.MAX_CONNECTIONS:
        assert any("closed to make room for newer ones (256 open, 64 pages at most)" in line for line in lines)


@pytest.mark.parametrize("pages", [10, 40])
def test_open_pages_outlive_idle_clients_and_a_newcomer_still_gets_in(tmp_path, wire, pages):
    monitor = Monitor(tmp_path, wire[0].uri)
    held: list[socket.socket] = []
    try:
        held = [connect(monitor.port, b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") for _ in range(pages)]
        wait_until(lambda: monitor.snapshot()["monitor"]["viewers"] == pages, timeout=60)
        held += [connect(monitor.port) for _ in range(httpd.MAX_CONNECTIONS)]
        accepted = pages + httpd.MAX_CONNECTIONS
        wait_until(lambda: monitor.snapshot()["monitor"]["accepted"] >= accepted, timeout=60)
        page_load(monitor.port)
        assert act(monitor.port, "/api/pause")["ok"]
        seen = monitor.snapshot()["monitor"]
        assert seen["viewers"] == pages  # the idle ones went first: every page open is still open
        wait_until(lambda: monitor.snapshot()["monitor"]["cut"].get("evicted", 0) >= pages, timeout=60)
        assert "slow" not in seen["cut"]
    finally:
        for sock in held:
            sock.close()
        monitor.close()


def big_fleet(db, collectors: int = 200) -> None:
    """Collector documents that make a snapshot of about half a MiB: every page gets that much a second."""
    at = datetime.now(UTC)
    db.collectors.insert_many(
        {
            "_id": f"collector-{i:03d}-" + "x" * 150,
            "mode": "normal",
            "startedAt": at - timedelta(hours=1),
            "heartbeatAt": at,
            "statsAt": at,
            "version": "v" * 60,
            "host": "h" * 300,
            "services": ["s" * 100 for _ in range(20)],
            "running": [{"id": "n" * 100, "service": "s" * 50} for _ in range(20)],
        }
        for i in range(collectors)
    )


@pytest.mark.parametrize(("streams", "plain"), [(60, 0), (0, 240), (50, 200)])
def test_clients_that_never_read_hold_at_most_the_byte_budget_and_the_slowest_go_first(tmp_path, wire, streams, plain):
    big_fleet(wire[1])
    monitor = Monitor(tmp_path, wire[0].uri)
    stalled: list[socket.socket] = []
    try:
        size = len(json.dumps(monitor.snapshot()))
        assert size > 300_000
        before = monitor.memory("VmRSS")
        event = b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        stalled = [connect(monitor.port, event, reading=False) for _ in range(streams)]
        snapshot = b"GET /api/snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        stalled += [connect(monitor.port, snapshot, reading=False) for _ in range(plain)]
        held: list[int] = []

        def cut_enough() -> bool:
            seen = monitor.snapshot()["monitor"]
            held.append(seen["heldBytes"])
            return seen["cut"].get("slow", 0) >= (streams + plain) // 4

        wait_until(cut_enough, timeout=120)
        # without the budget these clients would hold streams × STREAM_BACKLOG + plain × size bytes
        assert streams * httpd.STREAM_BACKLOG + plain * size > 4 * httpd.HELD_TOTAL
        assert max(held) <= httpd.HELD_TOTAL  # room is made before anything is written
        grown = monitor.memory("VmHWM") - before
        assert grown < 3 * httpd.HELD_TOTAL, (before, grown)  # the kernel's buffers are not the process's
        page_load(monitor.port)  # the others are served all along
    finally:
        for sock in stalled:
            sock.close()
        monitor.close()
    lines = monitor.cut_short()
    assert 1 <= len(lines) <= 2 and all("closed for reading too slowly" in line for line in lines), lines


def status_for(port: int, *hosts: str) -> int:
    """The status of GET /api/snapshot sent with these Host lines (none: no Host at all)."""
    lines = "".join(f"Host: {host}\r\n" for host in hosts)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET /api/snapshot HTTP/1.1\r\n{lines}\r\n".encode())
        data = b""
        while b"\r\n" not in data and (chunk := sock.recv(4096)):
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_the_machine_s_own_names_are_accepted_as_host_and_no_other(tmp_path, wire):
    monitor = Monitor(tmp_path, wire[0].uri)
    port, name, fqdn = monitor.port, socket.gethostname(), socket.getfqdn()
    try:
        for host in (
            name,
            f"{name}:{port}",
            name.upper(),
            f"{name}.:{port}",  # the absolute form of a name
            fqdn,
            f"{fqdn}:{port}",
            "localhost",
            f"LocalHost:{port}",
            "127.0.0.1",
            f"127.0.0.1:{port}",
            "[::1]",
            f"[::1]:{port}",
            "10.1.2.3:80",  # an address: no page of another site can be reached by one
        ):
            assert status_for(port, host) == 200, host
        for host in (
            "evil.example",
            f"evil.example:{port}",
            f"{name}.evil.example",
            f"127.0.0.1.evil.example:{port}",
            "",
            "::1",
            "[::1",
            "[127.0.0.1]",
            f"localhost:{port}x",
            f"localhost:{port}:1",
        ):
            assert status_for(port, host) == 421, host
        assert status_for(port) == 421  # no Host at all
        assert status_for(port, "localhost", "evil.example") == 400  # two: the head parser refuses it
    finally:
        monitor.close()
