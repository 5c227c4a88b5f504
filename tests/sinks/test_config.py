"""sinks/config.py and the sinks' settings: each sink in SINKS read from its SINK_<NAME>_<FIELD> settings into a
SinkConfig; every bad one a SettingsError naming it; secrets masked by --check-config (Settings.describe) and in
the values redaction hides, also a kind's secret option with an innocent name; the registry of kinds."""

from __future__ import annotations

import base64
from importlib.metadata import EntryPoint

import pytest

from collector.settings import SettingsError, load_settings
from collector.settings.sinkfields import sink_keys
from collector.sinks import registry as registry_module
from collector.sinks.config import secret_names, secret_values, sink_configs
from collector.sinks.registry import KindBroken, SinkRegistry, UnknownKind
from collector.sinks.sdk import Option, Sink

from helpers.fakesink import SECRET, SHADE, FakeSink, registry, sink_settings


def in_base64(*values: str) -> set[str]:
    """The base64 forms of secret values, with their padding and without (config.wire_forms)."""
    encoded = [base64.b64encode(value.encode()).decode() for value in values]
    return {*encoded, *(value.rstrip("=") for value in encoded)}


def settings_with(**environ: str):
    return load_settings(environ=environ, env="test", read_dotenv=False)


def test_a_sink_is_read_with_its_defaults_and_options():
    settings = sink_settings("search", SINK_SEARCH_SERVICES="github, Reddit", SINK_SEARCH_BACKFILL="false")
    (config,) = sink_configs(settings, registry())
    assert (config.name, config.kind, config.url) == ("search", "fake", "https://search.sink.test")
    assert (config.batch, config.concurrency, config.timeout, config.pace) == (500, 2, 30.0, 500.0)
    assert config.services == ("github", "reddit") and config.backfill is False
    assert config.options == {"INDEX": "items", "TOKEN": SECRET, "SHADE": SHADE}
    assert set(config.secret_values) == {SECRET, SHADE, *in_base64(SECRET, SHADE)}  # as they are, and as sent


def test_the_kind_defaults_to_the_name_when_it_is_a_kind():
    settings = settings_with(SINKS="fake", SINK_FAKE_URL="http://fake.test:9200")
    (config,) = sink_configs(settings, registry())
    assert config.kind == "fake"


def test_no_sinks_no_configs():
    assert sink_configs(settings_with(), registry()) == []
    assert settings_with().sinks == ()


A = {"SINKS": "a", "SINK_A_KIND": "fake", "SINK_A_URL": "http://a.test"}  # a good sink, each case spoils it


@pytest.mark.parametrize(
    ("environ", "named", "words"),
    [
        ({"SINKS": "Bad-Name"}, "SINKS", "not a sink name"),
        ({"SINKS": "1st"}, "SINKS", "not a sink name"),
        ({**A, "SINK_A_KIND": ""}, "SINK_A_KIND", "is missing"),
        ({**A, "SINK_A_KIND": "solr"}, "SINK_A_KIND", "unknown kind"),
        ({**A, "SINK_A_URL": ""}, "SINK_A_URL", "is missing"),
        ({**A, "SINK_A_URL": "ftp://a.test"}, "SINK_A_URL", "http(s) URL"),
        ({**A, "SINK_A_URL": "https://u:pw@a.test"}, "SINK_A_URL", "credentials"),
        ({**A, "SINK_A_BATCH": "0"}, "SINK_A_BATCH", ">= 1"),
        ({**A, "SINK_A_BATCH": "x"}, "SINK_A_BATCH", "invalid"),
        ({**A, "SINK_A_CONCURRENCY": "65"}, "SINK_A_CONCURRENCY", "at most 64"),
        ({**A, "SINK_A_PACE": "nan"}, "SINK_A_PACE", "> 0"),
        ({**A, "SINK_A_BACKFILL": "maybe"}, "SINK_A_BACKFILL", "true or false"),
        ({**A, "SINK_A_INDX": "x"}, "SINK_A_INDX", "not a setting of a fake sink"),
        ({**A, "SINK_A_KIND": "needy"}, "SINK_A_SECRET", "is missing"),
    ],
)
def test_a_bad_sink_setting_is_named(environ, named, words):
    with pytest.raises(SettingsError) as caught:
        sink_configs(settings_with(**environ), SinkRegistry({"fake": FakeSink, "needy": Needy}, discover=False))
    assert caught.value.name == named and words in str(caught.value)


class Needy(Sink):
    kind = "needy"
    options = (Option("SECRET", "the signing secret", secret=True, required=True),)

    def deliver(self, batch):
        return []


def test_a_secret_given_a_bad_value_is_not_quoted():
    environ = {"SINKS": "a", "SINK_A_KIND": "fake", "SINK_A_URL": "https://a.test", "SINK_A_BATCH": "0"}
    with pytest.raises(SettingsError) as caught:
        sink_configs(settings_with(**environ, SINK_A_TOKEN=SECRET), registry())
    assert SECRET not in str(caught.value)


def test_settings_of_sinks_with_overlapping_names_go_to_the_longest():
    raw = {"SINK_A_URL": "1", "SINK_A_B_URL": "2", "SINK_A_B_BATCH": "3", "SINK_C_URL": "4", "SINK_A_": "5"}
    assert sink_keys(raw, ["a", "a_b"]) == {"a": {"URL": "1"}, "a_b": {"URL": "2", "BATCH": "3"}}


def test_check_config_shows_the_sinks_settings_with_every_secret_masked():
    settings = sink_settings("search")
    plain = settings.describe()
    assert plain["SINKS"] == ("search",) and plain["SINK_SEARCH_URL"] == "https://search.sink.test"
    assert plain["SINK_SEARCH_TOKEN"] == "***"  # by its name
    assert plain["SINK_SEARCH_SHADE"] == SHADE  # the kernel cannot know this one ...
    names = secret_names(settings, registry())
    assert names == {"SINK_SEARCH_TOKEN", "SINK_SEARCH_SHADE"}
    described = settings.describe(secret_names=names)  # ... the sinks' config names it
    assert described["SINK_SEARCH_SHADE"] == "***" and described["SINK_SEARCH_TOKEN"] == "***"
    assert SECRET not in str(described) and SHADE not in str(described)


def test_redaction_is_given_every_secret_value():
    settings = sink_settings("search", "hook")
    assert SECRET in settings.secrets()  # named like a secret: the settings know it
    assert {SECRET, SHADE} <= set(secret_values(sink_configs(settings, registry())))


def test_options_of_a_kind_that_cannot_load_are_all_taken_as_secret():
    broken = SinkRegistry(discover=False)
    broken._points = {"fake": EntryPoint("fake", "no_such_module_here:Sink", registry_module.GROUP)}
    settings = sink_settings("search")
    (config,) = sink_configs(settings, broken)
    assert set(config.secret_values) == {SECRET, SHADE, *in_base64(SECRET, SHADE)}  # every option given, unchecked
    assert "SINK_SEARCH_SHADE" in secret_names(settings, broken)
    with pytest.raises(KindBroken, match="failed to load"):
        broken.get("fake")


def test_the_registry_refuses_incomplete_sinks_and_bad_options():
    class Incomplete(Sink):
        kind = "incomplete"

    class Clash(FakeSink):
        options = (Option("URL", "clashes with the URL every sink has"),)

    class Lower(FakeSink):
        options = (Option("index", "not in capitals"),)

    for cls in (Incomplete, Clash, Lower):
        with pytest.raises(KindBroken):
            SinkRegistry({"x": cls}, discover=False)
    with pytest.raises(UnknownKind, match="known: fake"):
        registry().get("solr")
    assert registry().kinds() == ["fake"]


def test_the_built_in_kinds_are_declared_in_the_entry_point_group():
    assert {"opensearch", "typesense", "webhook"} <= set(SinkRegistry().kinds())
