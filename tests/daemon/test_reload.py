"""SIGHUP: settings that may change apply on the loop's thread; fixed ones are kept; a bad value changes nothing."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from collector.daemon.process import Daemon, Reloader
from collector.daemon.reload import changed, merge
from collector.engine import Collector
from collector.settings import SettingsError


def test_merge_applies_what_may_change_and_keeps_the_connection_and_metrics_socket(settings):
    new = settings.with_(normal_interval=60, log_level="ERROR", mongodb_uri="mongodb://other:27017/x", metrics_port=9)
    merged, kept = merge(settings, new)
    assert kept == ["MONGODB_URI", "METRICS_PORT"]
    assert merged.mongodb_uri == settings.mongodb_uri and merged.metrics_port == settings.metrics_port
    assert changed(settings, merged) == ["NORMAL_INTERVAL", "LOG_LEVEL"]


@pytest.fixture
def hup():
    previous = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


def test_a_sighup_reloads_on_the_next_round_of_the_loop(db, settings, hup, caplog):
    collector = Collector(db, settings.with_(concurrency=2))
    daemon = Daemon(collector, "normal")
    levels = []
    daemon.configure_logging = lambda level, fmt: levels.append((level, fmt))
    daemon.load_settings = lambda: settings.with_(
        concurrency=4, normal_interval=60, http_timeout=7, log_level="ERROR", mongodb_uri="mongodb://other:1/x"
    )
    daemon.install_signal_handlers()
    os.kill(os.getpid(), signal.SIGHUP)
    assert daemon.reload_wanted and collector.settings.normal_interval != 60  # nothing applied in the handler
    with caplog.at_level(logging.INFO):
        Reloader(daemon).on_tick(0)
    assert not daemon.reload_wanted
    assert collector.settings.normal_interval == 60 and collector.http.timeout == 7
    assert collector.concurrency == 4 and collector.http.slots.size == 4  # requests out at once
    assert collector.pool.size == 8  # two runs per request slot (engine/sizing.py: seats)
    assert collector.settings.mongodb_uri == settings.mongodb_uri
    assert levels == [("ERROR", settings.log_format)]
    assert (
        "MONGODB_URI cannot change while running" in caplog.text
        and "applied NORMAL_INTERVAL, HTTP_TIMEOUT, CONCURRENCY, LOG_LEVEL" in caplog.text
    )
    collector.close()


def test_a_bad_value_keeps_every_old_setting_and_the_daemon_running(db, settings, monkeypatch, tmp_path, caplog):
    collector = Collector(db, settings)
    daemon = Daemon(collector, "normal")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NORMAL_INTERVAL", "soon")
    daemon.reload_wanted = True
    with caplog.at_level(logging.ERROR):
        Reloader(daemon).on_tick(0)
    assert collector.settings is settings
    assert "reload refused, settings unchanged" in caplog.text and "NORMAL_INTERVAL" in caplog.text
    assert not daemon.reload_wanted
    collector.close()


def test_concurrency_given_on_the_command_line_is_not_overridden_by_a_reload(db, settings):
    collector = Collector(db, settings, concurrency=3)
    daemon = Daemon(collector, "normal")
    daemon.load_settings = lambda: settings.with_(concurrency=9)
    daemon.reload()
    assert collector.concurrency == 3 and collector.settings.concurrency == 9
    collector.close()


def test_settings_error_is_what_load_raises(monkeypatch, tmp_path):  # the daemon's except clause relies on it
    from collector.settings import load_settings

    with pytest.raises(SettingsError):
        load_settings(environ={"NORMAL_INTERVAL": "soon"}, cwd=tmp_path)


def test_a_reload_of_heartbeat_seconds_moves_the_healthz_bound_the_jobs_and_the_heartbeat(db, settings, hup):
    """One hook: the reload applies to the engine, then every observer follows its own settings."""
    import socket
    import threading
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    collector = Collector(db, settings.with_(metrics_port=port, heartbeat_seconds=15, http_timeout=30))
    daemon = Daemon(collector, "normal")
    daemon.load_settings = lambda: settings.with_(metrics_port=port, heartbeat_seconds=40, http_timeout=30)
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        for _ in range(300):
            if daemon.jobs is not None and daemon.metrics is not None:
                break
            time.sleep(0.02)
        assert daemon.metrics.bound == 75 and daemon.heartbeat.every == 15
        daemon.reload_wanted = True
        daemon.wakeup.set()
        for _ in range(300):
            if daemon.metrics.bound != 75:
                break
            time.sleep(0.02)
        assert daemon.metrics.bound == 3 * 40 + 30 and daemon.metrics.database_bound == 80
        assert daemon.heartbeat.every == 40 and daemon.jobs.plans["heartbeat"] == "every 40s"
        daemon.metrics.alive -= 120  # the loop silent for 120 s: within the new bound (150 s), past the old one
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as reply:
            assert reply.status == 200
    finally:
        daemon.stopping.set()
        daemon.wakeup.set()
        thread.join(30)
