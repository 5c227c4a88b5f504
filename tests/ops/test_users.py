"""`collector networks remove`, `collector users delete` (--items, --dry-run) and `collector users export`: a
person leaving or asking for their data. Never under a collector that runs one of their networks; nothing of
another person touched; secrets never exported. Through cli.main on mongomock (the `cli_db` fixture)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from bson import ObjectId

from collector import cli
from collector.ops import users
from collector.ops.accounts import NetworkInFlight
from collector.sdk import utcnow

from helpers import T0

TOKEN = "ghp_ANNtoken_SECRET_0123456789"
REFRESH = "refresh_ANN_SECRET_abcdef"


def seed(db, lease=None):
    now = utcnow()
    nets = {
        "gh": {"user": "ann@x.test", "service": "github", "accessToken": TOKEN, "page": 3},
        "yt": {"user": "ann@x.test", "service": "youtube", "accessToken": TOKEN, "refreshToken": REFRESH},
        "bob": {"user": "bob@x.test", "service": "github", "accessToken": "ghp_BOB_SECRET_000000000"},
        "odd": {"user": {"$ne": "ann@x.test"}, "service": "github", "accessToken": "x"},  # not a string
        "list": {"user": ["ann@x.test"], "service": "github", "accessToken": "x"},
    }
    if lease is not None:
        nets["yt"] |= {"leaseOwner": "box-1", "leaseUntil": now + lease}
    ids = {name: cli_id(db.networks.insert_one(doc).inserted_id) for name, doc in nets.items()}
    items = [
        {"user": "ann@x.test", "type": "github", "itemId": "1", "title": "Ann's \x1b[31mstar\x1b[0m ✓"},
        {"user": "ann@x.test", "type": "youtube", "itemId": "2", "date": T0},
        {"user": "bob@x.test", "type": "github", "itemId": "1"},
        {"user": ["ann@x.test"], "type": "github", "itemId": "3"},
    ]
    db.items.insert_many(items)
    return ids


def cli_id(value: ObjectId) -> str:
    return str(value)


def test_remove_deletes_one_network_and_keeps_its_items(cli_db, capsys):
    ids = seed(cli_db)
    assert cli.main(["networks", "remove", ids["gh"]]) == 0
    assert capsys.readouterr().out.strip() == f"removed network {ids['gh']} github ann@x.test (its items are kept)"
    assert cli_db.networks.find_one({"_id": ObjectId(ids["gh"])}) is None
    assert cli_db.networks.count_documents({}) == 4 and cli_db.items.count_documents({}) == 4


@pytest.mark.parametrize(
    "key, code, said",
    [
        ("64b000000000000000000000", 1, "no network with id 64b000000000000000000000"),
        ('{"$ne": null}', 2, "is a query, not an id"),
        ("{not json", 1, "is not valid JSON"),
    ],
)
def test_remove_of_no_network_or_a_query_deletes_nothing(cli_db, capsys, key, code, said):
    seed(cli_db)
    assert cli.main(["networks", "remove", key]) == code
    assert said in capsys.readouterr().err and cli_db.networks.count_documents({}) == 5


def test_remove_refuses_a_network_a_collector_runs_now(cli_db, capsys):
    ids = seed(cli_db, lease=timedelta(minutes=3))
    assert cli.main(["networks", "remove", ids["yt"], "--wait", "0"]) == 1
    err = capsys.readouterr().err
    assert f"network {ids['yt']} youtube ann@x.test is being run by box-1: nothing deleted" in err
    assert cli_db.networks.count_documents({}) == 5


def test_remove_takes_a_lapsed_lease_and_one_no_holder_keeps(cli_db):
    ids = seed(cli_db, lease=timedelta(minutes=-3))
    assert cli.main(["networks", "remove", ids["yt"]]) == 0
    far = cli_db.networks.insert_one({"user": "cy@x.test", "service": "github", "leaseUntil": T0 + timedelta(days=900)})
    assert cli.main(["networks", "remove", str(far.inserted_id)]) == 0


@pytest.fixture
def claimed_after_the_look(monkeypatch):
    """A collector claims each network right after the command looked at its lease (and found it free)."""

    def claim_then_say_free(network, now, lease_seconds):
        from collector.engine.store import Store

        Store(claim_then_say_free.db).networks.update_one(
            {"_id": network["_id"]}, {"$set": {"leaseOwner": "box-2", "leaseUntil": now + timedelta(minutes=1)}}
        )
        return False

    monkeypatch.setattr(users, "in_flight", claim_then_say_free)
    return claim_then_say_free


def test_a_fenced_remove_loses_to_a_collector_that_claimed_meanwhile(db, claimed_after_the_look):
    claimed_after_the_look.db = db
    network_id = db.networks.insert_one({"user": "ann@x.test", "service": "github", "accessToken": TOKEN}).inserted_id
    with pytest.raises(NetworkInFlight, match="a collector took it meanwhile; nothing deleted"):
        users.remove_network(db, str(network_id), now=utcnow())
    assert db.networks.count_documents({}) == 1


def test_a_fenced_user_delete_keeps_the_items_and_says_which_network_stayed(cli_db, capsys, claimed_after_the_look):
    claimed_after_the_look.db = cli_db
    ids = seed(cli_db)
    assert cli.main(["users", "delete", "ann@x.test", "--items"]) == 1
    out = capsys.readouterr().out
    assert f"network {ids['gh']} github ann@x.test: a collector took it meanwhile; not deleted" in out
    assert "2 items kept" in out and cli_db.items.count_documents({}) == 4
    assert cli_db.networks.count_documents({}) == 5


def test_users_delete_dry_run_counts_and_changes_nothing(cli_db, capsys):
    ids = seed(cli_db)
    assert cli.main(["users", "delete", "ann@x.test", "--items", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"would delete network {ids['gh']} github ann@x.test",
        f"would delete network {ids['yt']} youtube ann@x.test",
        "would delete 2 items",
        "(dry run: nothing changed)",
    ]
    assert cli_db.networks.count_documents({}) == 5 and cli_db.items.count_documents({}) == 4


def test_users_delete_takes_the_persons_networks_and_with_items_their_items_only(cli_db, capsys):
    ids = seed(cli_db)
    assert cli.main(["users", "delete", "ann@x.test"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 items kept (--items deletes them)"
    assert cli_db.networks.count_documents({"service": "youtube"}) == 0 and cli_db.items.count_documents({}) == 4
    assert cli.main(["users", "delete", "ann@x.test", "--items"]) == 0
    assert capsys.readouterr().out.splitlines() == ["deleted 2 items"]
    left = {str(d["_id"]) for d in cli_db.networks.find()}
    assert left == {ids["bob"], ids["odd"], ids["list"]}
    assert cli_db.items.count_documents({}) == 2  # bob's, and the one whose user is not a string


def test_users_delete_refuses_while_a_collector_runs_one_of_the_networks(cli_db, capsys):
    ids = seed(cli_db, lease=timedelta(seconds=30))
    assert cli.main(["users", "delete", "ann@x.test", "--items", "--wait", "0"]) == 1
    assert f"network {ids['yt']} youtube ann@x.test is being run by box-1" in capsys.readouterr().err
    assert cli_db.networks.count_documents({}) == 5 and cli_db.items.count_documents({}) == 4
    assert cli.main(["users", "delete", "ann@x.test", "--dry-run"]) == 0
    assert "(being run by box-1 now)" in capsys.readouterr().out


@pytest.mark.parametrize("verb", ["delete", "export"])
@pytest.mark.parametrize("email", ["nobody@x.test", '{"$ne": null}', "ANN@x.test", "ann@x.test "])
def test_a_person_with_nothing_is_one_line(cli_db, capsys, verb, email):
    seed(cli_db)
    assert cli.main(["users", verb, email]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("collector: no network or item of user") and not out
    assert cli_db.networks.count_documents({}) == 5 and cli_db.items.count_documents({}) == 4


def test_users_export_is_json_lines_without_a_secret(cli_db, capsys):
    seed(cli_db)
    assert cli.main(["users", "export", "ann@x.test"]) == 0
    out = capsys.readouterr().out
    assert out.isascii() and "\x1b" not in out
    assert TOKEN not in out and REFRESH not in out and "BOB" not in out
    records = [json.loads(line) for line in out.splitlines()]
    networks = [r["network"] for r in records if "network" in r]
    items = [r["item"] for r in records if "item" in r]
    assert len(records) == 4 and list(records[0]) == ["network"]  # networks first
    assert [n["service"] for n in networks] == ["github", "youtube"]
    assert networks[0]["accessToken"] == "***" and networks[0]["page"] == 3 and networks[1]["refreshToken"] == "***"
    assert sorted(i["itemId"] for i in items) == ["1", "2"]
    assert {i["user"] for i in items} == {"ann@x.test"}
    assert next(i for i in items if i["itemId"] == "1")["title"] == "Ann's \x1b[31mstar\x1b[0m ✓"  # escaped, whole
    assert next(i for i in items if i["itemId"] == "2")["date"] == "2026-06-01T12:00:00.000Z"


class Collector:
    """A collector holding a network: its run ends (its save lets the lease go) after `runs_for` of the command's
    pauses, or never (None); the clock moves with each pause."""

    def __init__(self, db, network_id, runs_for):
        self.db, self.network_id, self.runs_for, self.pauses = db, network_id, runs_for, 0
        self.now = utcnow()

    def clock(self):
        return self.now

    def pause(self, seconds):
        self.pauses += 1
        self.now += timedelta(seconds=seconds)
        if self.runs_for is not None and self.pauses >= self.runs_for:
            fields = {"leaseOwner": "", "leaseUntil": "", "leaseToken": ""}
            self.db.networks.update_one({"_id": self.network_id}, {"$unset": fields, "$set": {"page": 4}})


@pytest.mark.parametrize("runs_for", [1, 3, 20])
def test_a_network_in_flight_is_removed_once_its_collector_lets_it_go(db, runs_for):
    ids = seed(db, lease=timedelta(minutes=3))
    network_id = ObjectId(ids["yt"])
    collector = Collector(db, network_id, runs_for)
    patience = users.Patience(30, collector.clock, collector.pause)
    said = users.remove_network(db, ids["yt"], now=collector.clock(), patience=patience)
    assert said.startswith(f"removed network {ids['yt']} youtube") and collector.pauses == runs_for
    assert db.networks.count_documents({"_id": network_id}) == 0 and db.networks.count_documents({}) == 4


def test_a_network_its_collector_keeps_past_the_wait_is_left_as_it_was(db):
    ids = seed(db, lease=timedelta(minutes=3))
    collector = Collector(db, ObjectId(ids["yt"]), None)
    patience = users.Patience(10, collector.clock, collector.pause)
    with pytest.raises(NetworkInFlight, match="is being run by box-1: nothing deleted"):
        users.remove_network(db, ids["yt"], now=collector.clock(), patience=patience)
    assert collector.pauses == 10 and db.networks.count_documents({}) == 5


@pytest.mark.parametrize(("runs_for", "deleted"), [(2, True), (None, False)])
def test_users_delete_waits_for_the_networks_in_flight_then_deletes_them_and_the_items(db, runs_for, deleted):
    ids = seed(db, lease=timedelta(minutes=3))
    collector = Collector(db, ObjectId(ids["yt"]), runs_for)
    patience = users.Patience(5, collector.clock, collector.pause)
    if deleted:
        done = users.delete_user(db, "ann@x.test", items=True, now=collector.clock(), patience=patience)
        assert len(done.networks) == 2 and done.items == 2 and not done.refused
        assert {cli_id(d["_id"]) for d in db.networks.find()} == {ids["bob"], ids["odd"], ids["list"]}
    else:
        with pytest.raises(NetworkInFlight):
            users.delete_user(db, "ann@x.test", items=True, now=collector.clock(), patience=patience)
        assert db.networks.count_documents({}) == 5 and db.items.count_documents({}) == 4
