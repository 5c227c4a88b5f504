"""Tokens sealed at rest, end to end: real collector processes with TOKEN_KEY_FILE (the key, then an old key), a
MongoDB stand-in on a loopback socket (real pymongo, so the batched state writes of a real server), a fake GitHub on
loopback. Sealed, plain, old-key and unopenable networks in one pass; then `networks reseal` with the key rotated;
no token in any output or log."""

from __future__ import annotations

import base64

import pytest
from pymongo import MongoClient

from collector.devtools.fakeapi import FakeGitHub, FakeServer, make_stars
from collector.devtools.mongowire import WireServer
from collector.engine.store.sealing import Keys, key_id, open_value, seal_value

from helpers.proc import run, write_env

pytestmark = pytest.mark.system

A, B, C, D = (base64.b64encode(bytes([seed]) * 32).decode() for seed in (71, 72, 73, 74))
KID = {k: Keys.of(k).current.kid for k in (A, B, C, D)}
USERS = {"ann": A, "bob": None, "cy": C, "dee": B}  # the key each network's token is sealed with (None: plain)


def token(name: str) -> str:
    return f"gho_{name}Token0123456789abcdef"


@pytest.fixture
def world(tmp_path):
    fake = FakeGitHub()
    wire = WireServer().start()
    client = MongoClient(wire.uri, tz_aware=True, serverSelectionTimeoutMS=2000)
    db = client.get_default_database()
    for k, (name, key) in enumerate(USERS.items()):
        fake.add_user(token(name), make_stars(30, seed=k, id_pool=5_000))
        doc = {"user": f"{name}@x.test", "service": "github", "accessToken": token(name), "mode": "initial"}
        doc["_id"] = db.networks.insert_one(doc).inserted_id
        if key:
            sealed = seal_value(token(name), network_id=doc["_id"], name="accessToken", keys=Keys.of(key))
            db.networks.update_one({"_id": doc["_id"]}, {"$set": {"accessToken": sealed}})
    keyfile = tmp_path / "token.key"
    keyfile.write_text(f"# the collector's token key, then an old one\n{A}\n{B}\n")
    with FakeServer(fake) as api:
        env = write_env(
            tmp_path / "collector.env",
            MONGODB_URI=f"{wire.uri}?serverSelectionTimeoutMS=2000",
            GITHUB_API_URL=api,
            TOKEN_KEY_FILE=keyfile,
            LOG_LEVEL="DEBUG",
        )
        yield {"db": db, "env": env, "keyfile": keyfile}
    client.close()
    wire.stop()


def by_user(db) -> dict[str, dict]:
    return {d["user"].split("@")[0]: d for d in db.networks.find()}


def opens(doc: dict, *keys: str) -> str:
    return open_value(doc["accessToken"], network_id=doc["_id"], name="accessToken", keys=Keys.of(keys[0], keys[1:]))


def test_a_pass_and_a_rotation_by_real_processes(world):
    db, env = world["db"], world["env"]
    cy_before = by_user(db)["cy"]["accessToken"]
    done = run(["--mode", "initial", "--once"], env)
    output = done.stdout + done.stderr
    networks = by_user(db)
    for name in ("ann", "bob", "dee"):  # opened, run, and every token now sealed with the current key
        assert networks[name]["page"] == 2 and key_id(networks[name]["accessToken"]) == KID[A], (name, output)
        assert opens(networks[name], A) == token(name)
    assert networks["cy"]["lastError"]["kind"] == "sealed" and KID[C] in networks["cy"]["lastError"]["message"]
    assert networks["cy"]["accessToken"] == cy_before and "page" not in networks["cy"]
    assert db.items.count_documents({}) == 90
    assert not any(token(name) in output for name in USERS) and not any(k in output for k in (A, B, C))
    assert "sealed" in output  # the run line names the network's status

    # rotate: D is the key now, A (and C, found again) the old ones; reseal moves every token to D
    world["keyfile"].write_text(f"{D}\n{A}\n{C}\n")
    resealed = run(["networks", "reseal"], env)
    assert resealed.returncode == 0, resealed.stdout + resealed.stderr
    assert "4 networks: wrote 4 — 0 tokens sealed, 4 moved from an old key" in resealed.stdout
    again = run(["networks", "reseal"], env)
    assert again.returncode == 0 and "wrote 0" in again.stdout and "4 already as they should be" in again.stdout
    networks = by_user(db)
    for name in USERS:
        assert key_id(networks[name]["accessToken"]) == KID[D] and opens(networks[name], D) == token(name)
    shown = run(["networks", "show", "ann@x.test"], env)
    texts = resealed.stdout + resealed.stderr + again.stdout + shown.stdout + shown.stderr
    assert '"accessToken": "***"' in shown.stdout
    assert not any(token(name) in texts or networks[name]["accessToken"] in texts for name in USERS)


def test_a_bad_key_file_stops_the_collector_in_one_line_before_anything_runs(world):
    world["keyfile"].write_text(f"{A}\nnot-a-key-at-all\n")
    done = run(["--mode", "initial", "--once"], world["env"])
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("collector: setting TOKEN_KEY_FILE: line 2 of") and A not in lines[0]
    assert world["db"].networks.count_documents({"lastExecution": {"$exists": True}}) == 0
