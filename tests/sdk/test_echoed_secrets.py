"""Secrets servers echo: a refused token refresh quoting the client secret, an API error quoting the app key, a
long message cut where a secret sits — none of them reaches lastError or a log line, whatever the value; and a
MONGODB_URI that does not parse is masked before any parser sees it."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
import responses

from collector import cli, run_once
from collector.settings import SettingsError, load_settings, settings_for_tests

from helpers import T0, add_network

SECRETS = ["s3cr3t-Client-Secret-0001", "abcdef", "with spaces and ünïcode 42", "%2Fslash/and?query=1&x"]


@pytest.mark.parametrize("secret", SECRETS)
def test_a_refused_refresh_echoing_the_client_secret_never_stores_it(db, secret, caplog):
    settings = settings_for_tests(raw={"SPOTIFY_CLIENT_ID": "spotify-client-id", "SPOTIFY_CLIENT_SECRET": secret})
    doc = add_network(db, service="spotify", accessToken="expired-access-tok", refreshToken="refresh-tok-123456")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(responses.GET, "https://api.spotify.com/v1/me/tracks", status=401, json={"error": "expired"})
        long = "x" * 190  # the secret straddles the 200-character cut of a reason
        mock.add(
            responses.POST,
            "https://accounts.spotify.com/api/token",
            status=400,
            json={"error": f"{long}{secret} is not the client_secret (client_secret={secret})"},
        )
        with caplog.at_level(logging.DEBUG):
            run_once(db, "initial", settings, now=T0)
    stored = db.networks.find_one({"_id": doc["_id"]})
    text = json.dumps(stored["lastError"], default=str) + caplog.text
    assert stored["lastError"]["kind"] == "unauthorized"
    for fragment in {secret, secret[:6], secret[-6:]}:
        assert fragment not in text, fragment


@pytest.mark.parametrize("key", ["se-app-key-ABCDEF123", "key)))((", "k" * 40])
def test_an_api_error_echoing_the_app_key_never_stores_it(db, key):
    settings = settings_for_tests(raw={"STACKEXCHANGE_KEY": key})
    doc = add_network(db, service="stackoverflow", accessToken="se-access-token-1")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.GET,
            "https://api.stackexchange.com/2.3/me/favorites",
            status=400,
            json={"error_id": 400, "error_name": "bad_parameter", "error_message": f"key {key} is not valid for this"},
        )
        run_once(db, "initial", settings, now=T0 + timedelta(seconds=1))
    stored = db.networks.find_one({"_id": doc["_id"]})
    assert stored["lastError"]["kind"] == "badResponse"
    assert key not in json.dumps(stored["lastError"], default=str) and key[:6] not in stored["lastError"]["message"]


@pytest.mark.parametrize(
    "uri",
    [
        "mongodb://bob:pa/ss?word@db:27017/x",
        "mongodb://bob:p@ss@db/x",
        "mongodb://bob:s3cr3t?x@db/x?authSource=admin",
        "mongodb://bob:has#hash@db/x?bogusOption=1",
        "mongodb+srv://bob:sl/ash@cluster.example/x",
    ],
)
def test_a_uri_that_does_not_parse_never_shows_its_password(uri, tmp_path, monkeypatch, capsys):
    password = uri.split("://", 1)[1].rsplit("@", 1)[0].split(":", 1)[1]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("MONGODB_URI", uri)
    code = cli.main(["--check-config"])
    out = capsys.readouterr()
    assert password not in out.out + out.err
    try:
        load_settings(environ={"MONGODB_URI": uri}, env="test", read_dotenv=False)
    except SettingsError as exc:
        assert password not in str(exc) and code == 2
