"""Every sink setting checked where the settings are (sinks/checks.py through config.sink_configs): the URL (a
URL, http(s), no credentials; a webhook's https and no non-public address literal unless ALLOW_PRIVATE_HOSTS), a
webhook's `whsec_` secret, an OpenSearch index name, a Typesense collection name, the numbers in range, an unknown
kind, and a plugin's own checks (`Option.check`, `Sink.check_config`) — each a SettingsError naming
SINK_<NAME>_<OPTION>, never quoting a secret or a URL's credentials, a plugin check that crashes included."""

from __future__ import annotations

import base64
import json

import pytest

from collector.settings import SettingsError, load_settings
from collector.sinks.checks import url_problem
from collector.sinks.config import check_sinks, load_checked, sink_configs
from collector.sinks.registry import KindBroken, SinkRegistry
from collector.sinks.sdk import DONE, Option, Sink

from helpers.proc import write_env
from helpers.sinkservers import WEBHOOK_SECRET

GOOD_SECRET = WEBHOOK_SECRET
PASSWORD = "pa55-w0rd-not-to-be-seen"


def settings_with(**environ: str):
    return load_settings(environ=environ, env="test", read_dotenv=False)


def whsec(size: int) -> str:
    return "whsec_" + base64.b64encode(bytes(range(7, 7 + size)) if size < 200 else b"k" * size).decode()


def refused(environ: dict[str, str], registry: SinkRegistry | None = None) -> SettingsError:
    with pytest.raises(SettingsError) as caught:
        sink_configs(settings_with(**environ), registry or SinkRegistry())
    return caught.value


# --- URLs --------------------------------------------------------------------------------------------------------
HOOK = {"SINKS": "hook", "SINK_HOOK_KIND": "webhook", "SINK_HOOK_SECRET": GOOD_SECRET}
SEARCH = {"SINKS": "search", "SINK_SEARCH_KIND": "opensearch"}


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("https://[::1", "not a valid URL"),
        ("https://hooks.example:99999/in", "port"),
        ("https://hooks.example:port/in", "port"),
        ("ftp://hooks.example/in", "http(s) URL"),
        ("hooks.example/in", "http(s) URL"),
        ("https:///in", "http(s) URL"),
        ("https://hooks .example/in", "spaces or control characters"),
        ("https://hooks.example/in\x1b[2J", "spaces or control characters"),
        (f"https://ozymandias:{PASSWORD}@hooks.example/in", "credentials"),
        (f"https://{PASSWORD}@hooks.example/in", "credentials"),
        ("http://hooks.example/in", "https URL"),
        ("http://203.0.113.9:8080/in", "https URL"),
        ("https://10.1.2.3/in", "non-public address"),
        ("https://127.0.0.1:8443/in", "non-public address"),
        ("https://[::1]/in", "non-public address"),
        ("https://[fe80::1%25eth0]/in", "non-public address"),
        ("https://[::ffff:192.168.1.4]/in", "non-public address"),
        ("https://169.254.169.254/latest", "non-public address"),
    ],
)
def test_a_webhook_url_that_cannot_be_used_is_refused_naming_it_without_its_credentials(url, words):
    error = refused({**HOOK, "SINK_HOOK_URL": url})
    assert error.name == "SINK_HOOK_URL" and words in str(error), str(error)
    assert PASSWORD not in str(error) and "ozymandias" not in str(error) and "\x1b" not in str(error)


@pytest.mark.parametrize(
    "url",
    ["https://hooks.example/in", "https://8.8.8.8/x?a=1", "https://[2001:4860::8888]:8443/", "https://localhost/in"],
)
def test_a_webhook_url_to_a_public_host_or_a_name_is_taken(url):
    """A name is not resolved at the start (every connection is checked by the address it reaches)."""
    (config,) = sink_configs(settings_with(**HOOK, SINK_HOOK_URL=url), SinkRegistry())
    assert config.url == url


@pytest.mark.parametrize("url", ["http://hooks.example/in", "https://10.1.2.3/in", "http://[::1]:8080/in"])
def test_allow_private_hosts_takes_http_and_private_addresses_for_a_webhook(url):
    settings = settings_with(**HOOK, SINK_HOOK_URL=url, ALLOW_PRIVATE_HOSTS="true")
    assert sink_configs(settings, SinkRegistry())[0].url == url


@pytest.mark.parametrize("url", ["http://10.0.0.7:9200", "http://search.internal:9200", "https://127.0.0.1:9200"])
def test_a_search_cluster_may_be_private_and_plain_http(url):
    assert sink_configs(settings_with(**SEARCH, SINK_SEARCH_URL=url), SinkRegistry())[0].url == url


@pytest.mark.parametrize(
    "url", [f"http://u:{PASSWORD}@search.internal:9200", "gopher://search.internal", "http://search.internal:-1"]
)
def test_every_kind_refuses_a_url_it_cannot_use(url):
    error = refused({**SEARCH, "SINK_SEARCH_URL": url})
    assert error.name == "SINK_SEARCH_URL" and PASSWORD not in str(error)


@pytest.mark.parametrize("url", ["", "https://h.example", "http://[::1"])
def test_url_problem_is_the_same_rule_with_or_without_a_user_host(url):
    assert (url_problem(url, False, False) is None) == (url_problem(url, True, True) is None)


# --- the webhook's secret ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("secret", "words"),
    [
        (base64.b64encode(b"k" * 32).decode(), "whsec_"),  # no prefix
        ("WHSEC_" + base64.b64encode(b"k" * 32).decode(), "whsec_"),
        ("whsec_" + "not base64 at all!", "not base64"),
        ("whsec_" + base64.urlsafe_b64encode(b"\xfb\xff" * 16).decode(), "not base64"),  # the URL-safe alphabet
        ("whsec_" + base64.b64encode(b"k" * 32).decode().rstrip("="), "not base64"),
        ("whsec_" + base64.b64encode(b"k" * 32).decode() + "\n", "not base64"),
        ("whsec_é" + base64.b64encode(b"k" * 32).decode(), "not base64"),
        (whsec(23), "24 to 64 bytes"),
        (whsec(1), "24 to 64 bytes"),
        (whsec(65), "24 to 64 bytes"),
        (whsec(300), "24 to 64 bytes"),
    ],
)
def test_a_webhook_secret_not_in_the_standard_form_is_refused_and_never_printed(secret, words):
    error = refused({**HOOK, "SINK_HOOK_URL": "https://hooks.example/in", "SINK_HOOK_SECRET": secret})
    assert error.name == "SINK_HOOK_SECRET" and words in str(error), str(error)
    body = secret.removeprefix("whsec_").removeprefix("WHSEC_").strip()
    assert body not in str(error) and body[:12] not in str(error)


@pytest.mark.parametrize("size", [24, 32, 48, 64])
def test_a_standard_webhooks_secret_of_24_to_64_bytes_is_taken(size):
    settings = settings_with(**{**HOOK, "SINK_HOOK_URL": "https://hooks.example/in", "SINK_HOOK_SECRET": whsec(size)})
    assert sink_configs(settings, SinkRegistry())[0].options["SECRET"] == whsec(size)


# --- index and collection names ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("index", "words"),
    [
        ("Items", "lower case"),
        ("likesÄ", "lower case"),
        *((f"a{ch}b", "must not hold") for ch in '\\/*?"<>| ,#:'),
        ("<logs-{now/d}>", "must not hold"),
        ("a\tb", "control characters"),
        ("-items", "begin with"),
        ("_items", "begin with"),
        ("+items", "begin with"),
        (".", ". or .."),
        ("..", ". or .."),
        ("a" * 256, "255 bytes"),
        ("é" * 128, "255 bytes"),
        ("日" * 86, "255 bytes"),
    ],
)
def test_an_index_name_opensearch_cannot_create_is_refused(index, words):
    error = refused({**SEARCH, "SINK_SEARCH_URL": "http://search.internal:9200", "SINK_SEARCH_INDEX": index})
    assert error.name == "SINK_SEARCH_INDEX" and words in str(error), str(error)
    assert "\t" not in str(error)


@pytest.mark.parametrize("index", ["items", "likes-2026.12", "a" * 255, "é" * 127, "日本", ".hidden", "a+b_c"])
def test_an_index_name_opensearch_takes_is_taken(index):
    settings = settings_with(**SEARCH, SINK_SEARCH_URL="http://search.internal:9200", SINK_SEARCH_INDEX=index)
    assert sink_configs(settings, SinkRegistry())[0].options["INDEX"] == index


TYPESENSE = {
    "SINKS": "ts",
    "SINK_TS_KIND": "typesense",
    "SINK_TS_URL": "http://ts.internal:8108",
    "SINK_TS_API_KEY": "k",
}


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("a/b", "letters, digits"),
        ("likes#eu", "letters, digits"),
        ("what?", "letters, digits"),
        ("two words", "letters, digits"),
        ("-items", "letters, digits"),
        (".items", "letters, digits"),
        ("x" * 129, "at most 128"),
    ],
)
def test_a_typesense_collection_name_that_cannot_be_read_back_is_refused(name, words):
    error = refused({**TYPESENSE, "SINK_TS_COLLECTION": name})
    assert error.name == "SINK_TS_COLLECTION" and words in str(error), str(error)


@pytest.mark.parametrize("name", ["items", "Likes_2026", "a.b-c", "x" * 128, "_private"])
def test_a_typesense_collection_name_is_taken(name):
    assert (
        sink_configs(settings_with(**TYPESENSE, SINK_TS_COLLECTION=name), SinkRegistry())[0].options["COLLECTION"]
        == name
    )


# --- across options, files, headers, numbers, kinds ----------------------------------------------------------------
BASE = {**SEARCH, "SINK_SEARCH_URL": "http://search.internal:9200"}


@pytest.mark.parametrize(
    ("extra", "named", "words"),
    [
        ({"SINK_SEARCH_API_KEY": "abc", "SINK_SEARCH_USERNAME": "ann"}, "SINK_SEARCH_API_KEY", "not both"),
        ({"SINK_SEARCH_API_KEY": "abc", "SINK_SEARCH_PASSWORD": PASSWORD}, "SINK_SEARCH_API_KEY", "not both"),
        ({"SINK_SEARCH_PASSWORD": PASSWORD}, "SINK_SEARCH_USERNAME", "required with a PASSWORD"),
        ({"SINK_SEARCH_USERNAME": "ann:admin", "SINK_SEARCH_PASSWORD": PASSWORD}, "SINK_SEARCH_USERNAME", "':'"),
        ({"SINK_SEARCH_API_KEY": f"{PASSWORD} x"}, "SINK_SEARCH_API_KEY", "spaces or control"),
        ({"SINK_SEARCH_API_KEY": f"{PASSWORD}\r\nX-Evil: 1"}, "SINK_SEARCH_API_KEY", "spaces or control"),
        ({"SINK_SEARCH_BATCH": "0"}, "SINK_SEARCH_BATCH", "invalid value"),
        ({"SINK_SEARCH_BATCH": "-5"}, "SINK_SEARCH_BATCH", "invalid value"),
        ({"SINK_SEARCH_BATCH": "10000000"}, "SINK_SEARCH_BATCH", "at most"),
        ({"SINK_SEARCH_CONCURRENCY": "0"}, "SINK_SEARCH_CONCURRENCY", "invalid value"),
        ({"SINK_SEARCH_CONCURRENCY": "65"}, "SINK_SEARCH_CONCURRENCY", "at most"),
        ({"SINK_SEARCH_TIMEOUT": "0"}, "SINK_SEARCH_TIMEOUT", "invalid value"),
        ({"SINK_SEARCH_TIMEOUT": "nan"}, "SINK_SEARCH_TIMEOUT", "invalid value"),
        ({"SINK_SEARCH_TIMEOUT": "-1"}, "SINK_SEARCH_TIMEOUT", "invalid value"),
        ({"SINK_SEARCH_PACE": "inf"}, "SINK_SEARCH_PACE", "invalid value"),
        ({"SINK_SEARCH_KIND": "elastic"}, "SINK_SEARCH_KIND", "unknown kind"),
    ],
)
def test_options_across_headers_and_numbers_are_checked(extra, named, words):
    error = refused({**BASE, **extra})
    assert error.name == named and words in str(error), str(error)
    assert PASSWORD not in str(error) and "\r" not in str(error)


def test_a_typesense_key_that_no_header_can_carry_is_refused_unquoted():
    error = refused({**TYPESENSE, "SINK_TS_API_KEY": f"{PASSWORD}\nX-Evil: 1"})
    assert error.name == "SINK_TS_API_KEY" and PASSWORD not in str(error)


@pytest.mark.parametrize(
    ("content", "words"),
    [(None, "cannot read"), (b"{not json", "not JSON"), (b"[1, 2]", "JSON object"), (b" " * (1024 * 1024 + 1), "over")],
)
def test_an_index_template_that_cannot_be_used_is_refused_at_the_start(tmp_path, content, words):
    path = tmp_path / "template.json"
    if content is not None:
        path.write_bytes(content)
    error = refused({**BASE, "SINK_SEARCH_TEMPLATE": str(path)})
    assert error.name == "SINK_SEARCH_TEMPLATE" and words in str(error), str(error)


def test_a_readable_index_template_is_taken(tmp_path):
    path = tmp_path / "template.json"
    path.write_text(json.dumps({"template": {"settings": {"number_of_shards": 1}}}))
    assert sink_configs(settings_with(**BASE, SINK_SEARCH_TEMPLATE=str(path)), SinkRegistry())


# --- a plugin's checks ---------------------------------------------------------------------------------------------
def no_vowels(value: str) -> None:
    if set(value) & set("aeiou"):
        raise ValueError(f"{value!r} holds a vowel")


def crashes(value: str) -> None:
    raise RuntimeError(f"the check broke on {value}")


class Plugin(Sink):
    kind = "plugin"
    options = (
        Option("SHELF", "where", default="xyz", check=no_vowels),
        Option("VAULT", "a secret with a careless check", secret=True, check=no_vowels),
        Option("BROKEN", "a check that crashes", check=crashes),
        Option("OPAQUE", "a secret its crashing check quotes", secret=True, check=crashes),
    )

    @classmethod
    def check_config(cls, config):
        if config.options.get("SHELF") == "zzz":
            return [("SHELF", f"zzz and {config.options.get('VAULT')} do not go together")]
        return []

    def deliver(self, batch):
        return [DONE] * len(batch)


PLUGIN = {"SINKS": "p", "SINK_P_KIND": "plugin", "SINK_P_URL": "https://p.example"}
VAULT = "vault-secret-a1b2c3"
VOWELLESS = "vlt-scrt-x1b2c3d4"


@pytest.mark.parametrize(
    ("extra", "named", "words"),
    [
        ({"SINK_P_SHELF": "shelf"}, "SINK_P_SHELF", "'shelf' holds a vowel"),
        ({"SINK_P_VAULT": VAULT}, "SINK_P_VAULT", "holds a vowel"),
        ({"SINK_P_BROKEN": "x"}, "SINK_P_BROKEN", "its check failed: RuntimeError"),
        ({"SINK_P_OPAQUE": VAULT}, "SINK_P_OPAQUE", "its check failed: RuntimeError"),
        ({"SINK_P_SHELF": "zzz", "SINK_P_VAULT": VOWELLESS}, "SINK_P_SHELF", "zzz and *** do not go"),
        ({"SINK_P_SHELF": "bxxm"}, None, None),
    ],
)
def test_a_plugins_checks_are_its_sinks_setting_errors_with_its_secrets_masked(extra, named, words):
    registry = SinkRegistry({"plugin": Plugin}, discover=False)
    settings = settings_with(**PLUGIN, **extra)
    if named is None:
        assert sink_configs(settings, registry)[0].options["SHELF"] == "bxxm"
        return
    error = refused({**PLUGIN, **extra}, registry)
    assert error.name == named and words in str(error), str(error)
    assert VAULT not in str(error) and VOWELLESS not in str(error)


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (KeyError, "KeyError: '***'"),
        (None, "TypeError"),
        ([("SHELF",)], "ValueError"),
        ("SHELF", "ValueError"),
        ([("SHELF", "a", "b")], "ValueError"),
    ],
)
def test_a_plugins_check_config_that_crashes_or_answers_nonsense_is_its_sinks_setting_error(answer, words):
    class Boom(Plugin):
        @classmethod
        def check_config(cls, config):
            if answer is KeyError:
                raise KeyError(config.options.get("VAULT"))
            return answer

    error = refused({**PLUGIN, "SINK_P_VAULT": VOWELLESS}, SinkRegistry({"plugin": Boom}, discover=False))
    assert error.name == "SINK_P_KIND" and words in str(error) and VOWELLESS not in str(error), str(error)


def test_an_option_whose_check_cannot_be_called_breaks_its_kind_when_registered():
    class Odd(Plugin):
        options = (Option("SHELF", "where", check="not callable"),)  # type: ignore[arg-type]

    with pytest.raises(KindBroken, match="not callable"):
        SinkRegistry({"odd": Odd}, discover=False)


# --- where it is called --------------------------------------------------------------------------------------------
def test_load_checked_refuses_a_bad_sink_and_no_registry_is_made_without_sinks(tmp_path, monkeypatch):
    from collector.sinks import registry as kinds

    monkeypatch.chdir(tmp_path)
    bad = write_env(tmp_path / "bad.env", **HOOK, SINK_HOOK_URL="http://hooks.example/in")
    with pytest.raises(SettingsError, match="SINK_HOOK_URL"):
        load_checked(env_file=bad)
    good = write_env(tmp_path / "good.env", **HOOK, SINK_HOOK_URL="https://hooks.example/in")
    assert load_checked(env_file=good).sinks == ("hook",)

    def exploding(*args, **kwargs):
        raise AssertionError("no registry is made without sinks")

    monkeypatch.setattr(kinds, "SinkRegistry", exploding)
    check_sinks(settings_with())
    check_sinks(settings_with(SINKS=""))
