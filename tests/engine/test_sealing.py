"""Sealing one value (engine/store/sealing.py): the round trip, the binding to a network and a field, tampering,
wrong and old keys, and hostile values, each a SealError naming the field and the key setting, never a value."""

from __future__ import annotations

import base64

import pytest
from bson import Int64, ObjectId
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from collector.engine.store.sealing import (
    HEAD,
    MAX_SEALED,
    NO_KEYS,
    Keys,
    OpenedNetwork,
    SealError,
    is_sealed,
    key_id,
    open_network,
    open_value,
    reseal_plan,
    seal_credentials,
    seal_value,
)

from helpers import examples

A, B, C = (base64.b64encode(bytes([seed]) * 32).decode() for seed in (11, 22, 33))
KEYS = Keys.of(A)
ID = ObjectId("6b0dfb31827338304b278b96")
TOKEN = "ghp_SealMe0123456789abcdefghijklmnop"


def sealed(plain=TOKEN, network_id=ID, name="accessToken", keys=KEYS):
    return seal_value(plain, network_id=network_id, name=name, keys=keys)


def opened(value, network_id=ID, name="accessToken", keys=KEYS):
    return open_value(value, network_id=network_id, name=name, keys=keys)


def refused(value, network_id=ID, name="accessToken", keys=KEYS) -> str:
    with pytest.raises(SealError) as caught:
        opened(value, network_id, name, keys)
    message = str(caught.value)
    assert message.startswith(f"TOKEN_KEY cannot open {name}: ") and "\n" not in message
    payload = value[len(HEAD) + 9 :]
    assert TOKEN not in message and (len(payload) < 16 or payload[:16] not in message)  # no token, no value
    return message


@pytest.mark.parametrize(
    "plain", [TOKEN, "x", "é-ünïcode-🙂", "a" * 8192, "oauth_token=1&oauth_token_secret=2", "sealed-looking: no"]
)
def test_a_sealed_value_opens_to_what_was_sealed_and_never_holds_it(plain):
    value = sealed(plain)
    assert value.startswith(f"{HEAD}{KEYS.current.kid}:") and is_sealed(value) and key_id(value) == KEYS.current.kid
    assert (len(plain) < 8 or plain not in value) and opened(value) == plain  # (a short text may occur by chance)
    assert sealed(plain) != value  # a fresh nonce every time: equal tokens are not told apart by their seals


@pytest.mark.parametrize("network_id", [ID, "ann-github", 7, Int64(2**40), {"s": "github", "i": 7}, None])
def test_a_value_is_bound_to_its_network_and_field(network_id):
    value = sealed(network_id=network_id)
    assert opened(value, network_id) == TOKEN
    others = [ObjectId("6b0dfb31827338304b278b97"), "ann-github2", 8, str(network_id), {"i": 7, "s": "github"}]
    for other in others:
        if other != network_id:
            assert "refuses it" in refused(value, other)  # copied onto another document
    for name in ("refreshToken", "accessTokenSecret", "accesstoken"):
        assert "refuses it" in refused(value, network_id, name)  # copied onto another field


def test_an_altered_value_is_refused():
    value = sealed()
    head, payload = value[: len(HEAD) + 9], value[len(HEAD) + 9 :]
    raw = bytearray(base64.urlsafe_b64decode(payload))
    for index in (0, 12, len(raw) // 2, len(raw) - 1):  # nonce, ciphertext, tag
        spoilt = bytearray(raw)
        spoilt[index] ^= 1
        assert "refuses it" in refused(head + base64.urlsafe_b64encode(bytes(spoilt)).decode())
    assert "refuses it" in refused(head + base64.urlsafe_b64encode(bytes(raw[:-1])).decode())  # cut short
    other = Keys.of(B)
    moved = value.replace(KEYS.current.kid, other.current.kid)  # another key's id written over
    assert "refuses it" in refused(moved, keys=Keys.of(B, [A]))
    assert "format v2" in refused(value.replace(":v1:", ":v2:"))


def test_a_wrong_or_missing_key_names_the_key_settings():
    value = sealed()
    assert "neither TOKEN_KEY nor TOKEN_KEYS_OLD holds it" in refused(value, keys=Keys.of(B, [C]))
    assert "TOKEN_KEY is not set" in refused(value, keys=NO_KEYS)
    assert KEYS.current.kid in refused(value, keys=NO_KEYS)  # the key's id, which tells which key to find


def test_an_old_key_still_opens_and_the_current_one_seals():
    old = sealed()
    rotated = Keys.of(B, [A])
    assert opened(old, keys=rotated) == TOKEN
    assert key_id(sealed(keys=rotated)) == rotated.current.kid != KEYS.current.kid
    assert Keys.of("", [A]).current is None and opened(old, keys=Keys.of("", [A])) == TOKEN  # opening only
    with pytest.raises(SealError, match="TOKEN_KEY is not set"):
        sealed(keys=Keys.of("", [A]))


@pytest.mark.parametrize(
    "value",
    [
        "sealed:",
        "sealed:v1:",
        "sealed:v1:abc:def",
        "sealed:v1:AAAAAAAA:",
        "sealed:v1:AAAAAAAA:!!!!",
        "sealed:v1:AAAAAAAA:AAAA",
        "sealed:garbage and more garbage",
        "sealed:v1:AAAAAAAA:" + "A" * (MAX_SEALED + 10),
        "sealed:" + "\x00" * 5000,
        "sealed:v99999:AAAAAAAA:AAAA",
    ],
)
def test_a_sealed_looking_value_that_is_no_sealed_value_is_refused_in_one_line(value):
    keys = Keys.of(A, [B])
    message = refused(value, keys=keys)
    assert len(message) < 200
    assert not any(k.kid == "AAAAAAAA" for k in keys.old)


def test_the_network_is_opened_and_keeps_what_the_database_holds():
    doc = {"_id": ID, "user": "ann@x.test", "accessToken": sealed(), "refreshToken": "plain-refresh-1234", "page": 3}
    doc["appSecret"] = sealed("app-secret-123", name="appSecret")  # a sealed field of any name opens
    network, problem = open_network(doc, KEYS)
    assert problem is None and isinstance(network, OpenedNetwork)
    assert network["accessToken"] == TOKEN and network["appSecret"] == "app-secret-123" and network["page"] == 3
    assert network.stored == {k: doc[k] for k in ("accessToken", "refreshToken", "appSecret")}
    plan = reseal_plan(network, KEYS)
    assert plan == {"refreshToken": ("plain-refresh-1234", "plain-refresh-1234")}  # the plain one only
    assert reseal_plan(network, Keys.of(B, [A])).keys() == {"accessToken", "refreshToken", "appSecret"}
    assert reseal_plan(network, Keys.of("", [A])) == {}  # no current key: the save seals nothing


def test_a_network_whose_token_cannot_be_opened_keeps_it_sealed_and_says_which():
    doc = {"_id": ID, "accessToken": sealed(), "refreshToken": sealed("r-12345678", name="refreshToken")}
    network, problem = open_network(doc, Keys.of(B))
    assert isinstance(problem, SealError) and "accessToken" in str(problem)
    assert network["accessToken"] == doc["accessToken"] and reseal_plan(network, Keys.of(B)) == {}


@pytest.mark.parametrize(
    "value", [None, 7, 3.5, True, ["sealed:v1:x"], {"sealed": 1}, b"sealed:v1:AAAAAAAA:AAAA", "", ObjectId()]
)
def test_values_that_are_not_strings_are_left_for_the_fields_checks(value):
    doc = {"_id": ID, "accessToken": value, "other": value}
    network, problem = open_network(doc, KEYS)
    assert problem is None and network["accessToken"] is value and reseal_plan(network, KEYS) == {}
    assert seal_credentials(doc, network_id=ID, keys=KEYS) == doc


def test_without_a_key_nothing_is_sealed_and_a_plain_network_is_given_back_as_it_is():
    doc = {"_id": ID, "accessToken": TOKEN, "refreshToken": "r-12345678", "accessTokenSecret": "s-12345678"}
    network, problem = open_network(doc, NO_KEYS)
    assert network is doc and problem is None and reseal_plan(network, NO_KEYS) == {}
    assert seal_credentials(doc, network_id=ID, keys=NO_KEYS) == doc


def test_seal_credentials_seals_the_secret_fields_once():
    fields = {"accessToken": TOKEN, "refreshToken": "r-12345678", "accessTokenExpiresAt": 5, "user": "a@x.test"}
    out = seal_credentials(fields, network_id=ID, keys=KEYS)
    assert out["user"] == "a@x.test" and out["accessTokenExpiresAt"] == 5
    assert opened(out["accessToken"]) == TOKEN and opened(out["refreshToken"], name="refreshToken") == "r-12345678"
    again = seal_credentials(out, network_id=ID, keys=Keys.of(B, [A]))
    assert again == out  # a sealed value is never sealed twice
    named = seal_credentials({"clientSecret": "cs-1234567"}, network_id=ID, keys=KEYS, names=("clientSecret",))
    assert opened(named["clientSecret"], name="clientSecret") == "cs-1234567"


@hypothesis_settings(max_examples=examples(200), deadline=None)
@given(
    plain=st.text(max_size=300),
    network_id=st.one_of(st.text(max_size=30), st.integers(-(2**63), 2**63 - 1), st.builds(ObjectId)),
    name=st.text(min_size=1, max_size=20).filter(lambda n: "\x00" not in n and not n.startswith("$")),
)
def test_any_text_seals_and_opens_for_its_own_network_and_field_only(plain, network_id, name):
    value = seal_value(plain, network_id=network_id, name=name, keys=KEYS)
    assert open_value(value, network_id=network_id, name=name, keys=KEYS) == plain
    with pytest.raises(SealError):
        open_value(value, network_id=network_id, name=name + "x", keys=KEYS)


def test_the_key_id_says_nothing_of_other_values():
    assert [key_id(v) for v in (TOKEN, "sealed:v1:short", None, 5, "sealed:v1:AAAAAAAA:AAAA")] == [
        None,
        None,
        None,
        None,
        "AAAAAAAA",
    ]
    assert Keys.of(A).current.kid == KEYS.current.kid != Keys.of(B).current.kid  # derived from the key: stable
