from __future__ import annotations

import json

import pytest

from collector import cli
from collector.settings import SettingsError, load_settings


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
