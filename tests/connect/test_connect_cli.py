"""`collector connect` end to end in the process: the flow against a real authorisation server (Authlib's, on a
real socket), the connector's identity call, the network written (mongomock); renewal of an unauthorised network,
another account refused, the settings missing, and no secret in the output."""

from __future__ import annotations

import os
import ssl
import sys
import threading

import pytest
import requests

from collector import cli

from helpers.authserver import AuthServer, serving
from helpers.proc import wait_until
from helpers.tlsservers import Authority

EMAIL = "ann@example.com"


@pytest.fixture
def github(monkeypatch):
    app = AuthServer()
    app.add_client("public-app")
    app.store.interval = 1
    with serving(app) as served:
        monkeypatch.setenv("GITHUB_API_URL", served.url)
        monkeypatch.setenv("GITHUB_CLIENT_ID", "public-app")
        yield served


def approving(server, allow: bool = True) -> threading.Thread:
    """The person: enters the code shown as soon as there is one."""

    def person() -> None:
        wait_until(lambda: server.store.devices, timeout=60)
        (code,) = server.store.devices.values()
        decision = "allow" if allow else "deny"
        requests.post(f"{server.url}/device", data={"user_code": code["user_code"], "decision": decision}, timeout=10)

    thread = threading.Thread(target=person, daemon=True)
    thread.start()
    return thread


def secrets_of(server) -> list[str]:
    found = [v for t in server.store.tokens.values() for v in (t.access_token, t.refresh_token)]
    return found + [c["device_code"] for c in server.store.devices.values()] + list(server.store.codes)


def test_connect_github_writes_the_network_and_prints_no_secret(cli_db, github, capsys):
    approving(github)
    assert cli.main(["connect", "github", "--user", EMAIL, "--no-browser", "--timeout", "60"]) == 0
    out, err = capsys.readouterr()
    (network,) = cli_db.networks.find()
    assert network["user"] == EMAIL and network["service"] == "github" and network["mode"] == "initial"
    assert network["accessToken"] in github.store.tokens and network["accountName"] == "octo"
    (code,) = github.store.devices.values()
    assert code["user_code"] in out and f"{github.url}/device" in out and "octo" in out
    for secret in secrets_of(github):
        assert secret not in out + err


def test_a_denied_code_is_one_line_and_exit_1(cli_db, github, capsys):
    approving(github, allow=False)
    assert cli.main(["connect", "github", "--user", EMAIL, "--no-browser", "--timeout", "60"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "denied" in err and cli_db.networks.count_documents({}) == 0


def test_an_unauthorized_network_is_renewed_in_place(cli_db, github, capsys):
    old = {"user": EMAIL, "service": "github", "accessToken": "revoked-token", "accountId": "1", "page": 7}
    old |= {"unauthorized": True, "lastError": {"kind": "unauthorized", "message": "401"}, "mode": "initial"}
    network_id = cli_db.networks.insert_one(old).inserted_id
    approving(github)
    assert cli.main(["connect", "github", "--user", EMAIL, "--no-browser", "--timeout", "60"]) == 0
    (network,) = cli_db.networks.find()
    assert network["_id"] == network_id and "unauthorized" not in network and "lastError" not in network
    assert network["accessToken"] in github.store.tokens and network["page"] == 7  # the walk kept
    assert "renewed" in capsys.readouterr().out


@pytest.mark.parametrize("fields", [{"accountId": "2"}, {"accountId": "77", "accountName": "someone"}])
def test_a_renewal_with_another_account_is_refused(cli_db, github, capsys, fields):
    old = {"user": EMAIL, "service": "github", "accessToken": "revoked-token", "unauthorized": True, **fields}
    cli_db.networks.insert_one(old)
    approving(github)
    assert cli.main(["connect", "github", "--user", EMAIL, "--no-browser", "--timeout", "60"]) == 1
    err = capsys.readouterr().err
    assert "not the network's" in err and "nothing saved" in err
    (network,) = cli_db.networks.find()
    assert network["accessToken"] == "revoked-token" and network["unauthorized"] is True


def test_a_working_network_is_not_authorised_again_without_replace(cli_db, github, capsys):
    cli_db.networks.insert_one({"user": EMAIL, "service": "github", "accessToken": "working-token"})
    assert cli.main(["connect", "github", "--user", EMAIL, "--no-browser"]) == 1
    assert "--replace" in capsys.readouterr().err
    assert github.store.devices == {}  # refused before the flow began


@pytest.mark.parametrize(
    "service, names", [("github", ["GITHUB_CLIENT_ID"]), ("youtube", ["YOUTUBE_CLIENT_ID", "YOUTUBE_CLIENT_SECRET"])]
)
def test_missing_settings_are_named_with_where_to_register(cli_db, monkeypatch, capsys, service, names):
    monkeypatch.delenv("GITHUB_CLIENT_ID", raising=False)
    assert cli.main(["connect", service, "--user", EMAIL, "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(n in err for n in names) and "https://" in err
    assert cli_db.networks.count_documents({}) == 0


# --- over TLS, an https instance: Mastodon (its app registered once per instance) and Bluesky ------------------------
@pytest.fixture
def instance(monkeypatch, tmp_path):
    authority = Authority()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.leaf().configure_cert(context)
    bundle = str(authority.bundle(tmp_path))
    monkeypatch.setenv("CA_BUNDLE", bundle)
    monkeypatch.setenv("ALLOW_PRIVATE_HOSTS", "true")
    app = AuthServer()
    with serving(app, tls=context) as served:
        served.bundle = bundle
        yield served


class Terminal:
    """Standard input and output of the command, with the person behind them: a line written to standard output
    that holds an address to open makes them open it (`on_address`) and paste back what `on_address` returns."""

    def __init__(self, monkeypatch, on_address=None, typed: str = ""):
        read, self.write_end = os.pipe()
        monkeypatch.setattr(sys, "stdin", os.fdopen(read, "r"))
        monkeypatch.setattr(sys, "stdout", self)
        self.text, self.on_address = "", on_address
        if typed:
            os.write(self.write_end, typed.encode())

    def write(self, text: str) -> int:
        self.text += text
        for word in text.split():
            if "/authorize?" in word and self.on_address:
                answer = self.on_address(word)
                threading.Thread(target=os.write, args=(self.write_end, (answer() + "\n").encode())).start()
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_mastodon_registers_its_app_once_per_instance_and_connects(cli_db, instance, monkeypatch, capsys):
    def person(address: str):
        return lambda: instance.decide(address, verify=instance.bundle)

    args = ["connect", "mastodon", "--user", EMAIL, "--instance", instance.url, "--no-browser", "--timeout", "30"]
    terminal = Terminal(monkeypatch, on_address=person)
    assert cli.main(args) == 0, capsys.readouterr().err
    (network,) = cli_db.networks.find()
    assert network["instanceUrl"] == instance.url and network["accessToken"] in instance.store.tokens
    (registered,) = cli_db.connectApps.find()
    assert registered["_id"] == instance.url and registered["clientId"] in instance.store.clients
    assert registered["clientSecret"] not in terminal.text + capsys.readouterr().err
    assert "Registered the application" in terminal.text
    cli_db.networks.update_one({}, {"$set": {"unauthorized": True}})
    terminal = Terminal(monkeypatch, on_address=person)
    assert cli.main(args) == 0
    assert "Registered" not in terminal.text and cli_db.connectApps.count_documents({}) == 1  # the same app
    assert len(instance.store.clients) == 1


def test_with_a_token_key_mastodons_client_secret_and_the_token_are_sealed_and_the_app_reused(
    cli_db, instance, monkeypatch, capsys
):
    import base64

    from collector.engine.store.sealing import is_sealed

    monkeypatch.setenv("TOKEN_KEY", base64.b64encode(bytes(range(1, 33))).decode())

    def person(address: str):
        return lambda: instance.decide(address, verify=instance.bundle)

    args = ["connect", "mastodon", "--user", EMAIL, "--instance", instance.url, "--no-browser", "--timeout", "30"]
    Terminal(monkeypatch, on_address=person)
    assert cli.main(args) == 0, capsys.readouterr().err
    (registered,) = cli_db.connectApps.find()
    (network,) = cli_db.networks.find()
    assert is_sealed(registered["clientSecret"]) and is_sealed(network["accessToken"])
    assert not set(instance.store.tokens) & {network["accessToken"]}
    cli_db.networks.update_one({}, {"$set": {"unauthorized": True}})
    terminal = Terminal(monkeypatch, on_address=person)
    assert cli.main(args) == 0  # the sealed secret opened: the same application, not registered again
    assert "Registered" not in terminal.text and len(instance.store.clients) == 1
    monkeypatch.setenv("TOKEN_KEY", base64.b64encode(bytes(range(2, 34))).decode())  # another key: cannot open it
    cli_db.networks.update_one({}, {"$set": {"unauthorized": True}})
    terminal = Terminal(monkeypatch, on_address=person)
    assert cli.main(args) == 0 and "Registered the application" in terminal.text  # registered anew, no crash
    assert len(instance.store.clients) == 2


@pytest.mark.parametrize("password, code", [("app-pass-1234", 0), ("wrong-password", 1)])
def test_bluesky_takes_the_app_password_from_standard_input(cli_db, instance, monkeypatch, capsys, password, code):
    instance.store.sessions["alice.test"] = "app-pass-1234"
    terminal = Terminal(monkeypatch, typed=password + "\n")
    args = ["connect", "bluesky", "--user", EMAIL, "--handle", "alice.test", "--pds", instance.url, "--timeout", "30"]
    assert cli.main(args) == code
    err = capsys.readouterr().err
    assert password not in terminal.text + err
    if code == 0:
        (network,) = cli_db.networks.find()
        assert network["did"] == "did:plc:abc123" and network["accessToken"] in instance.store.jwts
        assert network["refreshToken"].startswith("rj-") and network["pdsUrl"] == instance.url
        assert network["refreshToken"] not in terminal.text
    else:
        assert "refused the handle or the app password" in err and cli_db.networks.count_documents({}) == 0


@pytest.mark.parametrize(
    "args, words",
    [
        (["mastodon"], "--instance"),
        (["mastodon", "--instance", "http://social.example"], "https"),
        (["mastodon", "--instance", "https://user:pw@social.example"], "plain"),
        (["bluesky"], "--handle"),
        (["bluesky", "--handle", "a.test", "--pds", "ftp://pds.example"], "--pds"),
    ],
)
def test_a_missing_or_unusable_option_is_exit_2_before_any_request(cli_db, capsys, args, words):
    assert cli.main(["connect", *args, "--user", EMAIL, "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "pw" not in err
    assert cli_db.networks.count_documents({}) == 0 and cli_db.connectApps.count_documents({}) == 0


def test_an_instance_whose_name_does_not_resolve_is_one_line(cli_db, capsys):
    args = ["connect", "mastodon", "--user", EMAIL, "--instance", "https://nowhere.invalid", "--no-browser"]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--instance" in err and "nowhere.invalid" in err
