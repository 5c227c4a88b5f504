"""The one process lifecycle in the three processes that use it, each a real process: the collector
(`collector --mode normal`), the sink service (`collector sink`) and the monitor (`collector monitor`). For each:
the first SIGTERM stops it gracefully (what is in flight finishes, STOPPING=1, exit 0), a second stop signal ends
it at once (128 + the signal) whatever is in flight, a SIGHUP with a bad setting is refused in one line and the old
settings kept (the process goes on, and a good reload after it applies against them), and /healthz and /readyz
answer from its typed status over a real socket."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from bson import ObjectId

from collector.devtools.mongowire import WireServer
from collector.sdk.timeutil import utcnow

from helpers import free_port
from helpers.proc import NotifySocket, get, start, stop, wait_until, write_env
from helpers.sinkservers import WEBHOOK_SECRET, Reply, WebhookReceiver

pytestmark = pytest.mark.system


class BlackHole:
    """A port that accepts connections and never answers: a request to it stays in flight (a slow API, or a
    MongoDB that does not answer)."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.listener.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def hole() -> Iterator[BlackHole]:
    h = BlackHole()
    yield h
    h.close()


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer() as server:
        yield server


def forced(process: subprocess.Popen, log: Path, second: signal.Signals) -> None:
    """SIGTERM, then `second` while the work is still in flight: the process ends at once, 128 + `second`."""
    process.send_signal(signal.SIGTERM)
    wait_until(lambda: "SIGTERM received" in log.read_text(), timeout=60)
    process.send_signal(second)
    assert process.wait(60) == 128 + second
    assert f"collector: second {second.name}, exiting now" in log.read_text()


def refused_then_applied(
    process: subprocess.Popen,
    env_file: Path,
    log: Path,
    base: dict,
    bad: list[tuple[dict, str]],
    good: dict,
    applied: str,
) -> None:
    """Each bad edit of the settings file, reloaded: one refusal line naming the setting, the process running; then
    a good edit is applied against the old settings (only what it changes is named)."""
    for k, (edit, named) in enumerate(bad, start=1):
        write_env(env_file, **{**base, **edit})
        process.send_signal(signal.SIGHUP)
        refusals = wait_until(lambda n=k: (lambda r: r if len(r) == n else None)(lines(log, "reload refused")), 60)
        assert f"setting {named}: " in refusals[-1], refusals[-1]
        assert process.poll() is None
    write_env(env_file, **{**base, **good})
    process.send_signal(signal.SIGHUP)
    assert wait_until(lambda: lines(log, "reload: applied"), 60)[-1].startswith(f"reload: applied {applied} (read")
    assert process.poll() is None and "Traceback" not in log.read_text()


def lines(log: Path, text: str) -> list[str]:
    return [line[line.index(text) :] for line in log.read_text().splitlines() if text in line]


# --- the collector -------------------------------------------------------------------------------------------------
def collector_env(tmp_path: Path, wire: WireServer, hole: BlackHole, **more: object) -> dict:
    """One network due at once whose API never answers: its run is in flight until HTTP_TIMEOUT."""
    wire.client.get_database("likeastore").networks.insert_one(
        {"user": "ann@x.test", "service": "github", "accessToken": "token-ann", "mode": "normal"}
    )
    return {
        "MONGODB_URI": wire.uri,
        "GITHUB_API_URL": f"http://127.0.0.1:{hole.port}",
        "HEARTBEAT_SECONDS": 1,
        "LOOP_IDLE_PAUSE": 1,
        "LOG_LEVEL": "INFO",
        **more,
    }


def start_collector(tmp_path: Path, settings: dict, hole: BlackHole) -> tuple[subprocess.Popen, NotifySocket, Path]:
    env_file = write_env(tmp_path / "collector.env", **settings)
    notify = NotifySocket(tmp_path / "notify.sock")
    log = tmp_path / "collector.log"
    process = start(["--mode", "normal"], env_file, log, NOTIFY_SOCKET=notify.path)
    wait_until(lambda: any("READY=1" in m for m in notify.messages), timeout=60)
    wait_until(lambda: hole.held, timeout=60)  # the run's request is out, and stays there
    return process, notify, log


def test_the_collector_stops_gracefully_on_sigterm_saying_not_ready_meanwhile(tmp_path, wire, hole):
    port = free_port()
    settings = collector_env(tmp_path, wire, hole, HTTP_TIMEOUT=4, METRICS_PORT=port)
    process, notify, log = start_collector(tmp_path, settings, hole)
    try:
        assert get(port, "/healthz")[0] == 200 and get(port, "/readyz")[0] == 200
        process.send_signal(signal.SIGTERM)
        status, reason = wait_until(lambda: (lambda a: a if a[0] == 503 else None)(get(port, "/readyz", 2)), 60)
        assert reason == "stopping: finishing the networks in flight\n"
        assert process.poll() is None  # the run in flight is waited for (cut at HTTP_TIMEOUT)
        assert process.wait(60) == 0
        assert any("STOPPING=1" in m for m in notify.messages)
        assert "SIGTERM received: finishing the networks in flight" in log.read_text()
    finally:
        stop(process)
        notify.close()


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_ends_the_collector_at_once_with_a_run_in_flight(tmp_path, wire, hole, second):
    process, notify, log = start_collector(tmp_path, collector_env(tmp_path, wire, hole, HTTP_TIMEOUT=60), hole)
    try:
        forced(process, log, second)
    finally:
        stop(process)
        notify.close()


def test_a_collector_reload_with_bad_settings_keeps_the_old_ones(tmp_path, wire, hole):
    base = collector_env(tmp_path, wire, hole, HTTP_TIMEOUT=3, NORMAL_INTERVAL=900, PASS_LIMIT=50)
    process, notify, log = start_collector(tmp_path, base, hole)
    bad = [
        ({"NORMAL_INTERVAL": "soon", "PASS_LIMIT": 7}, "NORMAL_INTERVAL"),  # PASS_LIMIT, good, is not applied either
        ({"HTTP_TIMEOUT": "-3"}, "HTTP_TIMEOUT"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL"),
    ]
    try:
        refused_then_applied(process, tmp_path / "collector.env", log, base, bad, {"PASS_LIMIT": 8}, "PASS_LIMIT")
    finally:
        stop(process)
        notify.close()


# --- the sink service ----------------------------------------------------------------------------------------------
def sink_env(wire: WireServer, receiver: WebhookReceiver, **more: object) -> dict:
    db = wire.client.get_database("likeastore")
    ids = [ObjectId() for _ in range(5)]
    db.items.insert_many(
        [{"_id": i, "type": "github", "itemId": str(i), "date": utcnow(), "sinkPending": True} for i in ids]
    )
    return {
        "MONGODB_URI": wire.uri,
        "LOG_LEVEL": "INFO",
        "SINKS": "hooks",
        "SINK_HOOKS_KIND": "webhook",
        "SINK_HOOKS_URL": receiver.url,
        "SINK_HOOKS_SECRET": WEBHOOK_SECRET,
        "SINK_HOOKS_TIMEOUT": 30,
        "ALLOW_PRIVATE_HOSTS": "true",
        **more,
    }


def start_sink(tmp_path: Path, settings: dict, *args: str) -> tuple[subprocess.Popen, NotifySocket, Path]:
    env_file = write_env(tmp_path / "collector.env", **settings)
    notify = NotifySocket(tmp_path / "notify.sock")
    log = tmp_path / "sink.log"
    process = start(["sink", *args], env_file, log, NOTIFY_SOCKET=notify.path)
    wait_until(lambda: any("READY=1" in m for m in notify.messages), timeout=60)
    return process, notify, log


@pytest.mark.parametrize("delay", [1.5, 3.0])
def test_the_sink_service_stops_gracefully_on_sigterm_after_the_delivery_in_flight(tmp_path, wire, delay):
    port = free_port()
    with WebhookReceiver() as receiver:
        receiver.replies = [Reply(204, delay=delay)]
        process, notify, log = start_sink(tmp_path, sink_env(wire, receiver), "--metrics-port", str(port))
        try:
            wait_until(lambda: receiver.batches, timeout=60, every=0.02)  # a delivery in flight (held)
            assert get(port, "/healthz")[0] == 200
            process.send_signal(signal.SIGTERM)
            assert wait_until(lambda: get(port, "/readyz", 2)[0] == 503, 60)
            assert process.wait(60) == 0
            text = log.read_text()
            assert "SIGTERM received: finishing the deliveries in flight" in text and "Traceback" not in text
            assert any("STOPPING=1" in m for m in notify.messages)
            queue = wire.client.get_database("likeastore")["sinkQueue"]
            assert queue.count_documents({"sink": "hooks"}) == 0  # the batch held was delivered and written
        finally:
            stop(process)
            notify.close()


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_ends_the_sink_service_at_once_with_a_delivery_in_flight(tmp_path, wire, second):
    with WebhookReceiver() as receiver:
        receiver.replies = [Reply(204, delay=25)]
        process, notify, log = start_sink(tmp_path, sink_env(wire, receiver))
        try:
            wait_until(lambda: receiver.batches, timeout=60, every=0.02)
            forced(process, log, second)
        finally:
            stop(process)
            notify.close()


def test_a_sink_reload_with_bad_settings_keeps_the_old_ones_and_delivers_with_them(tmp_path, wire):
    with WebhookReceiver() as receiver:
        base = sink_env(wire, receiver, SINK_HOOKS_BATCH=50)
        process, notify, log = start_sink(tmp_path, base)
        try:
            wait_until(lambda: len(receiver.ids()) == 5, timeout=60)
            bad = [
                ({"SINK_HOOKS_BATCH": "lots"}, "SINK_HOOKS_BATCH"),
                ({"SINKS": "hooks,ghost"}, "SINK_GHOST_KIND"),
                ({"SINK_HOOKS_KIND": "nope"}, "SINK_HOOKS_KIND"),
                ({"SINK_HOOKS_TIMEOUT": "later", "PASS_LIMIT": 9}, "SINK_HOOKS_TIMEOUT"),
            ]
            refused_then_applied(process, tmp_path / "collector.env", log, base, bad, {"PASS_LIMIT": 9}, "PASS_LIMIT")
            more = sink_env(wire, receiver)  # new items: delivered by the old settings, still in force
            assert more["SINKS"] == "hooks"
            wait_until(lambda: len(receiver.ids()) == 10, timeout=60)
            assert process.poll() is None
        finally:
            stop(process)
            notify.close()


# --- the monitor ---------------------------------------------------------------------------------------------------
def start_monitor(tmp_path: Path, settings: dict) -> tuple[subprocess.Popen, NotifySocket, Path, int]:
    port = free_port()
    env_file = write_env(tmp_path / "collector.env", **settings)
    notify = NotifySocket(tmp_path / "notify.sock")
    log = tmp_path / "monitor.log"
    process = start(["monitor", "--port", str(port)], env_file, log, NOTIFY_SOCKET=notify.path)
    wait_until(lambda: any("READY=1" in m for m in notify.messages), timeout=60)
    return process, notify, log, port


def test_the_monitor_answers_health_from_its_status_and_stops_gracefully_on_sigterm(tmp_path, wire):
    process, notify, log, port = start_monitor(tmp_path, {"MONGODB_URI": wire.uri, "LOG_LEVEL": "INFO"})
    try:
        wait_until(lambda: any(f"STATUS=monitor: serving on port {port}" in m for m in notify.messages), timeout=60)
        assert get(port, "/healthz") == (200, "ok: refreshing\n")
        assert wait_until(lambda: get(port, "/readyz") == (200, "ok: database answering\n"), 60)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert any("STOPPING=1" in m for m in notify.messages) and "Traceback" not in log.read_text()
        assert "SIGTERM received: finishing the refresh in flight, then exiting" in log.read_text()
    finally:
        stop(process)
        notify.close()


def test_the_monitor_says_not_ready_while_mongodb_does_not_answer(tmp_path, hole):
    uri = f"mongodb://127.0.0.1:{hole.port}/likeastore?serverSelectionTimeoutMS=500&connectTimeoutMS=500"
    process, notify, log, port = start_monitor(tmp_path, {"MONGODB_URI": uri, "LOG_LEVEL": "INFO"})
    try:
        status, reason = wait_until(lambda: (lambda a: a if a[0] == 503 else None)(get(port, "/readyz")), 60)
        assert reason.startswith("cannot reach MongoDB") and reason.endswith("\n")
        assert get(port, "/healthz") == (200, "ok: refreshing\n")  # alive: the refresh goes round, failing
    finally:
        stop(process)
        notify.close()


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_ends_the_monitor_at_once_with_a_read_in_flight(tmp_path, hole, second):
    uri = f"mongodb://127.0.0.1:{hole.port}/likeastore?serverSelectionTimeoutMS=60000&socketTimeoutMS=60000"
    process, notify, log, port = start_monitor(tmp_path, {"MONGODB_URI": uri, "LOG_LEVEL": "INFO"})
    try:
        wait_until(lambda: hole.held, timeout=60)  # the first refresh's read waits for a server that never answers
        forced(process, log, second)
        assert any("STOPPING=1" in m for m in notify.messages)
    finally:
        stop(process)
        notify.close()


def test_a_monitor_reload_with_bad_settings_keeps_the_old_ones(tmp_path, wire):
    base = {"MONGODB_URI": wire.uri, "LOG_LEVEL": "INFO", "HEARTBEAT_SECONDS": 15}
    process, notify, log, port = start_monitor(tmp_path, base)
    bad = [
        ({"HEARTBEAT_SECONDS": "often"}, "HEARTBEAT_SECONDS"),
        ({"HEARTBEAT_SECONDS": "-1"}, "HEARTBEAT_SECONDS"),
        ({"LOG_FORMAT": "xml", "HEARTBEAT_SECONDS": 20}, "LOG_FORMAT"),
    ]
    try:
        good = {"HEARTBEAT_SECONDS": 20}
        refused_then_applied(process, tmp_path / "collector.env", log, base, bad, good, "HEARTBEAT_SECONDS")
        assert get(port, "/healthz")[0] == 200
        write_env(tmp_path / "collector.env", **{**base, **good, "MONITOR_TOKEN": "t" * 32})
        process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: lines(log, "reload: MONITOR_TOKEN cannot change while running; kept until a"), 60)
        assert process.poll() is None and "t" * 32 not in log.read_text()
    finally:
        stop(process)
        notify.close()
