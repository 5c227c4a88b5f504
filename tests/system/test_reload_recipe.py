"""The README's reload recipe, run as documented: settings in the file the unit names with --env-file, one edited,
SIGHUP (what `systemctl reload` sends), and the new value applies — even when the environment holds the old one
(as systemd's EnvironmentFile= would have put it there). A file that vanished or cannot be decoded at reload
keeps every old setting with one line naming it."""

from __future__ import annotations

import signal

from collector.devtools.mongowire import WireServer

from proc import free_port, get, start, stop, wait_until, write_env


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
    from proc import run

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
