"""The way README and docs/connecting.md give a new operator, in real processes: an empty database (the project's
MongoDB stand-in, in a process of its own), `collector connect github --user EMAIL` (the device flow against
Authlib's server; the person enters the code meanwhile), then `collector --mode initial --once` collects the
person's stars (the project's fake GitHub API behind the same host). No document written by hand."""

from __future__ import annotations

import threading

import pymongo
import pytest
import requests

from collector.devtools.fakeapi import FakeGitHub, make_stars
from collector.devtools.mongowire import WireProcess

from helpers.authserver import AuthServer, serving
from helpers.proc import run, wait_until, write_env

pytestmark = pytest.mark.system
EMAIL = "ann@example.com"


def test_from_an_empty_database_to_a_person_s_github_stars(tmp_path):
    fake = FakeGitHub(quota=5000, window=3600)
    app = AuthServer()
    app.add_client("readme-app")
    app.store.interval = 1
    app.store.on_token = lambda token: fake.add_user(token, make_stars(130, seed=4))
    app.stars = fake
    with WireProcess() as uri, serving(app) as server:
        env = write_env(
            tmp_path / "collector.env", MONGODB_URI=uri, GITHUB_API_URL=server.url, GITHUB_CLIENT_ID="readme-app"
        )

        def person() -> None:
            wait_until(lambda: server.store.devices, timeout=60)
            (code,) = server.store.devices.values()
            requests.post(
                f"{server.url}/device", data={"user_code": code["user_code"], "decision": "allow"}, timeout=10
            )

        threading.Thread(target=person, daemon=True).start()
        connected = run(["connect", "github", "--user", EMAIL], env, timeout=120)
        assert connected.returncode == 0, connected.stderr
        (token,) = server.store.tokens
        assert "Connected github account octo" in connected.stdout and token not in connected.stdout + connected.stderr
        collected = run(["--mode", "initial", "--once"], env, timeout=120)
        assert collected.returncode == 0, collected.stderr
        client = pymongo.MongoClient(uri)
        try:
            db = client.get_default_database("likeastore")
            (network,) = db.networks.find()
            assert network["user"] == EMAIL and network["accountName"] == "octo" and network["mode"] == "initial", (
                network
            )
            assert db.items.count_documents({"user": EMAIL, "type": "github"}) == 100  # the first page, one run
        finally:
            client.close()
