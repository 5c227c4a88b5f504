"""SIGHUP: settings that may change apply on the loop's thread; fixed ones are kept; a bad value changes nothing."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

import pytest

from collector.daemon.process import Daemon, Reloader
from collector.engine import Collector
from collector.lifecycle import changed, merge
from collector.settings import SettingsError, config_dir, load_settings

from helpers import T0, bind_socket, free_port, swap
from helpers.proc import wait_until


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
    assert collector.dispatcher.capacity.pool.size == 8  # two runs per request slot (engine/sizing.py: seats)
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


@pytest.mark.system
def test_a_reload_of_heartbeat_seconds_moves_the_healthz_bound_the_jobs_and_the_heartbeat(db, settings, hup):
    """One hook: the reload applies to the engine, then every observer follows its own settings."""
    import threading
    import urllib.request

    port = free_port()
    collector = Collector(db, settings.with_(metrics_port=port, heartbeat_seconds=15, http_timeout=30))
    daemon = Daemon(collector, "normal")
    daemon.load_settings = lambda: settings.with_(metrics_port=port, heartbeat_seconds=40, http_timeout=30)
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        wait_until(lambda: daemon.jobs is not None and daemon.metrics is not None, timeout=120)
        assert daemon.metrics.bound == 75 and daemon.heartbeat.every == 15
        daemon.reload_wanted = True
        daemon.wakeup.set()
        wait_until(lambda: daemon.metrics.bound != 75, timeout=120)
        assert daemon.metrics.bound == 3 * 40 + 30 and daemon.metrics.database_bound == 80
        assert daemon.heartbeat.every == 40 and daemon.jobs.plans["heartbeat"] == "every 40s"
        daemon.metrics.alive -= 120  # the loop silent for 120 s: within the new bound (150 s), past the old one
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as reply:
            assert reply.status == 200
    finally:
        daemon.stopping.set()
        daemon.wakeup.set()
        thread.join(30)


# Every file a reload reads — config/defaults.env, config/<env>.env, ./.env, the --env-file: whatever is wrong with
# one, the reload keeps every old setting and logs one error line naming that file (no traceback), the loop goes on,
# and the next reload, the file mended, applies.


@pytest.fixture
def sources(monkeypatch):
    """Real copies of every file a reload reads, in a directory anyone may enter: as root, a permission test reads
    them as nobody (root reads a file whatever its mode)."""
    base = Path(tempfile.mkdtemp(prefix="collector-sources-"))
    base.chmod(0o755)
    shutil.copytree(config_dir(), base / "config", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (base / "work").mkdir()
    (base / "work" / ".env").write_text("USER_AGENT=from-dotenv/1\n")
    (base / "collector.env").write_text("BACKOFF_BASE=61\n")
    monkeypatch.setenv("COLLECTOR_CONFIG_DIR", str(base / "config"))
    monkeypatch.chdir(base / "work")
    yield {
        "config/defaults.env": base / "config" / "defaults.env",
        "config/test.env": base / "config" / "test.env",
        "./.env": base / "work" / ".env",
        "--env-file": base / "collector.env",
    }
    shutil.rmtree(base)


def append(data: bytes):
    return lambda path: path.write_bytes(path.read_bytes() + data)


FAULTS = {  # what is wrong: (make it so, what the line says)
    "a directory": (swap(Path.mkdir), "a directory, not a file"),
    "a named pipe": (swap(os.mkfifo), "a named pipe, not a file"),  # opened, it would block the loop for ever
    "a socket": (swap(bind_socket), "a socket, not a file"),
    "a link to a device": (swap(lambda p: p.symlink_to("/dev/zero")), "a device, not a file"),
    "a broken symbolic link": (swap(lambda p: p.symlink_to(p.parent / "gone")), "a symbolic link to nothing"),
    "vanished": (Path.unlink, "No such file or directory"),
    "no permission": (lambda p: p.chmod(0), "Permission denied"),
    "UTF-16": (lambda p: p.write_bytes(p.read_text().encode("utf-16")), "UTF-16 or UTF-32 text, not UTF-8"),
    "UTF-16 without a byte order mark": (lambda p: p.write_bytes(p.read_text().encode("utf-16-le")), "a NUL byte"),
    "Latin-1": (append("USER_AGENT=café\n".encode("latin-1")), "not UTF-8 text (byte "),
    "Windows-1252": (append("USER_AGENT=“quoted”\n".encode("cp1252")), "not UTF-8 text (byte "),
    "a NUL byte": (append(b"PASS_LIMIT=1\x00\n"), "not text (it holds a NUL byte)"),
    "an unclosed quote": (append(b'HTTP_TIMEOUT="20\nPASS_LIMIT=7\n'), "is not a setting (NAME=value"),
    "a line that is no setting": (append(b"BACKOFF_BASE 61\n"), "is not a setting (NAME=value"),
    "over 1 MiB": (append(b"#" * (1 << 20) + b"\n"), "larger than 1048576 bytes"),
}
SOURCES = ("config/defaults.env", "config/test.env", "./.env", "--env-file")
CASES = [(source, fault) for source in SOURCES for fault in FAULTS]
CASES.remove(("./.env", "vanished"))  # ./.env may be absent: see the test after


@contextmanager
def reading_as_nobody():
    """Root reads a file whatever its mode: the read is made as nobody, so the refusal is the kernel's own."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def mend(path: Path, text: bytes) -> None:
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()
    path.write_bytes(text)


def a_round(collector: Collector, daemon: Daemon) -> None:
    """What the loop does at each round when a SIGHUP came: the observers hear on_tick. A reader stuck on a named
    pipe fails the test instead of hanging it."""
    daemon.reload_wanted = True
    thread = threading.Thread(target=collector.observers.notify, args=("on_tick", 0), daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the reload blocked"


def reloading(db, sources, running: bool = False) -> tuple[Collector, Daemon]:
    """A collector and its daemon on the real files; unless the daemon is to run (its start-up adds one), the
    reloader the loop's observers call."""
    load = partial(load_settings, environ={}, env="test", env_file=sources["--env-file"])
    collector = Collector(db, load())
    daemon = Daemon(collector, "normal")
    daemon.load_settings = load
    if not running:
        collector.observers.add(Reloader(daemon))
    return collector, daemon


@pytest.mark.parametrize("source, fault", CASES)
def test_a_settings_file_that_cannot_be_read_keeps_every_old_setting_with_one_line_naming_it(
    db, sources, source, fault, caplog
):
    collector, daemon = reloading(db, sources)
    old, path = collector.settings, sources[source]
    assert old.user_agent == "from-dotenv/1" and old.backoff_base == 61 and str(path) in old.sources
    text = path.read_bytes()
    make, reason = FAULTS[fault]
    make(path)
    with caplog.at_level(logging.INFO), reading_as_nobody() if fault == "no permission" else nullcontext():
        a_round(collector, daemon)
    assert collector.settings is old and not daemon.reload_wanted
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(problems) == 1 and problems[0].levelno == logging.ERROR, caplog.text
    line = problems[0].getMessage()
    named = "setting COLLECTOR_ENV_FILE: " if source == "--env-file" else ""
    assert line.startswith(f"reload refused, settings unchanged: {named}cannot read {str(path)!r}: ")
    assert reason in line and "\n" not in line
    assert problems[0].exc_info is None and problems[0].exc_text is None and "Traceback" not in caplog.text

    caplog.clear()  # the file mended: the next reload applies
    mend(path, text + b"\nPASS_LIMIT=77\n")
    with caplog.at_level(logging.INFO):
        a_round(collector, daemon)
    assert collector.settings.pass_limit == 77 and collector.settings.user_agent == "from-dotenv/1"
    assert "reload: applied PASS_LIMIT (read " in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    collector.close()


def test_a_dotenv_that_was_removed_is_a_source_no_more(db, sources, caplog):
    """./.env may be absent, at start or at a reload: its settings go and the reload line names what changed and
    the sources it read."""
    collector, daemon = reloading(db, sources)
    sources["./.env"].unlink()
    with caplog.at_level(logging.INFO):
        a_round(collector, daemon)
    assert collector.settings.user_agent != "from-dotenv/1"
    assert str(sources["./.env"]) not in collector.settings.sources
    assert "reload: applied USER_AGENT" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    collector.close()


def test_a_working_directory_removed_under_the_daemon_holds_no_dotenv(db, sources, monkeypatch, caplog):
    collector, daemon = reloading(db, sources)
    gone = sources["./.env"].parent / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with caplog.at_level(logging.INFO):
        a_round(collector, daemon)
    assert collector.settings.user_agent != "from-dotenv/1" and "reload: applied USER_AGENT" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    collector.close()


def test_a_named_pipe_for_a_dotenv_does_not_stop_the_running_loop(db, sources, caplog):
    """The real loop on its own thread: the reload is refused at once, and the loop, still going, applies the next."""
    collector, daemon = reloading(db, sources, running=True)
    thread = threading.Thread(target=daemon.run, daemon=True)
    caplog.set_level(logging.INFO)
    thread.start()
    try:
        wait_for(lambda: daemon.jobs is not None)
        dotenv = sources["./.env"]
        dotenv.unlink()
        os.mkfifo(dotenv)
        daemon.reload_wanted = True
        daemon.wakeup.set()
        wait_for(lambda: "reload refused" in caplog.text)
        mend(dotenv, b"USER_AGENT=from-dotenv/1\nPASS_LIMIT=77\n")
        daemon.reload_wanted = True
        daemon.wakeup.set()
        wait_for(lambda: collector.settings.pass_limit == 77)
    finally:
        daemon.stopping.set()
        daemon.wakeup.set()
        thread.join(30)
    assert not thread.is_alive()
    refused = [r.getMessage() for r in caplog.records if "reload" in r.getMessage() and r.levelno >= logging.WARNING]
    assert refused == [f"reload refused, settings unchanged: cannot read {str(dotenv)!r}: a named pipe, not a file"]
    assert "observer" not in caplog.text and not [r for r in caplog.records if r.exc_info]


def wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.02)


def test_a_reloaded_lease_length_sets_how_often_leases_are_renewed(db, settings):
    collector = Collector(db, settings.with_(lease_seconds=300))
    try:
        leases = collector.claims.leases(lambda: T0, lambda: [])
        assert leases.renew_every == 100
        collector.apply_settings(collector.settings.with_(lease_seconds=60))  # a reload
        assert leases.renew_every == 20  # the leases held now are renewed often enough not to lapse
    finally:
        collector.close()


def test_a_reload_that_changes_which_hosts_may_be_private_lets_go_of_pooled_connections(db, settings):
    """Pooled connections were checked under the old policy: after the change they are not reused."""
    collector = Collector(db, settings)
    try:
        adapter = collector.http.session.get_adapter("https://api.github.com")
        adapter.pools[("https", "pds.example:443", True)] = adapter.poolmanager.connection_from_url("https://x.test")
        collector.apply_settings(collector.settings.with_(log_level="DEBUG"))  # the policy unchanged: kept
        assert len(adapter.pools) == 1 and len(adapter.poolmanager.pools) == 1
        collector.apply_settings(collector.settings.with_(allow_private_hosts=True))
        assert adapter.pools == {} and len(adapter.poolmanager.pools) == 0
    finally:
        collector.close()
