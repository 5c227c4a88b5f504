"""Each setting is declared once (collector/settings/declaration.py) and everything else agrees with it: the
Settings fields, parsing, --check-config, what a reload keeps, config/defaults.env and docs/reference/settings.md.
These tests fail when any of them drifts; `python -m collector.settings.reference --write` mends the two files."""

from __future__ import annotations

import shutil
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from collector import lifecycle as reload
from collector.settings import Settings, config_dir, load_settings, read_settings_file, reference, settings_for_tests
from collector.settings import declaration as d
from collector.settings.masking import SECRET_WORDS
from collector.settings.parsers import ANY_TEXT, ENVIRONMENTS
from collector.settings.sinkfields import SINK_FIELDS

ROOT = Path(__file__).resolve().parents[2]
NOT_SETTINGS = {"raw", "file_keys", "sources", "origins"}  # what was read, not a setting
DECLARED = (d.ENVIRONMENT, *d.SETTINGS)


def test_the_generated_files_are_what_the_declaration_gives():
    assert reference.stale(ROOT) == [], "run `python -m collector.settings.reference --write`"


def test_an_edit_to_a_generated_file_is_drift(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (tmp_path / "docs" / "reference").mkdir(parents=True)
    shutil.copy(ROOT / reference.REFERENCE, tmp_path / reference.REFERENCE)
    assert reference.stale(tmp_path) == []
    defaults = tmp_path / reference.DEFAULTS_ENV
    defaults.write_text(defaults.read_text().replace("MAX_ERRORS=5", "MAX_ERRORS=6"))
    assert reference.stale(tmp_path) == [defaults]
    (tmp_path / reference.REFERENCE).unlink()
    assert reference.stale(tmp_path) == [defaults, tmp_path / reference.REFERENCE]


def test_check_mode_names_the_stale_file(tmp_path, monkeypatch, capsys):
    assert reference.main(["--check"]) == 0
    monkeypatch.setattr(reference, "stale", lambda root=ROOT: [ROOT / reference.DEFAULTS_ENV])
    assert reference.main(["--check"]) == 1
    assert "defaults.env differs from collector/settings/declaration.py" in capsys.readouterr().err


def test_every_settings_field_is_declared_and_every_declaration_has_its_field():
    declared = [s.field for s in DECLARED if s.field] + [family.field for family in d.FAMILIES]
    assert len(declared) == len(set(declared))
    assert {f.name for f in fields(Settings)} - NOT_SETTINGS == set(declared)


def test_names_are_declared_once_and_each_help_is_one_line():
    names = [s.name for s in DECLARED] + [family.name for family in d.FAMILIES]
    assert len(names) == len(set(names))
    for setting in (*DECLARED, *d.FAMILIES):
        assert setting.help and "\n" not in setting.help and len(f"# {setting.help}") <= 120, setting.name
        assert setting.reload in d.RELOADS, setting.name
    fields = [f.field for f in SINK_FIELDS]
    assert len(fields) == len(set(fields)) and all(f.help and "\n" not in f.help for f in SINK_FIELDS)


def test_the_dataclass_defaults_are_the_declared_ones():
    by_field = {s.field: s for s in d.FIELDS}
    defaults = [f for f in fields(Settings) if f.default is not MISSING and f.name not in NOT_SETTINGS]
    assert defaults
    for f in defaults:
        setting = by_field[f.name]
        assert f.default == setting.kind.parse(setting.default), setting.name


def test_the_declared_defaults_are_what_a_program_without_other_settings_reads(tmp_path, monkeypatch):
    (tmp_path / "production.env").write_text("")
    shutil.copy(config_dir() / "defaults.env", tmp_path / "defaults.env")
    monkeypatch.setenv("COLLECTOR_CONFIG_DIR", str(tmp_path))
    settings = load_settings(environ={}, env="production", read_dotenv=False)
    assert settings.env == d.ENVIRONMENT.default == load_settings(environ={}, read_dotenv=False).env
    for setting in d.SETTINGS:
        expected = setting.kind.parse(setting.default)
        value = getattr(settings, setting.field) if setting.field else settings.get(setting.name)
        assert value == expected, setting.name
    for family in d.FAMILIES:
        assert getattr(settings, family.field) == {s: family.kind.parse(v) for s, v, _ in family.extras}


def test_check_config_describes_every_declared_setting_in_the_declared_order():
    described = list(settings_for_tests().describe())
    assert described[: 1 + len(d.FIELDS)] == [d.ENVIRONMENT.name] + [s.name for s in d.FIELDS]
    assert {s.name for s in d.SETTINGS} <= set(described)
    for family in d.FAMILIES:
        assert {family.prefix + s.upper() for s, _, _ in family.extras} <= set(described)


def test_the_declared_secrets_are_what_check_config_masks():
    environ = {s.name: "value-of-" + s.name for s in d.SETTINGS if not s.field or s.kind is ANY_TEXT}
    environ["MONGODB_URI"] = "mongodb://collector:hunter2pass@db.example/likeastore"
    environ["TOKEN_KEY"] = environ["TOKEN_KEYS_OLD"] = "A" * 43  # a key: 32 bytes in base64
    described = load_settings(environ=environ, env="test", read_dotenv=False).describe()
    masked = {name for name, value in described.items() if isinstance(value, str) and "***" in value}
    assert masked == {s.name for s in DECLARED if s.secret}
    named_secret = [s for s in DECLARED if s.name != "MONGODB_URI" and not s.name.endswith("_FILE")]  # a path: shown
    assert all(s.secret == any(w in s.name for w in SECRET_WORDS) for s in named_secret)


def test_the_declared_bounds_are_what_the_parsers_enforce():
    kinds = {s.kind for s in DECLARED} | {family.kind for family in d.FAMILIES} | {f.kind for f in SINK_FIELDS}
    bounded = [k for k in kinds if k.low is not None or k.high is not None]
    assert len(bounded) >= 5
    for kind in bounded:
        if kind.low is not None:
            with pytest.raises(ValueError):
                kind.parse(str(kind.low - 1))
            if kind.above:
                with pytest.raises(ValueError):
                    kind.parse(str(kind.low))
            else:
                kind.parse(str(kind.low))
        if kind.high is not None:
            kind.parse(str(kind.high))
            with pytest.raises(ValueError):
                kind.parse(str(kind.high + 1))


def test_a_reload_keeps_exactly_the_settings_declared_kept():
    kept = [s for s in DECLARED if s.reload == d.KEPT]
    assert reload.FIXED == d.FIXED_FIELDS == tuple(s.field for s in kept)
    old = settings_for_tests()
    new = old.with_(**{s.field: object() for s in DECLARED if s.field})
    merged, names = reload.merge(old, new)
    assert sorted(names) == sorted(s.name for s in kept)
    assert all(getattr(merged, s.field) is getattr(new, s.field) for s in DECLARED if s.field and s not in kept)


def test_a_reload_applies_the_http_settings_as_declared(db):
    """USER_AGENT, GITHUB_API_URL and ALLOW_PRIVATE_HOSTS are declared as applied by a reload: the session's
    header and the address policy of the requests that begin after it follow them (the reload line says so)."""
    from collector.engine import Collector

    collector = Collector(db, settings_for_tests(), concurrency=1)
    try:
        http = collector.http
        assert not http.policy.allow_private and http.session.headers["User-Agent"] != "other/1"
        assert "ghe.example" not in http.policy.trusted_hosts
        collector.apply_settings(
            collector.settings.with_(
                user_agent="other/1", github_api_url="https://ghe.example/api/v3", allow_private_hosts=True
            )
        )
        assert http.session.headers["User-Agent"] == "other/1"
        assert http.policy.allow_private and "ghe.example" in http.policy.trusted_hosts
    finally:
        collector.close()
    assert {d.BY_NAME[name].reload for name in ("USER_AGENT", "GITHUB_API_URL", "ALLOW_PRIVATE_HOSTS")} == {d.YES}


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_environment_file_names_declared_settings_and_loads(env):
    names = set(read_settings_file(config_dir() / f"{env}.env") or {})
    families = [family.pattern for family in d.FAMILIES]
    assert all(name in d.BY_NAME or any(p.match(name) for p in families) for name in names), names
    assert load_settings(environ={}, env=env, read_dotenv=False).env == env
