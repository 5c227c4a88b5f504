from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from collector import cli
from collector.settings import SettingsError, config_dir, load_settings

from helpers import bind_socket, swap


def test_production_defaults(tmp_path):
    s = load_settings(environ={}, cwd=tmp_path)
    assert s.env == "production"
    assert s.normal_interval == 900 and s.max_errors == 5
    assert s.github_api_url == "https://api.github.com"
    assert s.initial_interval_for("github") == 1 and s.initial_interval_for("vimeo") == 5


@pytest.mark.parametrize("env, interval", [("development", 60), ("test", 900), ("production", 900)])
def test_each_environment_has_its_file(tmp_path, env, interval):
    s = load_settings(environ={"COLLECTOR_ENV": env}, cwd=tmp_path)
    assert s.env == env and s.normal_interval == interval


def test_dotenv_overrides_config_and_environment_overrides_dotenv(tmp_path):
    (tmp_path / ".env").write_text("NORMAL_INTERVAL=120\nHTTP_TIMEOUT=7\nSTACKEXCHANGE_KEY=abc123key\n")
    s = load_settings(environ={"HTTP_TIMEOUT": "9"}, cwd=tmp_path)
    assert s.normal_interval == 120 and s.http_timeout == 9
    assert s.get("STACKEXCHANGE_KEY") == "abc123key"


def test_per_service_initial_interval_from_environment(tmp_path):
    s = load_settings(environ={"INITIAL_INTERVAL_VIMEO": "3.5"}, cwd=tmp_path)
    assert s.initial_interval_for("vimeo") == 3.5


@pytest.mark.parametrize(
    "name, value",
    [
        ("NORMAL_INTERVAL", "soon"),
        ("NORMAL_INTERVAL", "-5"),
        ("MAX_ERRORS", "0"),
        ("MAX_ERRORS", "2.5"),
        ("GITHUB_API_URL", "api.github.com"),
        ("MONGODB_URI", "postgres://x"),
        ("LOG_LEVEL", "LOUD"),
        ("INITIAL_INTERVAL_GITHUB", "fast"),
        ("COLLECTOR_ENV", "staging"),
        ("LOG_FORMAT", "xml"),
        ("HEARTBEAT_SECONDS", "0"),
        ("METRICS_PORT", "70000"),
        ("METRICS_PORT", "http"),
        ("METRICS_ADDR", "localhost:9464"),
        ("INACTIVE_DAYS", "-1"),
        ("INACTIVE_SWEEP_CRON", "every day"),
        ("HEARTBEAT_SECONDS", "1e308"),  # a timedelta or a thread wait that large overflows
        ("LEASE_SECONDS", "31622401"),
        ("INITIAL_INTERVAL_GITHUB", "1e12"),
        ("CONCURRENCY", "5000"),
        ("SERVICE_CONCURRENCY_GITHUB", "100000"),
        ("STATS_SECONDS", "0"),
        ("MONITOR_PORT", "65536"),
        ("MONITOR_HOST", "http://monitor.example"),
        ("MONITOR_HOST", "two words"),
        ("MONITOR_HOST", "-leading.example"),
        ("MONITOR_HOST", "x" * 64 + ".example"),
    ],
)
def test_invalid_values_name_the_setting(tmp_path, name, value):
    with pytest.raises(SettingsError) as err:
        load_settings(environ={name: value}, cwd=tmp_path)
    assert err.value.name == name and name in str(err.value)


def test_a_year_of_seconds_and_4096_networks_at_once_are_the_largest_values(tmp_path):
    settings = load_settings(environ={"NORMAL_INTERVAL": "31622400", "CONCURRENCY": "4096"}, cwd=tmp_path)
    assert settings.normal_interval == 31622400 and settings.concurrency == 4096


def test_metrics_are_off_by_default_and_on_loopback_when_a_port_is_given(tmp_path):
    assert load_settings(environ={}, cwd=tmp_path).metrics_port == 0
    on = load_settings(environ={"METRICS_PORT": "9464"}, cwd=tmp_path)
    assert (on.metrics_port, on.metrics_addr) == (9464, "127.0.0.1")


def test_the_monitor_listens_on_loopback_read_only_by_default_and_the_stats_beat_every_second(tmp_path):
    default = load_settings(environ={}, cwd=tmp_path)
    assert (default.monitor_host, default.monitor_port, default.monitor_token) == ("127.0.0.1", 8089, "")
    assert default.stats_seconds == 1.0
    for host in ("0.0.0.0", "::1", "localhost", "monitor.example.org", " box-1 "):
        assert load_settings(environ={"MONITOR_HOST": host}, cwd=tmp_path).monitor_host == host.strip()


def test_the_monitor_token_is_masked_in_check_config_and_hidden_from_logs_and_reprs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MONITOR_TOKEN", "tok-4f9a2c71e0")
    assert cli.main(["--check-config"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["MONITOR_TOKEN"] == "***" and "tok-4f9a2c71e0" not in out
    settings = load_settings(cwd=tmp_path)
    assert settings.monitor_token == "tok-4f9a2c71e0" and "tok-4f9a2c71e0" in settings.secrets()
    assert "tok-4f9a2c71e0" not in repr(settings)


def test_check_config_prints_effective_settings_with_secrets_masked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MONGODB_URI", "mongodb://collector:hunter2pass@db.example:27017/likeastore")
    (tmp_path / ".env").write_text("STACKEXCHANGE_KEY=abc123key\nNORMAL_INTERVAL=600\n")
    assert cli.main(["--check-config"]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)
    assert shown["MONGODB_URI"] == "mongodb://collector:***@db.example:27017/likeastore"
    assert shown["STACKEXCHANGE_KEY"] == "***" and shown["NORMAL_INTERVAL"] == 600
    assert "hunter2pass" not in out and "abc123key" not in out


def test_invalid_setting_stops_the_program_with_status_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HTTP_TIMEOUT", "forever")
    assert cli.main(["--mode", "initial", "--once"]) == 2
    assert "HTTP_TIMEOUT" in capsys.readouterr().err


# A settings file that cannot be read — any of them: config/defaults.env, config/<env>.env, ./.env, the --env-file —
# stops every command at start with one line naming it and exit 2 (a reload: tests/daemon/test_reload.py).


@pytest.fixture
def files(tmp_path, monkeypatch):
    shutil.copytree(config_dir(), tmp_path / "config", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / ".env").write_text("USER_AGENT=from-dotenv/1\n")
    (tmp_path / "collector.env").write_text("BACKOFF_BASE=61\n")
    monkeypatch.setenv("COLLECTOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.delenv("COLLECTOR_ENV_FILE", raising=False)
    monkeypatch.chdir(tmp_path / "work")
    return {
        "config/defaults.env": tmp_path / "config" / "defaults.env",
        "config/test.env": tmp_path / "config" / "test.env",
        "./.env": tmp_path / "work" / ".env",
        "--env-file": tmp_path / "collector.env",
    }


FAULTS = {  # what is wrong: (make it so, what the line says)
    "a directory": (swap(Path.mkdir), "a directory, not a file"),
    "a named pipe": (swap(os.mkfifo), "a named pipe, not a file"),  # opened, it would block the start for ever
    "a socket": (swap(bind_socket), "a socket, not a file"),
    "a link to a device": (swap(lambda p: p.symlink_to("/dev/urandom")), "a device, not a file"),
    "a broken symbolic link": (swap(lambda p: p.symlink_to(p.parent / "gone")), "a symbolic link to nothing"),
    "missing": (Path.unlink, "No such file or directory"),
    "UTF-16": (lambda p: p.write_text(p.read_text(), encoding="utf-16"), "UTF-16 or UTF-32 text, not UTF-8"),
    "UTF-32": (lambda p: p.write_text(p.read_text(), encoding="utf-32"), "UTF-16 or UTF-32 text, not UTF-8"),
    "Latin-1": (lambda p: p.write_text(p.read_text() + "USER_AGENT=naïve\n", encoding="latin-1"), "not UTF-8"),
    "Shift JIS": (lambda p: p.write_text("USER_AGENT=収集\n" + p.read_text(), encoding="shift_jis"), "not UTF-8"),
    "a NUL byte": (lambda p: p.write_bytes(b"\x00" + p.read_bytes()), "not text (it holds a NUL byte)"),
    "an unclosed quote": (lambda p: p.write_text("USER_AGENT='x/1\n" + p.read_text()), "line 1 is not a setting"),
    "a stray word": (lambda p: p.write_text(p.read_text() + "\nPASS_LIMIT 3\n"), "is not a setting (NAME=value"),
    "over 1 MiB": (lambda p: p.write_text(p.read_text() + "#" * (1 << 20)), "larger than 1048576 bytes"),
}
SOURCES = ("config/defaults.env", "config/test.env", "./.env", "--env-file")
CASES = [(source, fault) for source in SOURCES for fault in FAULTS]
CASES.remove(("./.env", "missing"))  # ./.env may be absent


def main_in_time(argv: list[str]) -> int:
    """cli.main on a thread: a start stuck on a named pipe fails the test instead of hanging it."""
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(cli.main(argv)), daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the start blocked"
    return result[0]


def one_line(capsys, source: str, path: Path, reason: str) -> None:
    out, err = capsys.readouterr()
    named = "setting COLLECTOR_ENV_FILE: " if source == "--env-file" else ""
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"collector: {named}cannot read {str(path)!r}: ") and reason in err


@pytest.mark.parametrize("source, fault", CASES)
def test_check_config_stops_with_one_line_naming_a_settings_file_that_cannot_be_read(files, source, fault, capsys):
    path = files[source]
    FAULTS[fault][0](path)
    assert main_in_time(["--env-file", str(files["--env-file"]), "--check-config"]) == 2
    one_line(capsys, source, path, FAULTS[fault][1])


@pytest.mark.parametrize(
    "argv",
    [
        ["--mode", "normal"],
        ["--mode", "initial", "--once"],
        ["status", "--check"],
        ["networks", "list"],
        ["jobs", "list"],
        ["pause", "--reason", "x"],
        ["healthcheck"],
        ["connectors"],
    ],
)
@pytest.mark.parametrize("source", ["config/test.env", "./.env"])
def test_every_command_stops_with_the_same_line_and_status_2(files, source, argv, capsys):
    path = files[source]
    FAULTS["a named pipe"][0](path)
    assert main_in_time(argv) == 2
    one_line(capsys, source, path, "a named pipe, not a file")


@pytest.mark.parametrize("source", SOURCES)
def test_a_utf8_byte_order_mark_at_the_start_of_a_settings_file_is_dropped(files, source):
    """Windows editors begin UTF-8 with one; kept, it would glue itself to the first name and hide that setting."""
    path = files[source]
    path.write_bytes(b"\xef\xbb\xbfSERVICE_CONCURRENCY_VIMEO=3\n" + path.read_bytes())
    settings = load_settings(env_file=files["--env-file"])
    assert settings.service_concurrency_for("vimeo") == 3 and str(path) in settings.sources


def test_a_missing_dotenv_is_no_error_and_no_source(files):
    files["./.env"].unlink()
    settings = load_settings(env_file=files["--env-file"])
    assert settings.backoff_base == 61 and str(files["./.env"]) not in settings.sources


def test_a_file_name_with_control_characters_is_escaped_in_the_line(files, capsys):
    path = files["--env-file"].parent / "evil\n\x1b[31mnews.env"
    assert cli.main(["--env-file", str(path), "--check-config"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "\x1b" not in err and "\\n\\x1b[31m" in err


def test_check_config_masks_a_sink_kinds_secret_option_whatever_its_name(tmp_path, monkeypatch, capsys):
    """A plugin's option declared secret (here ACCESS, a name no secret word is in) is masked like PASSWORD is."""
    from collector.sinks import registry
    from collector.sinks.sdk import Option, Sink

    class Vault(Sink):
        kind = "vault"
        options = (Option("ACCESS", "the vault's access phrase", secret=True), Option("SHELF", "where"))

        def deliver(self, batch):
            return []

    discovered = registry.SinkRegistry

    def with_vault(*args, **kwargs):
        made = discovered(*args, **kwargs)
        made.register("vault", Vault)
        return made

    monkeypatch.setattr(registry, "SinkRegistry", with_vault)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        "SINKS=safe\nSINK_SAFE_KIND=vault\nSINK_SAFE_URL=https://vault.example\n"
        "SINK_SAFE_ACCESS=open-sesame-42\nSINK_SAFE_SHELF=top\n"
    )
    assert cli.main(["--check-config"]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)
    assert shown["SINK_SAFE_ACCESS"] == "***" and "open-sesame-42" not in out
    assert shown["SINK_SAFE_SHELF"] == "top"
