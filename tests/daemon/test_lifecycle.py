"""The one process lifecycle (collector/lifecycle.py) in itself: the handlers it installs and gives back, the first
stop signal, SIGHUP, the reload's refusals keeping every old setting, READY/STOPPING over a real notify socket, and
/healthz and /readyz answered from a typed status. The three processes using it, as real processes:
test_lifecycle_processes.py."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time

import pytest

from collector import lifecycle
from collector.lifecycle import Lifecycle, Notifier, health_answer, health_routes
from collector.settings import Settings, SettingsError


@pytest.fixture
def handlers():
    """The handlers as they were, put back after the test whatever it did."""
    before = {s: signal.getsignal(s) for s in lifecycle.HANDLED}
    yield before
    for signum, handler in before.items():
        signal.signal(signum, handler)


@pytest.fixture
def notify(tmp_path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.settimeout(5)
    yield sock
    sock.close()


def mine(signum, frame):  # pragma: no cover - never called
    raise AssertionError


def test_installed_handlers_are_its_own_and_the_ones_found_are_given_back(handlers):
    for found in (mine, signal.SIG_IGN, signal.SIG_DFL):
        for signum in lifecycle.HANDLED:
            signal.signal(signum, found)
        process = Lifecycle()
        with process.installed():
            assert signal.getsignal(signal.SIGTERM) == process.on_signal
            assert signal.getsignal(signal.SIGINT) == process.on_signal
            assert signal.getsignal(signal.SIGHUP) == process.on_hangup
        assert all(signal.getsignal(s) == found for s in lifecycle.HANDLED)


def test_on_an_asyncio_loop_the_handlers_run_on_the_loop_and_the_ones_found_come_back(handlers):
    for signum in lifecycle.HANDLED:
        signal.signal(signum, mine)
    stopped: list[int] = []
    reloads: list[bool] = []
    process = Lifecycle(on_stop=stopped.append)
    process.on_reload = lambda: reloads.append(process.reload_wanted)

    async def main() -> None:
        with process.installed(asyncio.get_running_loop()):
            os.kill(os.getpid(), signal.SIGHUP)
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 60  # a bound against a hung test: the loop waits for both signals' hooks
            while not (stopped and reloads) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)

    asyncio.run(main())
    assert stopped == [signal.SIGTERM] and reloads == [True] and process.stopping.is_set()
    assert all(signal.getsignal(s) is mine for s in lifecycle.HANDLED)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_first_stop_signal_runs_the_hook_sets_stopping_wakes_the_loop_and_says_stopping(handlers, notify, signum):
    order: list[str] = []
    wakeup = threading.Event()
    process = Lifecycle(
        on_stop=lambda s: order.append(f"hook {signal.Signals(s).name} {process.stopping.is_set()}"),
        wakeup=wakeup,
        notifier=Notifier(notify.getsockname()),
    )
    with process.installed():
        os.kill(os.getpid(), signum)  # handled in the main thread before kill returns to Python code
    assert order == [f"hook {signal.Signals(signum).name} False"]
    assert process.stopping.is_set() and wakeup.is_set() and process.signals == 1
    assert notify.recv(4096) == b"STOPPING=1"


def test_exit_if_second_lets_the_first_signal_through():
    for signum in (signal.SIGTERM, signal.SIGINT):
        for count in (0, 1):
            assert lifecycle.exit_if_second(count, signum) is None  # a second one: the process tests


def test_sighup_asks_for_a_reload_and_wakes_the_loop_never_reloading_in_the_handler(handlers):
    called: list[str] = []
    process = Lifecycle(on_stop=lambda s: called.append("stop"))
    with process.installed():
        for _ in range(3):
            os.kill(os.getpid(), signal.SIGHUP)
    assert process.reload_wanted and process.wakeup.is_set() and not process.stopping.is_set() and called == []


def test_ready_and_alive_say_so_to_systemd_and_nothing_without_a_socket(notify, monkeypatch):
    process = Lifecycle(notifier=Notifier(notify.getsockname()))
    process.ready("STATUS=x: started")
    process.alive("STATUS=x: 3 runs")
    assert [notify.recv(4096) for _ in range(2)] == [b"READY=1\nSTATUS=x: started", b"WATCHDOG=1\nSTATUS=x: 3 runs"]
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert Lifecycle().notifier.send("READY=1") is False


# --- reload --------------------------------------------------------------------------------------------------------
class Process:
    """A process as the reload sees it (lifecycle.Reloading), recording what was called."""

    def __init__(self, settings: Settings, new: Settings | Exception, check=None, apply=None, level=logging.ERROR):
        self.current, self.new, self.check, self.apply, self.level = settings, new, check, apply, level
        self.calls: list[str] = []
        self.logging: list[tuple[str, str]] = []

    @property
    def settings(self) -> Settings:
        return self.current

    def read_settings(self) -> Settings:
        self.calls.append("read")
        if isinstance(self.new, Exception):
            raise self.new
        return self.new

    def check_settings(self, new: Settings) -> None:
        self.calls.append("check")
        if self.check is not None:
            raise self.check

    def apply_settings(self, merged: Settings) -> None:
        self.calls.append("apply")
        if self.apply is not None:
            raise self.apply
        self.current = merged

    def refusal(self, exc: SettingsError) -> tuple[int, str]:
        return self.level, f"<{exc}>"

    def reconfigure_logging(self, settings: Settings) -> None:
        self.logging.append((settings.log_level, settings.log_format))


REFUSALS = [
    ("read", SettingsError("NORMAL_INTERVAL", "'soon' is not a number"), None, None, ["read"]),
    ("read", SettingsError("", "cannot read '/etc/x.env': a named pipe, not a file"), None, None, ["read"]),
    ("check", None, SettingsError("SINK_A_BATCH", "'lots' is not a number"), None, ["read", "check"]),
    ("check", None, SettingsError("SINKS", "names ghost, which has no SINK_GHOST_KIND"), None, ["read", "check"]),
    ("apply", None, None, SettingsError("SINK_B_KIND", "'nope' is not installed"), ["read", "check", "apply"]),
]


@pytest.mark.parametrize("where, read, check, apply, calls", REFUSALS)
@pytest.mark.parametrize("level", [logging.ERROR, logging.WARNING])
def test_a_refused_reload_keeps_every_old_setting_in_one_line(
    settings, caplog, where, read, check, apply, calls, level
):
    new = settings.with_(normal_interval=60, pass_limit=7, log_level="ERROR")
    process = Process(settings, read or new, check, apply, level)
    holder = Lifecycle()
    holder.reload_wanted = True
    with caplog.at_level(logging.INFO):
        assert holder.reload(process) == []
    assert process.settings is settings and process.calls == calls and process.logging == []
    assert not holder.reload_wanted
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    error = read or check or apply
    assert [(r.levelno, r.getMessage()) for r in said] == [(level, f"reload refused, settings unchanged: <{error}>")]


def test_a_reload_applies_what_may_change_keeps_the_fixed_and_says_both(settings, caplog):
    cases = [
        ({"normal_interval": 61}, ["NORMAL_INTERVAL"], [], []),
        (
            {"pass_limit": 9, "log_level": "CRITICAL"},
            ["PASS_LIMIT", "LOG_LEVEL"],
            [],
            [("CRITICAL", settings.log_format)],
        ),
        ({"mongodb_uri": "mongodb://elsewhere:1/x", "monitor_port": 1}, [], ["MONGODB_URI", "MONITOR_PORT"], []),
        ({"log_format": "json", "metrics_port": 9}, ["LOG_FORMAT"], ["METRICS_PORT"], [(settings.log_level, "json")]),
        ({}, [], [], []),
    ]
    for changes, applied, kept, relogged in cases:
        process = Process(settings, settings.with_(**changes))
        caplog.clear()
        with caplog.at_level(logging.INFO):
            assert lifecycle.reload(process) == applied
        assert process.calls == ["read", "check", "apply"] and process.logging == relogged
        assert all(getattr(process.settings, f) == getattr(settings, f) for f in lifecycle.FIXED)
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warned == (
            [f"reload: {', '.join(kept)} cannot change while running; kept until a restart"] if kept else []
        )
        line = "applied " + ", ".join(applied) if applied else "no change"
        assert f"reload: {line} (read " in caplog.text


def test_the_sink_process_reload_checks_its_sinks_once_through_the_services_check(db, monkeypatch, caplog):
    from collector.daemon import sinkprocess
    from collector.daemon.sinkprocess import SinkProcess

    from helpers.fakesink import Clock, Destination, service, sink_settings

    settings = sink_settings("a")
    running = service(db, settings, Clock(), {"a": Destination()})
    process = SinkProcess(running, settings, [], running.kinds)
    checked: list[object] = []
    real = sinkprocess.configured
    monkeypatch.setattr(sinkprocess, "configured", lambda s, r: checked.append(s) or real(s, r))
    bad = [
        sink_settings("a", SINK_A_BATCH="lots"),
        sink_settings("a", SINKS="a,ghost"),  # a sink with no kind
        sink_settings("a", SINK_A_KIND="nope"),  # a kind not installed
        sink_settings("a", SINK_A_CONCURRENCY="some"),
    ]
    for new in bad:
        checked.clear()
        process.load_settings = lambda new=new: new
        caplog.clear()
        with caplog.at_level(logging.INFO):
            assert process.reload() == []
        assert checked == [new] and process.settings is settings and process.service.settings is settings
        assert "reload refused, settings unchanged" in caplog.text
    good = sink_settings("a", SINK_A_BATCH="3")
    process.load_settings = lambda: good
    checked.clear()
    process.reload()
    assert (
        len(checked) == 1
        and process.settings.raw["SINK_A_BATCH"] == "3"
        and process.service.settings is process.settings
    )


def test_the_sink_process_reads_the_services_typed_status(db):
    from collector.daemon.sinkprocess import SinkProcess
    from collector.sinks.status import ServiceStatus

    from helpers.fakesink import Clock, Destination, service, sink_settings

    settings = sink_settings("a")
    first = SinkProcess(service(db, settings, Clock(), {"a": Destination()}, lease_seconds=40), settings, [])
    assert first.status == ServiceStatus(False, True, None, False, 40.0)
    first.round()
    assert first.status.holds_lease and first.status.database_up and first.status.lease_seconds == 40
    second = SinkProcess(service(db, settings, Clock(), {"a": Destination()}, owner="two"), settings, [])
    second.round()
    assert not second.status.holds_lease and "standing by" in second.status_line()
    assert "working (holds the lease)" in first.status_line()


# --- health --------------------------------------------------------------------------------------------------------
class Status:
    def __init__(self, live: tuple[bool, str], ready: tuple[bool, str]):
        self.live, self.ready = live, ready

    def health(self) -> tuple[bool, str]:
        return self.live

    def readiness(self) -> tuple[bool, str]:
        return self.ready


VERDICTS = [
    ((True, "ok: loop alive"), (True, "ok: database answering")),
    ((False, "loop silent for 91s (bound 75s)"), (True, "ok")),
    ((True, "ok: refreshing"), (False, "stopping: finishing the deliveries in flight")),
    ((False, "é ünïcode"), (False, "database not answering for 40s (bound 30s): timeout")),
]


@pytest.mark.parametrize("live, ready", VERDICTS)
def test_health_paths_answer_from_the_typed_status_and_nothing_else(live, ready):
    status = Status(live, ready)
    assert health_answer(status, "/healthz") == (200 if live[0] else 503, live[1].encode() + b"\n")
    assert health_answer(status, "/readyz") == (200 if ready[0] else 503, ready[1].encode() + b"\n")
    for other in ("/metrics", "/", "/healthz/", "/HEALTHZ", "/readyz?x=1", ""):
        assert health_answer(status, other) is None


@pytest.mark.parametrize("live, ready", VERDICTS)
def test_health_routes_put_the_typed_status_in_front_of_a_wsgi_app(live, ready):
    seen: list[str] = []

    def other(environ, start_response):
        seen.append(environ["PATH_INFO"])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"metrics"]

    app = health_routes(Status(live, ready), other)
    for path, (healthy, reason) in (("/healthz", live), ("/readyz", ready), ("/metrics", (True, "metrics"))):
        started: list[tuple[str, list]] = []
        body = b"".join(app({"PATH_INFO": path}, lambda status, headers, into=started: into.append((status, headers))))
        assert started[0][0] == ("200 OK" if healthy else "503 Service Unavailable")
        assert body == reason.encode() + (b"\n" if path != "/metrics" else b"")
    assert seen == ["/metrics"]


def test_the_sink_service_and_the_monitor_give_back_the_signal_handlers_they_found(handlers, db):
    """As the collector does (test_architecture_dispatch.py): each process's own path, its handlers given back."""
    from collector.daemon import sinkprocess
    from collector.monitor import serve
    from collector.monitor.app import Monitor
    from collector.settings import settings_for_tests

    for signum in lifecycle.HANDLED:
        signal.signal(signum, mine)
    settings = settings_for_tests(mongodb_uri="mongodb://127.0.0.1:1/x?serverSelectionTimeoutMS=200")
    assert sinkprocess.serve(settings, once=True, env_file=None, metrics_port=0, metrics_addr="127.0.0.1") == 3
    assert all(signal.getsignal(s) is mine for s in lifecycle.HANDLED)

    monitor = Monitor(db)
    ports: list[int] = []

    def ready(port: int) -> None:  # listening: its handlers are in place, and a SIGTERM stops it
        ports.append(port)
        assert signal.getsignal(signal.SIGHUP) is not mine
        os.kill(os.getpid(), signal.SIGTERM)

    assert serve.run(monitor, "127.0.0.1", 0, ready=ready) == 0
    assert ports and ports[0] > 0
    assert all(signal.getsignal(s) is mine for s in lifecycle.HANDLED)


def test_a_sighup_at_any_moment_of_the_start_up_asks_for_a_reload(handlers):
    early = lifecycle.StartupSignals().install()
    process = Lifecycle()
    with process.installed(early=early):
        assert not process.reload_wanted  # none came
    os.kill(os.getpid(), signal.SIGHUP)  # caught by the start-up's handler...
    assert early.hangup
    with process.installed(early=early):
        assert process.reload_wanted  # ...and asked for once the lifecycle's own are in place


def test_the_sink_service_loses_no_sighup_sent_once_its_metrics_serve(handlers, monkeypatch):
    """A SIGHUP sent as soon as /metrics answers (what an operator's `systemctl reload` after a start may do) came
    while the start-up's handler was still in place, after its flag had been read: the reload was lost."""
    from collector.daemon import sinkprocess
    from collector.devtools.mongowire import WireServer
    from collector.settings import settings_for_tests

    def metrics_then_sighup(process, port, addr):
        os.kill(os.getpid(), signal.SIGHUP)

    monkeypatch.setattr(sinkprocess, "start_metrics", metrics_then_sighup)
    monkeypatch.setattr(sinkprocess.SinkProcess, "run", lambda self, once=False: int(not self.lifecycle.reload_wanted))
    with WireServer() as wire:
        settings = settings_for_tests(mongodb_uri=wire.uri, sinks=())
        assert sinkprocess.serve(settings, once=False, env_file=None, metrics_port=1, metrics_addr="127.0.0.1") == 0


def test_the_collector_daemon_spaces_its_young_collections_and_gives_the_thresholds_back(settings, monkeypatch):
    """The daemon runs with GC_YOUNG as the youngest generation's threshold; a daemon run inside a longer-lived
    program (these tests) leaves the thresholds as it found them, also when it ends with an error."""
    import gc

    from collector.daemon import process

    seen: list[tuple[int, ...]] = []

    def served(*args):
        seen.append(gc.get_threshold())
        if len(seen) == 2:
            raise RuntimeError("the daemon failed")
        return 0

    monkeypatch.setattr(process, "_serve", served)
    found = gc.get_threshold()
    assert found[0] != lifecycle.GC_YOUNG  # Python's own (700), as this test process has it
    assert process.serve(settings, "normal", once=True) == 0
    with pytest.raises(RuntimeError, match="failed"):
        process.serve(settings, "normal", once=True)
    assert seen == [(lifecycle.GC_YOUNG, *found[1:])] * 2
    assert gc.get_threshold() == found
