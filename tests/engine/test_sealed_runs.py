"""Passes over networks whose tokens are sealed at rest (TOKEN_KEY): the connector gets the opened token, every
token the collector writes is sealed, a plain one is sealed at its network's next save (never over a token
another program wrote meanwhile), an old key's are moved to the current key, and a token no key opens is an error
on its network alone. Without a key the documents are byte for byte what the collector wrote before sealing."""

from __future__ import annotations

import base64
import logging
import random
from datetime import timedelta

import bson
import pytest

from collector.engine import Collector
from collector.engine import run as run_module
from collector.engine import saving as saving_module
from collector.engine.registry import Registry
from collector.engine.store import Store, sealing
from collector.engine.store import networks as store_networks
from collector.engine.store.filters import state_update
from collector.engine.store.sealing import Keys, key_id, open_value, seal_value
from collector.sdk.connector import Connector, Result
from collector.sdk.errors import TokenExpired, Unauthorized

from helpers import T0, BulkCollection, FixedRefresh, add_network, network

A, B, C = (base64.b64encode(bytes([seed]) * 32).decode() for seed in (5, 6, 7))
TOKENS = {
    "ann@x.test": "tok-ann-0123456789abcdef",
    "bo@x.test": "tok-bo-0123456789abcdef",
    "cy@x.test": "tok-cy-012345678",
}


class Echo(Connector):
    """One item per run, refused unless the network's opened token is its user's."""

    name = "echo"
    seen: list[str] = []

    def initial(self, job):
        Echo.seen.append(job.token)
        if job.token != TOKENS.get(job.network["user"]):
            raise Unauthorized("401 wrong token", 401)
        item = {"itemId": f"{job.network['user']}-{job.state_int('page', 1)}", "source": "https://x.test/1"}
        return Result([item], {"page": job.state_int("page", 1) + 1})

    def normal(self, job):
        return self.initial(job)


class Rotating(Connector):
    """Tokens expire; a refresh rotates both."""

    name = "rotating"
    token_refresh = FixedRefresh({"accessToken": "new-access-token-1", "refreshToken": "new-refresh-token-1"})

    def initial(self, job):
        if job.token == "old-access-token-1":
            raise TokenExpired("401", 401)
        return Result([{"itemId": "1", "source": "https://x.test/1"}], {"cursor": "c2"})

    def normal(self, job):
        return self.initial(job)


REGISTRY = {"echo": Echo, "rotating": Rotating}


def collector(db, settings, **keys):
    environ = {"token_key": keys.get("key", ""), "token_keys_old": keys.get("old", "")}
    return Collector(db, settings.with_(**environ), registry=Registry(REGISTRY), rng=random.Random(4), concurrency=1)


def seal(doc_id, plain, name="accessToken", key=A):
    return seal_value(plain, network_id=doc_id, name=name, keys=Keys.of(key))


def opened(doc, name="accessToken", *keys):
    return open_value(doc[name], network_id=doc["_id"], name=name, keys=Keys.of(keys[0] if keys else A, keys[1:]))


def echo_network(db, user, **fields):
    return add_network(db, user=user, service="echo", accessToken=TOKENS[user], **fields)


def sealed_in_place(db, doc, key=A, name="accessToken"):
    value = seal(doc["_id"], doc[name], name, key)
    db.networks.update_one({"_id": doc["_id"]}, {"$set": {name: value}})
    return value


def test_a_pass_over_sealed_plain_and_unopenable_networks_runs_each_on_its_own(db, settings, caplog):
    caplog.set_level(logging.DEBUG)
    Echo.seen = []
    ann, bo, cy = (echo_network(db, user) for user in TOKENS)
    ann_sealed = sealed_in_place(db, ann)
    cy_sealed = sealed_in_place(db, cy, key=C)  # a key this collector does not have
    report = collector(db, settings, key=A).run_pass("initial", now=T0)
    assert report.by_status == {"ok": 2, "sealed": 1}
    assert sorted(Echo.seen) == sorted([TOKENS["ann@x.test"], TOKENS["bo@x.test"]])  # opened, never the seal
    ann_now, bo_now, cy_now = (network(db, d) for d in (ann, bo, cy))
    assert ann_now["accessToken"] == ann_sealed  # sealed with the current key already: left as it was
    assert key_id(bo_now["accessToken"]) == Keys.of(A).current.kid and opened(bo_now) == TOKENS["bo@x.test"]
    assert ann_now["page"] == bo_now["page"] == 2 and db.items.count_documents({}) == 2
    error = cy_now["lastError"]
    assert error["kind"] == "sealed" and error["message"].startswith("TOKEN_KEY cannot open accessToken")
    assert Keys.of(C).current.kid in error["message"] and "TOKEN_KEYS_OLD" in error["message"]
    assert cy_now["accessToken"] == cy_sealed and "leaseToken" not in cy_now and cy_now["errors"] == 1
    logs = caplog.text + str(cy_now)
    assert not any(token in logs for token in TOKENS.values())
    assert not any(value in caplog.text for value in (ann_sealed, cy_sealed, bo_now["accessToken"]))


def test_a_network_no_key_opens_backs_off_and_is_never_disabled_for_it(db, settings):
    cy = echo_network(db, "cy@x.test")
    sealed_in_place(db, cy, key=C)
    engine = collector(db, settings, key=A)
    now = T0
    for _ in range(settings.max_errors + 2):
        report = engine.run_pass("initial", now=now)
        assert report.by_status == {"sealed": 1}
        now = network(db, cy)["scheduledTo"] + timedelta(seconds=1)
    state = network(db, cy)
    assert state.get("disabled") is None and state["errors"] == settings.max_errors + 2
    assert state["scheduledTo"] - state["lastExecution"] > timedelta(seconds=settings.backoff_base)  # backed off
    again = collector(db, settings, key=A, old=C).run_pass("initial", now=now)  # the key given back: it runs
    assert again.by_status == {"ok": 1} and network(db, cy)["errors"] == 0
    assert key_id(network(db, cy)["accessToken"]) == Keys.of(A).current.kid  # and is moved to the current key


def test_an_old_keys_tokens_open_and_move_to_the_current_key_at_the_save(db, settings):
    ann = echo_network(db, "ann@x.test")
    sealed_in_place(db, ann, key=B)
    report = collector(db, settings, key=A, old=B).run_pass("initial", now=T0)
    assert report.by_status == {"ok": 1}
    state = network(db, ann)
    assert key_id(state["accessToken"]) == Keys.of(A).current.kid and opened(state) == TOKENS["ann@x.test"]


@pytest.mark.parametrize("sealed", [True, False])
def test_tokens_a_refresh_obtains_are_sealed_and_fenced_on_the_refresh_token_as_stored(db, settings, sealed):
    doc = add_network(db, service="rotating", accessToken="old-access-token-1", refreshToken="old-refresh-token-1")
    if sealed:
        sealed_in_place(db, doc)
        sealed_in_place(db, doc, name="refreshToken")
    engine = collector(db, settings, key=A)
    saved = []
    original = engine.store.save_tokens
    engine.store.save_tokens = lambda *args: saved.append(original(*args)) or saved[-1]
    report = engine.run_pass("initial", now=T0)
    assert report.by_status == {"ok": 1} and saved == [True]  # the fence matched the refresh token as stored
    state = network(db, doc)
    assert opened(state) == "new-access-token-1" and opened(state, "refreshToken") == "new-refresh-token-1"
    assert state["cursor"] == "c2" and "new-access-token-1" not in str(state)


def test_without_a_key_a_refresh_writes_plain_tokens_as_before(db, settings):
    doc = add_network(db, service="rotating", accessToken="old-access-token-1", refreshToken="old-refresh-token-1")
    assert collector(db, settings).run_pass("initial", now=T0).by_status == {"ok": 1}
    state = network(db, doc)
    assert (state["accessToken"], state["refreshToken"]) == ("new-access-token-1", "new-refresh-token-1")


@pytest.mark.parametrize("bulk", [False, True])
def test_a_plain_token_another_program_replaced_meanwhile_is_never_written_over(db, settings, bulk):
    ann, bo = echo_network(db, "ann@x.test"), echo_network(db, "bo@x.test")
    engine = collector(db, settings, key=A)
    if bulk:
        engine.store.mongomock = False
        engine.store.networks = BulkCollection(db.networks)
    original = engine.store.save_states

    def app_reauthorised_meanwhile(writes):
        if any(write[0] == ann["_id"] for write in writes):  # between the claim and the save of ann's network
            db.networks.update_one({"_id": ann["_id"]}, {"$set": {"accessToken": "tok-from-the-app-42"}})
        return original(writes)

    engine.store.save_states = app_reauthorised_meanwhile
    report = engine.run_pass("initial", now=T0)
    assert report.by_status == {"ok": 2} and report.stale == 0
    ann_now, bo_now = network(db, ann), network(db, bo)
    assert ann_now["accessToken"] == "tok-from-the-app-42"  # kept as the app wrote it: sealed at the next save
    assert ann_now["page"] == 2 and "leaseToken" not in ann_now  # the state saved all the same, the lease released
    assert opened(bo_now) == TOKENS["bo@x.test"] and bo_now["page"] == 2


def test_a_stale_epoch_still_fences_a_write_that_seals(db, settings):
    store = Store(db, Keys.of(A))
    store.mongomock = False
    store.networks = BulkCollection(db.networks)
    docs = [echo_network(db, user, leaseEpoch=3) for user in TOKENS]
    db.networks.update_one({"_id": docs[1]["_id"]}, {"$set": {"leaseEpoch": 4}})  # reclaimed by another
    writes = [(d["_id"], {"page": 9}, (), 3, {"accessToken": (d["accessToken"], d["accessToken"])}) for d in docs]
    assert store.save_states(writes) == [True, False, True]
    states = [network(db, d) for d in docs]
    assert [s.get("page") for s in states] == [9, None, 9]
    assert states[1]["accessToken"] == docs[1]["accessToken"] and opened(states[0]) == docs[0]["accessToken"]


def run_both(db, settings, make):
    """A pass over the networks `make` adds, at a fixed time and jitter: the documents after it, as BSON."""
    make(db)
    engine = collector(db, settings)
    engine.run_pass("initial", now=T0)
    engine.run_pass("initial", now=T0 + timedelta(hours=1))
    return [bson.encode(d) for d in db.networks.find().sort("user")] + [bson.encode(d) for d in db.items.find()]


def seed(db):
    for user in TOKENS:
        echo_network(db, user, _id=f"net-{user}", accessTokenSecret="secret-0123456789")
    add_network(
        db,
        _id="net-rot",
        user="rot@x.test",
        service="rotating",
        accessToken="old-access-token-1",
        refreshToken="old-refresh-token-1",
    )
    db.networks.insert_one({"_id": "net-odd", "user": "z@x.test", "service": "echo", "accessToken": 7})


def test_without_a_key_the_documents_are_byte_for_byte_those_of_the_collector_without_sealing(settings, monkeypatch):
    import mongomock

    with_sealing = mongomock.MongoClient(tz_aware=True)["a"]
    now_plain = run_both(with_sealing, settings, seed)
    monkeypatch.setattr(run_module, "open_network", lambda network, keys: (network, None))
    monkeypatch.setattr(saving_module, "reseal_plan", lambda network, keys: {})
    monkeypatch.setattr(store_networks, "seal_credentials", lambda fields, **_: dict(fields))
    monkeypatch.setattr(store_networks, "sealed_state_write", lambda _, *write: (*state_update(*write[:4]), {}))
    monkeypatch.setattr(sealing, "seal_value", lambda *_, **__: pytest.fail("sealed without a key"))
    without = mongomock.MongoClient(tz_aware=True)["b"]
    assert run_both(without, settings, seed) == now_plain
    assert len(now_plain) > 5 and all(b"sealed:" not in doc for doc in now_plain)


@pytest.mark.parametrize(
    "value",
    [
        "sealed:",
        "sealed:v1:AAAAAAAA:" + "A" * 40,
        "sealed:v1:" + "x" * 100_000,
        "sealed:v2:AAAAAAAA:AAAA",
        "sealed:\x00\u202e\n",
    ],
)
def test_a_hostile_sealed_looking_token_is_an_error_on_its_network_and_the_others_run(db, settings, caplog, value):
    ann, bo = echo_network(db, "ann@x.test"), echo_network(db, "bo@x.test")
    db.networks.update_one({"_id": ann["_id"]}, {"$set": {"accessToken": value}})
    report = collector(db, settings, key=A).run_pass("initial", now=T0)
    assert report.by_status == {"ok": 1, "sealed": 1}
    error = network(db, ann)["lastError"]
    assert error["kind"] == "sealed" and error["message"].startswith("TOKEN_KEY cannot open accessToken")
    assert len(error["message"]) < 200 and network(db, ann)["accessToken"] == value
    assert opened(network(db, bo)) == TOKENS["bo@x.test"]
    assert value[10:60] not in caplog.text or len(set(value[10:60])) <= 1


@pytest.mark.parametrize("value", [7, None, ["tok"], {"sealed": "v1"}, b"sealed:v1:AAAAAAAA:AAAA", True])
def test_a_token_of_another_type_is_malformed_as_before_with_or_without_a_key(db, settings, value):
    ann = echo_network(db, "ann@x.test")
    db.networks.update_one({"_id": ann["_id"]}, {"$set": {"accessToken": value}})
    for keys in ({}, {"key": A}):
        db.networks.update_one({"_id": ann["_id"]}, {"$set": {"scheduledTo": T0}})
        report = collector(db, settings, **keys).run_pass("initial", now=T0)
        assert report.by_status == {"malformed": 1} and network(db, ann)["accessToken"] == value
