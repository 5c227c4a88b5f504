"""systemd's notify protocol over a real AF_UNIX datagram socket: READY=1, WATCHDOG=1 on progress only, STATUS=,
STOPPING=1; nothing at all without NOTIFY_SOCKET."""

from __future__ import annotations

import signal
import socket
import threading

import pytest

from collector.daemon import Daemon
from collector.daemon.systemd import Notifier
from collector.engine import Collector
from collector.engine.registry import Registry
from collector.sdk import Connector, Result

from helpers import add_network


@pytest.fixture
def notify_socket(tmp_path, monkeypatch):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    yield sock
    sock.close()


def received(sock, until: str, limit: int = 500) -> list[str]:
    messages: list[str] = []
    while len(messages) < limit:
        messages.append(sock.recv(4096).decode())
        if until in messages[-1]:
            break
    return messages


class Quick(Connector):
    name = "quick"

    def initial(self, job):
        return Result([{"itemId": job.network["user"], "source": "https://x.test/"}], done=True)

    def normal(self, job):
        return self.initial(job)


def test_ready_progress_status_and_stopping_are_sent(db, settings, notify_socket):
    for k in range(3):
        add_network(db, service="quick", user=f"u{k}@x.test")
    collector = Collector(
        db, settings.with_(heartbeat_seconds=0.05, loop_idle_pause=0.05), registry=Registry({"quick": Quick})
    )
    daemon = Daemon(collector, "initial")
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        messages = received(notify_socket, "WATCHDOG=1")
        assert messages[0].startswith("READY=1") and "STATUS=initial" in messages[0]
        assert any("WATCHDOG=1" in m for m in messages)
    finally:
        daemon.on_signal(signal.SIGTERM)
        thread.join(30)
    assert "STOPPING=1" in received(notify_socket, "STOPPING=1")[-1]
    assert any("STATUS=initial: " in m and "runs" in m for m in messages)


def test_a_stuck_loop_sends_no_watchdog(db, settings, notify_socket, monkeypatch):
    collector = Collector(db, settings)
    daemon = Daemon(collector, "initial")
    stuck = threading.Event()
    monkeypatch.setattr(collector, "serve", lambda *args, **kwargs: stuck.wait(30))  # the loop never comes round
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        assert received(notify_socket, "READY=1")[0].startswith("READY=1")
        assert "WATCHDOG=1" in notify_socket.recv(4096).decode()  # the start itself
        notify_socket.settimeout(0.5)
        with pytest.raises(socket.timeout):
            notify_socket.recv(4096)  # no WATCHDOG=1: systemd restarts a loop that stopped making progress
    finally:
        daemon.stopping.set()
        stuck.set()
        thread.join(30)


def test_without_notify_socket_nothing_is_sent(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert Notifier().send("READY=1") is False
