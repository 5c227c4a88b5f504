"""`collector networks reseal`: every token moved to TOKEN_KEY (plain ones sealed, an old key's sealed again),
idempotent, counted, never under a collector's lease, never printing a token; `networks show` and `networks run`
on sealed networks."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from collector import cli
from collector.devtools.fakeapi import make_stars
from collector.engine.store import Store
from collector.engine.store.sealing import Keys, key_id, open_value, seal_value
from collector.ops import reseal as ops_reseal
from collector.sdk import utcnow

from helpers import TOKEN, GitHubStub, add_network

A, B, C = (base64.urlsafe_b64encode(bytes([seed]) * 32).decode() for seed in (41, 42, 43))
KID = {k: Keys.of(k).current.kid for k in (A, B, C)}
TOKENS = [f"tok-{n}-0123456789abcdef" for n in range(5)]


def seal(doc, name="accessToken", key=A):
    return seal_value(doc[name], network_id=doc["_id"], name=name, keys=Keys.of(key))


def stored(db, doc, name="accessToken"):
    return db.networks.find_one({"_id": doc["_id"]})[name]


def opened(db, doc, name="accessToken", key=A, old=()):
    return open_value(stored(db, doc, name), network_id=doc["_id"], name=name, keys=Keys.of(key, old))


def seed(db):
    """Plain, sealed with the old key B, sealed with A, plain with a refresh token, and a token no key opens."""
    docs = [add_network(db, user=f"u{n}@x.test", accessToken=TOKENS[n]) for n in range(5)]
    docs[3] = {**docs[3], "refreshToken": "refresh-3-0123456789"}
    db.networks.update_one({"_id": docs[3]["_id"]}, {"$set": {"refreshToken": docs[3]["refreshToken"]}})
    for doc, key in ((docs[1], B), (docs[2], A), (docs[4], C)):
        db.networks.update_one({"_id": doc["_id"]}, {"$set": {"accessToken": seal(doc, key=key)}})
    return docs


def reseal(monkeypatch, capsys, *argv, key=A, old=""):
    monkeypatch.setenv("TOKEN_KEY", key)
    monkeypatch.setenv("TOKEN_KEYS_OLD", old)
    code = cli.main(["networks", "reseal", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_reseal_moves_every_token_to_the_current_key_and_a_second_run_changes_nothing(cli_db, monkeypatch, capsys):
    docs = seed(cli_db)
    c_sealed = stored(cli_db, docs[4])
    code, out = reseal(monkeypatch, capsys, old=B)
    assert code == 1  # one token no key opens: named, left as it is
    assert "5 networks: wrote 3 — 3 tokens sealed, 1 moved from an old key, 0 written plain, 1 already" in out
    assert f"TOKEN_KEY cannot open accessToken: it is sealed with key {KID[C]}" in out and str(docs[4]["_id"]) in out
    assert "1 tokens cannot be opened: give their key in TOKEN_KEYS_OLD" in out
    for n in range(4):
        assert key_id(stored(cli_db, docs[n])) == KID[A] and opened(cli_db, docs[n]) == TOKENS[n]
    assert opened(cli_db, docs[3], "refreshToken") == "refresh-3-0123456789"
    assert stored(cli_db, docs[4]) == c_sealed
    assert not any(t in out for t in [*TOKENS, "refresh-3-0123456789", c_sealed, A, B])
    before = list(cli_db.networks.find())
    code, out = reseal(monkeypatch, capsys, old=f"{B},{C}")
    assert code == 0 and "wrote 1 — 0 tokens sealed, 1 moved from an old key, 0 written plain, 5 already" in out
    code, out = reseal(monkeypatch, capsys, old=f"{B},{C}")
    assert code == 0 and "wrote 0 — 0 tokens sealed, 0 moved from an old key, 0 written plain, 6 already" in out
    after = {d["_id"]: d for d in cli_db.networks.find()}
    assert all(after[d["_id"]] == d for d in before if d["_id"] != docs[4]["_id"])  # idempotent


def test_a_dry_run_counts_and_writes_nothing(cli_db, monkeypatch, capsys):
    seed(cli_db)
    before = list(cli_db.networks.find())
    code, out = reseal(monkeypatch, capsys, "--dry-run", old=f"{B},{C}")
    assert code == 0 and "would write 4 — 3 tokens sealed, 2 moved from an old key" in out
    assert "(dry run: nothing changed)" in out and list(cli_db.networks.find()) == before


def test_a_network_a_collector_holds_is_left_for_a_later_run(cli_db, monkeypatch, capsys):
    doc = add_network(cli_db, accessToken=TOKENS[0], leaseOwner="box-1", leaseUntil=utcnow() + timedelta(minutes=5))
    code, out = reseal(monkeypatch, capsys)
    assert code == 1 and "1 networks left as they are: a collector held them" in out
    assert stored(cli_db, doc) == TOKENS[0]
    cli_db.networks.update_one({"_id": doc["_id"]}, {"$set": {"leaseUntil": utcnow() - timedelta(seconds=1)}})
    code, out = reseal(monkeypatch, capsys)
    assert code == 0 and opened(cli_db, doc) == TOKENS[0]


def test_a_network_claimed_or_written_between_the_read_and_the_write_is_not_changed(db, monkeypatch):
    docs = [add_network(db, user=f"u{n}@x.test", accessToken=TOKENS[n]) for n in range(3)]
    read = list(db.networks.find().sort("_id", 1))

    def meanwhile(_db, _service):
        for n, doc in enumerate(read):
            if n == 0:  # a collector claims it
                db.networks.update_one({"_id": doc["_id"]}, {"$set": {"leaseUntil": utcnow() + timedelta(minutes=5)}})
            if n == 1:  # the app writes a new token
                db.networks.update_one({"_id": doc["_id"]}, {"$set": {"accessToken": "tok-from-the-app-42"}})
            yield doc

    monkeypatch.setattr(ops_reseal, "_networks", meanwhile)
    tally = ops_reseal.reseal(db, Keys.of(A), utcnow())
    assert (tally.changed, tally.raced, tally.complete) == (1, 2, False)
    assert [stored(db, d) for d in docs[:2]] == [TOKENS[0], "tok-from-the-app-42"]
    assert opened(db, docs[2]) == TOKENS[2]
    assert not Store(db, Keys.of(A)).reseal_tokens(docs[2]["_id"], None, {"accessToken": TOKENS[2]}, {})


def test_without_token_key_the_old_keys_open_every_token_and_it_is_written_plain(cli_db, monkeypatch, capsys):
    docs = seed(cli_db)
    code, out = reseal(monkeypatch, capsys, key="", old=f"{A},{B},{C}")
    assert code == 0 and "wrote 3 — 0 tokens sealed, 0 moved from an old key, 3 written plain" in out
    assert "target: plain (no TOKEN_KEY)" in out
    assert [stored(cli_db, d) for d in docs] == TOKENS


def test_without_any_key_reseal_says_so_and_exits_2(cli_db, monkeypatch, capsys):
    seed(cli_db)
    code, out = reseal(monkeypatch, capsys, key="")
    assert code == 2 and out.count("\n") == 1 and "TOKEN_KEY is not set, nor TOKEN_KEYS_OLD" in out


def test_reseal_takes_one_service_when_asked(cli_db, monkeypatch, capsys):
    gh = add_network(cli_db, accessToken=TOKENS[0])
    other = add_network(cli_db, service="vimeo", accessToken=TOKENS[1])
    code, out = reseal(monkeypatch, capsys, "--service", "vimeo")
    assert code == 0 and "1 networks: wrote 1" in out
    assert stored(cli_db, gh) == TOKENS[0] and opened(cli_db, other) == TOKENS[1]


@pytest.mark.parametrize("field", ["accessToken", "appData"])
def test_show_masks_a_sealed_value_under_any_name(cli_db, monkeypatch, capsys, field):
    doc = add_network(cli_db, accessToken=TOKENS[0], appData="x-0123456789")
    value = seal(doc, field)
    cli_db.networks.update_one({"_id": doc["_id"]}, {"$set": {field: value}})
    assert cli.main(["networks", "show", str(doc["_id"])]) == 0
    out = capsys.readouterr().out
    assert f'"{field}": "***"' in out and value not in out and value[20:40] not in out and TOKENS[0] not in out


def test_run_opens_a_sealed_token_and_saves_it_sealed_and_a_wrong_key_is_the_networks_error(
    cli_db, http_mock, monkeypatch, capsys
):
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.test")
    GitHubStub(http_mock, stars=make_stars(30, seed=2), clock=utcnow())
    doc = add_network(cli_db)
    value = seal(doc, key=B)
    cli_db.networks.update_one({"_id": doc["_id"]}, {"$set": {"accessToken": value}})
    monkeypatch.setenv("TOKEN_KEY", A)
    assert cli.main(["networks", "run", str(doc["_id"])]) == 1
    out = capsys.readouterr().out
    assert "status: sealed — TOKEN_KEY cannot open accessToken" in out and KID[B] in out
    assert TOKEN not in out and value not in out and stored(cli_db, doc) == value
    monkeypatch.setenv("TOKEN_KEYS_OLD", B)
    assert cli.main(["networks", "run", str(doc["_id"])]) == 0
    out = capsys.readouterr().out
    assert "status: ok" in out and TOKEN not in out and value not in out
    assert key_id(stored(cli_db, doc)) == KID[A] and opened(cli_db, doc) == TOKEN
