"""The reload recipe (docs/configuration.md, "Changing settings without a restart"), run as documented: settings
in the file the unit names with --env-file, one edited, SIGHUP (what `systemctl reload` sends), and the new value
applies — even when the environment holds the old one (as systemd's EnvironmentFile= would have put it there). A
file that vanished or cannot be decoded at reload keeps every old setting with one line naming it — and so does
every other file a reload reads (./.env, the config/ files), whatever is wrong with it."""

from __future__ import annotations

import os
import shutil
import signal

from collector.devtools.mongowire import WireServer
from collector.settings import config_dir

from helpers import free_port
from helpers.proc import get, start, stop, wait_until, write_env


def lines(log, text: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if text in line]


def test_systemctl_reload_applies_an_edit_of_the_env_file(tmp_path):
    port = free_port()
    log = tmp_path / "collector.log"
    with WireServer() as wire:
        settings = {"MONGODB_URI": wire.uri, "METRICS_PORT": port, "HEARTBEAT_SECONDS": 1, "LOOP_IDLE_PAUSE": 1}
        env_file = write_env(tmp_path / "collector.env", **settings, NORMAL_INTERVAL=900, LOG_LEVEL="INFO")
        # the old way's leftover: the same names in the environment; the file still wins
        daemon = start(["--mode", "normal"], env_file, log, NORMAL_INTERVAL="900", HEARTBEAT_SECONDS="1")
        try:
            wait_until(lambda: get(port, "/healthz")[0] == 200)
            assert get(port, "/healthz")[1].startswith("ok: loop alive")
            write_env(env_file, **{**settings, "HEARTBEAT_SECONDS": 7}, NORMAL_INTERVAL=60, LOG_LEVEL="INFO")
            daemon.send_signal(signal.SIGHUP)
            applied = wait_until(lambda: lines(log, "reload: applied"))
            assert "NORMAL_INTERVAL" in applied[0] and "HEARTBEAT_SECONDS" in applied[0]
            assert applied[0].endswith(f"the environment, {env_file})")
            assert "job heartbeat: now every 7s" in log.read_text()

            env_file.unlink()  # a file that vanished: one line naming it, nothing changes, the daemon goes on
            daemon.send_signal(signal.SIGHUP)
            refused = wait_until(lambda: lines(log, "reload refused"))
            assert str(env_file) in refused[0] and "No such file" in refused[0]
            env_file.write_bytes(b"NORMAL_INTERVAL=30\nLOG_LEVEL=\xff\xfe\n")  # not UTF-8
            daemon.send_signal(signal.SIGHUP)
            refused = wait_until(lambda: (lambda r: r if len(r) == 2 else None)(lines(log, "reload refused")))
            assert "not UTF-8 text" in refused[1]
            assert get(port, "/healthz")[0] == 200
        finally:
            assert stop(daemon) == 0
    text = log.read_text()
    assert "Traceback" not in text and "NORMAL_INTERVAL=30" not in text


def test_a_settings_file_that_cannot_be_read_stops_the_start_with_one_line(tmp_path):
    from helpers.proc import run

    missing = tmp_path / "nowhere.env"
    result = run(["--check-config"], missing)
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr.strip()
        == f"collector: setting COLLECTOR_ENV_FILE: cannot read '{missing}': No such file or directory"
    )
    (tmp_path / "ok.env").write_text("NORMAL_INTERVAL=61\n")
    result = run(["--check-config"], tmp_path / "ok.env")
    assert result.returncode == 0 and '"NORMAL_INTERVAL": 61.0' in result.stdout


def test_every_file_a_reload_reads_is_refused_with_one_line_naming_it(tmp_path):
    """./.env in the working directory and the config/ files as well as the --env-file: one line each, no
    traceback, and the loop goes on (a named pipe where ./.env was does not hang it); the files mended, a reload
    applies."""
    port = free_port()
    log = tmp_path / "collector.log"
    config = tmp_path / "config"
    shutil.copytree(config_dir(), config, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    dotenv = tmp_path / ".env"  # the daemon's working directory is the log's
    dotenv.write_text("USER_AGENT=from-dotenv/1\n")
    faults = [
        (dotenv, lambda p: p.write_text(p.read_text(), encoding="utf-16"), "UTF-16 or UTF-32 text, not UTF-8"),
        (dotenv, lambda p: (p.unlink(), os.mkfifo(p)), "a named pipe, not a file"),
        (config / "test.env", lambda p: (p.unlink(), p.mkdir()), "a directory, not a file"),
        (config / "defaults.env", lambda p: p.write_bytes(p.read_bytes() + b"USER_AGENT=caf\xe9\n"), "not UTF-8"),
        (config / "defaults.env", lambda p: p.unlink(), "No such file or directory"),
    ]
    with WireServer() as wire:
        settings = {"MONGODB_URI": wire.uri, "METRICS_PORT": port, "HEARTBEAT_SECONDS": 1, "LOOP_IDLE_PAUSE": 1}
        env_file = write_env(tmp_path / "collector.env", **settings, LOG_LEVEL="INFO")
        daemon = start(["--mode", "normal"], env_file, log, COLLECTOR_CONFIG_DIR=str(config))
        try:
            wait_until(lambda: get(port, "/healthz")[0] == 200)
            for n, (path, make, reason) in enumerate(faults, 1):
                text = path.read_bytes()
                make(path)
                daemon.send_signal(signal.SIGHUP)
                refused = wait_until(lambda n=n: (lambda r: r if len(r) == n else None)(lines(log, "reload refused")))
                assert f"settings unchanged: cannot read '{path}': {reason}" in refused[-1]
                if path.is_dir():
                    path.rmdir()
                path.unlink(missing_ok=True)
                path.write_bytes(text)
                assert get(port, "/healthz")[0] == 200
            dotenv.write_text("USER_AGENT=from-dotenv/1\nNORMAL_INTERVAL=61\n")
            daemon.send_signal(signal.SIGHUP)
            applied = wait_until(lambda: lines(log, "reload: applied"))
            assert "reload: applied NORMAL_INTERVAL (read " in applied[0] and f"{dotenv}, the environment" in applied[0]
        finally:
            assert stop(daemon) == 0
    text = log.read_text()
    assert "Traceback" not in text and "observer" not in text and len(lines(log, "reload refused")) == len(faults)


def test_a_named_pipe_for_a_dotenv_stops_the_start_with_one_line(tmp_path):
    from helpers.proc import run

    os.mkfifo(tmp_path / ".env")  # the command's working directory is the settings file's
    (tmp_path / "ok.env").write_text("NORMAL_INTERVAL=61\n")
    result = run(["--check-config"], tmp_path / "ok.env", timeout=30)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"collector: cannot read '{tmp_path / '.env'}': a named pipe, not a file\n"
