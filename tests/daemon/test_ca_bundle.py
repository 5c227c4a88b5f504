"""CA_BUNDLE: the certificate authorities every TLS client trusts, resolved once (collector/settings/trust.py) from
CA_BUNDLE, else REQUESTS_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR; checked at start (a path that cannot be used:
one line naming the variable, exit 2) and shown with where it came from by `--check-config`. (The clients trusting
it over real TLS: tests/net/test_transport_failures.py.)"""

from __future__ import annotations

import json

import pytest

from collector import cli
from collector.settings import SettingsError, load_settings, settings_for_tests
from collector.settings.trust import DEFAULT, SOURCES, Authorities, authorities, pool_options

from helpers import bind_socket
from helpers.tlsservers import Authority


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory):
    return str(Authority().bundle(tmp_path_factory.mktemp("ca")))


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in SOURCES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    return monkeypatch


def load(**environ: str):
    return load_settings(environ=environ, env="test", read_dotenv=False)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, Authorities()),
        ({"CA_BUNDLE": "/a", "REQUESTS_CA_BUNDLE": "/b", "SSL_CERT_FILE": "/c"}, Authorities("/a", "CA_BUNDLE")),
        (
            {"CA_BUNDLE": "  ", "REQUESTS_CA_BUNDLE": "/b", "SSL_CERT_DIR": "/d"},
            Authorities("/b", "REQUESTS_CA_BUNDLE"),
        ),
        ({"SSL_CERT_DIR": "/d", "SSL_CERT_FILE": " /c "}, Authorities("/c", "SSL_CERT_FILE")),
        ({"SSL_CERT_DIR": "/etc/ssl/certs"}, Authorities("/etc/ssl/certs", "SSL_CERT_DIR")),
        ({"CURL_CA_BUNDLE": "/x", "CA_BUNDLE": ""}, Authorities()),
    ],
)
def test_the_first_that_names_a_path_wins(environ, expected):
    assert authorities(environ) == expected


def test_a_usable_file_or_directory_is_resolved_and_given_to_each_kind_of_client(ca_pem, tmp_path):
    for environ, path, source in [
        ({"CA_BUNDLE": ca_pem, "SSL_CERT_FILE": "/nowhere"}, ca_pem, "CA_BUNDLE"),
        ({"SSL_CERT_FILE": ca_pem}, ca_pem, "SSL_CERT_FILE"),
        ({"REQUESTS_CA_BUNDLE": str(tmp_path)}, str(tmp_path), "REQUESTS_CA_BUNDLE"),
    ]:
        settings = load(**environ)
        assert settings.ca_bundle == path and settings.trusted() == Authorities(path, source)
    assert pool_options(ca_pem) == {"ca_certs": ca_pem}
    assert pool_options(str(tmp_path)) == {"ca_cert_dir": str(tmp_path)}
    assert pool_options("") == {} and settings_for_tests().ca_bundle == ""


def unusable_paths(tmp_path):
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    key_only = tmp_path / "key.pem"
    key_only.write_text("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n")
    sock = tmp_path / "sock"
    bind_socket(sock)
    return [
        (str(tmp_path / "missing.pem"), "does not exist"),
        (str(empty), "holds no PEM certificate"),
        (str(garbage), "holds no PEM certificate"),
        (str(key_only), "holds no PEM certificate"),
        (str(sock), "is neither a file nor a directory"),
    ]


@pytest.mark.parametrize("name", SOURCES)
def test_a_path_that_cannot_be_used_is_a_settings_error_naming_the_variable(tmp_path, name):
    for path, problem in unusable_paths(tmp_path):
        with pytest.raises(SettingsError) as caught:
            load(**{name: path})
        assert str(caught.value) == f"setting {name}: {path!r} {problem}"


def test_a_bundle_replaced_at_the_same_path_is_checked_again(ca_pem, tmp_path):
    """The verdict on a bundle is kept while the file stays the same (settings are read at every command and
    reload); a bundle replaced, emptied or removed is checked again."""
    path = tmp_path / "bundle.pem"
    good = open(ca_pem, "rb").read()
    for content, problem in [(good, ""), (b"", "holds no PEM certificate"), (good, ""), (None, "does not exist")]:
        if content is None:
            path.unlink()
        else:
            path.write_bytes(content)
        if problem:
            with pytest.raises(SettingsError, match=problem):
                load(CA_BUNDLE=str(path))
        else:
            assert load(CA_BUNDLE=str(path)).ca_bundle == str(path)


def test_a_nul_in_ca_bundle_is_refused_by_its_parser():
    with pytest.raises(SettingsError, match="setting CA_BUNDLE: invalid value"):
        load(CA_BUNDLE="/etc/ssl/a\x00b")


@pytest.mark.parametrize("argv", [["--check-config"], ["--mode", "initial", "--once"], ["status"], ["sinks", "list"]])
def test_every_command_stops_at_start_with_one_line_and_exit_2(clean_env, tmp_path, capsys, argv):
    for name, path in [("CA_BUNDLE", tmp_path / "gone.pem"), ("SSL_CERT_FILE", tmp_path / "nothing.pem")]:
        clean_env.setenv(name, str(path))
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err == f"collector: setting {name}: {str(path)!r} does not exist\n"
        clean_env.delenv(name)


def test_check_config_shows_the_authorities_in_effect_and_what_named_them(clean_env, ca_pem, tmp_path, capsys):
    shown = []
    for name, value in [
        (None, None),
        ("SSL_CERT_FILE", ca_pem),
        ("SSL_CERT_DIR", str(tmp_path)),
        ("CA_BUNDLE", ca_pem),
    ]:
        if name is not None:
            clean_env.setenv(name, value)
        assert cli.main(["--check-config"]) == 0
        shown.append(json.loads(capsys.readouterr().out)["CA_BUNDLE"])
    assert shown == [
        DEFAULT,
        f"{ca_pem} (from SSL_CERT_FILE)",
        f"{ca_pem} (from SSL_CERT_FILE)",  # a file set wins over a directory
        f"{ca_pem} (from CA_BUNDLE)",
    ]
