"""Where each setting came from (Settings.origins: config/defaults.env, the COLLECTOR_ENV's config file, ./.env, the
environment, the operator's settings file), said by `--check-config` on standard error beside its JSON; and
`--check-config` refusing, exit 2, whatever the daemon or the sink service would refuse at their start."""

from __future__ import annotations

import json

import pytest

from collector import cli
from collector.settings import SettingsError, load_settings
from collector.settings.model import Origin


def write_env_file(path, text: str):
    path.write_text(text)
    return path


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory of our own; none of the settings these tests look at taken from the caller."""
    monkeypatch.chdir(tmp_path)
    for name in ("COLLECTOR_ENV", "COLLECTOR_ENV_FILE", "MONGODB_URI", "NORMAL_INTERVAL", "USER_AGENT", "SINKS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_every_value_knows_where_it_came_from(tmp_path):
    (tmp_path / ".env").write_text("USER_AGENT=from-dotenv/1\nHTTP_TIMEOUT=7\n")
    env_file = write_env_file(tmp_path / "ops.env", "BACKOFF_BASE=61\nHTTP_TIMEOUT=8\n")
    environ = {"NORMAL_INTERVAL": "120", "HTTP_TIMEOUT": "9", "COLLECTOR_ENV": "development"}
    settings = load_settings(environ=environ, cwd=tmp_path, env_file=env_file)
    assert settings.origin("MAX_ERRORS") == Origin("default")
    assert settings.origin("LOOP_IDLE_PAUSE") == Origin("default", "development")  # config/development.env
    assert settings.origin("USER_AGENT") == Origin("file", str(tmp_path / ".env"))
    assert settings.origin("NORMAL_INTERVAL") == Origin("environment")
    assert settings.origin("BACKOFF_BASE") == Origin("file", str(env_file))
    assert settings.origin("HTTP_TIMEOUT") == Origin("file", str(env_file))  # the settings file wins
    assert settings.http_timeout == 8
    assert settings.origin("COLLECTOR_ENV") == Origin("environment")
    assert settings.origin("NO_SUCH_SETTING") == Origin("default")


@pytest.mark.parametrize(
    ("given", "environ", "in_file", "expected"),
    [
        (None, {}, "", ("production", "the default")),
        (None, {"COLLECTOR_ENV": "test"}, "", ("test", "set in the environment")),
        (None, {"COLLECTOR_ENV": "test"}, "COLLECTOR_ENV=development\n", ("development", "set in {file}")),
        ("test", {"COLLECTOR_ENV": "development"}, "", ("test", "given")),
    ],
)
def test_the_environment_name_says_where_it_came_from_too(tmp_path, given, environ, in_file, expected):
    env_file = write_env_file(tmp_path / "ops.env", in_file)
    settings = load_settings(environ=environ, cwd=tmp_path, env=given, env_file=env_file)
    assert (settings.env, str(settings.origin("COLLECTOR_ENV"))) == (expected[0], expected[1].format(file=env_file))


def test_the_mongodb_uri_is_shown_masked_with_its_origin(tmp_path):
    shown = load_settings(environ={}, cwd=tmp_path).mongodb_shown()
    assert shown == "mongodb://localhost:27017/likeastore (MONGODB_URI: the default)"
    uri = "mongodb://bob:pa55-w0rd@db.example:27017/x?tlsCertificateKeyFilePassword=kf-secret-1&tls=true"
    shown = load_settings(environ={"MONGODB_URI": uri}, cwd=tmp_path).mongodb_shown()
    assert "pa55-w0rd" not in shown and "kf-secret-1" not in shown
    assert shown.startswith("mongodb://bob:***@db.example:27017/x?") and shown.endswith(
        "(MONGODB_URI: set in the environment)"
    )
    for odd in ("mongodb://db-\x1b[31mred:27017/x", "mongodb://b\x1b]0;ob:pw-77@db/x", "mongodb://db/x\u202e?tls=true"):
        try:
            shown = load_settings(environ={"MONGODB_URI": odd}, cwd=tmp_path).mongodb_shown()
        except SettingsError as exc:
            shown = str(exc)
        assert "\x1b" not in shown and "\u202e" not in shown and "pw-77" not in shown


def check_config(capsys, *args: str) -> tuple[int, dict, list[str]]:
    code = cli.main([*args, "--check-config"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else {}, err.splitlines()


def test_check_config_names_what_was_set_where_and_counts_the_defaults(here, monkeypatch, capsys):
    (here / ".env").write_text("USER_AGENT=from-dotenv/1\n")
    env_file = write_env_file(
        here / "collector.env", "BACKOFF_BASE=61\nMONGODB_URI=mongodb://ops:pw-9a8b7c@db:27017/x\n"
    )
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("NORMAL_INTERVAL", "120")
    monkeypatch.setenv("MONGODB_URI", "mongodb://env-db:27017/ignored")  # the settings file wins
    code, shown, lines = check_config(capsys, "--env-file", str(env_file))
    assert code == 0 and shown["NORMAL_INTERVAL"] == 120 and shown["MONGODB_URI"] == "mongodb://ops:***@db:27017/x"
    assert set(lines[:3]) == {  # what was set, in the order the settings are shown
        f"collector: set in {env_file}: MONGODB_URI, BACKOFF_BASE",
        "collector: set in the environment: COLLECTOR_ENV, NORMAL_INTERVAL",
        f"collector: set in {here / '.env'}: USER_AGENT",
    }
    assert lines[3].startswith("collector: the default for COLLECTOR_ENV=test: LOOP_IDLE_PAUSE, RATE_LIMIT_INTERVAL")
    assert "MONGODB_URI" not in lines[3] and "NORMAL_INTERVAL" not in lines[3]
    assert lines[4].startswith("collector: the default: every other one (") and lines[4].endswith(" settings)")
    assert lines[5] == "collector: the settings are valid: the daemon and the sink service accept them"
    assert len(lines) == 6 and "pw-9a8b7c" not in "\n".join(lines)
    counted = int(lines[4].split("(")[1].split()[0])
    named = sum(len(line.split(": ", 2)[-1].split(", ")) for line in lines[:4])
    assert counted + named == len(shown)  # every setting shown is in exactly one group


def test_check_config_with_nothing_set_says_everything_is_a_default(here, capsys):
    code, shown, lines = check_config(capsys)
    assert code == 0 and shown["COLLECTOR_ENV"] == "production"
    assert lines == [
        "collector: the default for COLLECTOR_ENV=production: LOOP_IDLE_PAUSE, NORMAL_INTERVAL",
        f"collector: the default: every other one ({len(shown) - 2} settings)",
        "collector: the settings are valid: the daemon and the sink service accept them",
    ]


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"SINKS": "hooks", "SINK_HOOKS_KIND": "webhook"}, "SINK_HOOKS_URL"),
        (
            {"SINKS": "hooks", "SINK_HOOKS_KIND": "carrier-pigeon", "SINK_HOOKS_URL": "https://h.example/"},
            "SINK_HOOKS_KIND",
        ),
        ({"SINKS": "hooks", "SINK_HOOKS_KIND": "webhook", "SINK_HOOKS_URL": "ftp://h.example/"}, "SINK_HOOKS_URL"),
        (
            {
                "SINKS": "hooks",
                "SINK_HOOKS_KIND": "webhook",
                "SINK_HOOKS_URL": "https://h.example/",
                "SINK_HOOKS_BATCH": "0",
            },
            "SINK_HOOKS_BATCH",
        ),
        ({"MONGODB_URI": "mongodb://db.example/x?authMechanism=GSSAPI"}, "MONGODB_URI"),  # the client needs a user
        ({"MONGODB_URI": "mongodb://u:x509-pw-55@db.example/x?authMechanism=MONGODB-X509"}, "MONGODB_URI"),
        ({"MONGODB_URI": "mongodb://db.example/x?replicaSet=rs&loadBalanced=true"}, "MONGODB_URI"),
    ],
)
def test_check_config_refuses_what_the_daemon_or_the_sink_service_would_refuse(
    here, monkeypatch, capsys, settings, named
):
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    code, _, lines = check_config(capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"collector: setting {named}: "), lines
    assert "x509-pw-55" not in lines[0]
    for command in (["--mode", "normal", "--once"], ["sink", "--once"]):  # the same refusal, before anything starts
        assert cli.main(command) == 2
        assert capsys.readouterr().err.splitlines() == lines
