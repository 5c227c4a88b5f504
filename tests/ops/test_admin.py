"""`collector networks list|show|enable|reset` on a seeded database, through the command line."""

from __future__ import annotations

import json
from datetime import timedelta

from bson import ObjectId

from collector import cli
from collector.devtools.fakeapi import make_stars
from collector.engine import store
from collector.sdk import utcnow

from helpers import TOKEN, GitHubStub, add_network


def seed(db):
    now = utcnow().replace(microsecond=0)
    docs = {
        "ok": {
            "user": "ada@x.test",
            "service": "github",
            "mode": "normal",
            "accessToken": TOKEN,
            "scheduledTo": now + timedelta(minutes=10),
            "etag": '"abc"',
        },
        "disabled": {
            "user": "bob@x.test",
            "service": "github",
            "mode": "normal",
            "accessToken": TOKEN,
            "disabled": True,
            "errors": 5,
            "lastError": {"kind": "badResponse", "message": "HTTP 500"},
            "lastExecution": now - timedelta(hours=2),
            "scheduledTo": now + timedelta(days=1),
        },
        "unauth": {
            "user": "cy@x.test",
            "service": "mastodon",
            "mode": "normal",
            "accessToken": TOKEN,
            "unauthorized": True,
            "errors": 1,
            "lastError": {"kind": "unauthorized", "message": "401"},
            "lastExecution": now - timedelta(hours=1),
        },
        "walking": {
            "user": "ada@x.test",
            "service": "stackoverflow",
            "mode": "initial",
            "accessToken": TOKEN,
            "page": 7,
            "scheduledTo": now - timedelta(minutes=1),
        },
        "leased": {
            "user": "eve@x.test",
            "service": "github",
            "mode": "normal",
            "accessToken": TOKEN,
            "disabled": True,
            "leaseOwner": "box-1",
            "leaseUntil": now + timedelta(minutes=5),
        },
    }
    ids = {}
    for name, doc in docs.items():
        ids[name] = db.networks.insert_one(doc).inserted_id
    return ids, now


def test_list_shows_state_errors_and_next_run_and_never_a_token(cli_db, capsys):
    ids, _ = seed(cli_db)
    assert cli.main(["networks", "list"]) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out and len(out.strip().splitlines()) == 6
    line = next(x for x in out.splitlines() if str(ids["disabled"]) in x)
    assert "disabled" in line and "badResponse 2h ago" in line and line.endswith("not until enabled")
    assert next(x for x in out.splitlines() if str(ids["ok"]) in x).endswith("in 10m")
    assert cli.main(["networks", "list", "--state", "due", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [str(ids["walking"])] and rows[0]["state"] == "due"
    assert cli.main(["networks", "list", "--user", "ada@x.test", "--service", "github", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [str(ids["ok"])]
    assert cli.main(["networks", "list", "--state", "erroring", "--json"]) == 0
    assert {r["id"] for r in json.loads(capsys.readouterr().out)} == {str(ids["disabled"]), str(ids["unauth"])}


def test_the_last_errors_age_comes_from_its_own_time_and_its_kind_shows_without_one(cli_db, capsys):
    now = utcnow().replace(microsecond=0)
    timed = add_network(cli_db, user="t@x.test", lastError={"kind": "transient", "at": now - timedelta(minutes=3)})
    bare = add_network(cli_db, user="u@x.test", lastError={"kind": "badResponse", "message": "HTTP 500"})
    assert cli.main(["networks", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "transient 3m ago" in next(x for x in lines if str(timed["_id"]) in x)
    assert "  badResponse  " in next(x for x in lines if str(bare["_id"]) in x)


def test_show_masks_secrets_and_gives_times_absolute_and_relative(cli_db, capsys):
    ids, now = seed(cli_db)
    assert cli.main(["networks", "show", str(ids["ok"])]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)
    assert shown["accessToken"] == "***" and TOKEN not in out
    assert shown["scheduledTo"] == f"{now + timedelta(minutes=10):%Y-%m-%dT%H:%M:%S}.000Z"
    assert shown["relative"]["scheduledTo"] == "in 10m"
    assert cli.main(["networks", "show", "ada@x.test"]) == 0
    assert capsys.readouterr().out.count('"user": "ada@x.test"') == 2


def test_a_bad_id_is_one_line_and_exit_1(cli_db, capsys):
    seed(cli_db)
    assert cli.main(["networks", "show", str(ObjectId())]) == 1
    err = capsys.readouterr().err
    assert err.startswith("collector: no network with id") and len(err.strip().splitlines()) == 1
    assert cli.main(["networks", "show", "[" * 50_000 + "]" * 50_000]) == 1  # nested past the JSON parser's depth
    err = capsys.readouterr().err
    assert err.startswith("collector: id [[[") and "is not valid JSON" in err and len(err.strip().splitlines()) == 1
    assert cli.main(["networks", "enable"]) == 1
    assert "give network ids or --service" in capsys.readouterr().err


def test_enable_clears_errors_and_schedules_now_but_keeps_unauthorized_unless_forced(cli_db, capsys):
    ids, _ = seed(cli_db)
    before = list(cli_db.networks.find().sort("_id", 1))
    assert cli.main(["networks", "enable", str(ids["disabled"]), str(ids["unauth"]), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "cleared disabled, lastError, errors" in out and "unauthorized kept" in out and "dry run" in out
    assert list(cli_db.networks.find().sort("_id", 1)) == before  # nothing written
    assert cli.main(["networks", "enable", str(ids["disabled"]), str(ids["unauth"])]) == 0
    fixed = cli_db.networks.find_one({"_id": ids["disabled"]})
    assert "disabled" not in fixed and "lastError" not in fixed and fixed["errors"] == 0
    assert fixed["scheduledTo"] <= utcnow() and fixed["accessToken"] == TOKEN
    assert cli_db.networks.find_one({"_id": ids["unauth"]})["unauthorized"] is True
    assert cli.main(["networks", "enable", str(ids["unauth"]), "--force"]) == 0
    assert "unauthorized" not in cli_db.networks.find_one({"_id": ids["unauth"]})


def test_enable_by_service_and_kind_and_never_under_a_running_lease(cli_db, capsys):
    ids, _ = seed(cli_db)
    assert cli.main(["networks", "enable", "--service", "github", "--kind", "badResponse"]) == 0
    assert "disabled" not in cli_db.networks.find_one({"_id": ids["disabled"]})
    assert cli.main(["networks", "enable", str(ids["leased"])]) == 1  # left alone: exit 1
    assert "leased by box-1" in capsys.readouterr().out
    assert cli_db.networks.find_one({"_id": ids["leased"]})["disabled"] is True


def test_reset_walks_the_history_again_and_keeps_items(cli_db, capsys):
    ids, _ = seed(cli_db)
    cli_db.items.insert_one({"user": "ada@x.test", "type": "stackoverflow", "itemId": "1"})
    assert cli.main(["networks", "reset", str(ids["walking"]), str(ids["ok"])]) == 0
    out = capsys.readouterr().out
    assert "mode normal -> initial, dropped etag" in out and "dropped page" in out
    for name in ("walking", "ok"):
        doc = cli_db.networks.find_one({"_id": ids[name]})
        assert doc["mode"] == "initial" and "page" not in doc and "etag" not in doc and doc["accessToken"] == TOKEN
    assert cli_db.items.count_documents({}) == 1


def test_an_unreachable_database_is_one_line_and_exit_3_for_every_command(monkeypatch, tmp_path, capsys):
    from pymongo.errors import ServerSelectionTimeoutError

    class Down:
        def get_default_database(self, name):
            raise ServerSelectionTimeoutError(  # pymongo's own wording, topology dump and all
                "db.example:27017: timed out (configured timeouts: socketTimeoutMS: 20000.0ms, connectTimeoutMS: "
                "20000.0ms), Timeout: 10.0s, Topology Description: <TopologyDescription id: 6b0e, topology_type: "
                "Unknown, servers: [<ServerDescription ('db.example', 27017) server_type: Unknown, rtt: None>]>"
            )

    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: Down())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    for command in (["networks", "list"], ["networks", "show", "x@y.test"], ["networks", "reset", "1"], ["status"]):
        assert cli.main(command) == 3
        assert capsys.readouterr().err.startswith("collector: cannot re")
    tried = "MongoDB at mongodb://localhost:27017/likeastore_test (MONGODB_URI: the default for COLLECTOR_ENV=test)"
    assert cli.main(["networks", "list"]) == 3
    assert capsys.readouterr().err == (
        f"collector: cannot reach {tried}: db.example:27017: timed out, Timeout: 10.0s; "
        "start MongoDB there, or set MONGODB_URI (in the environment or the settings file)\n"
    )
    assert cli.main(["status", "--check"]) == 3  # UNKNOWN, on standard output as monitoring plugins do
    assert capsys.readouterr().out.startswith(f"UNKNOWN: cannot reach {tried}: db.example:27017: timed out")


def test_run_dry_run_calls_the_api_prints_what_it_would_store_and_writes_nothing(
    cli_db, http_mock, monkeypatch, capsys
):
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.test")
    GitHubStub(http_mock, stars=make_stars(150, seed=2), clock=utcnow())
    doc = add_network(cli_db)
    before = list(cli_db.networks.find())
    assert cli.main(["networks", "run", str(doc["_id"]), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "GET api.github.test/user/starred -> 200" in out and TOKEN not in out
    assert "items: 100" in out and '"page": 2' in out and "dry run: nothing written" in out
    assert list(cli_db.networks.find()) == before and cli_db.items.count_documents({}) == 0


def test_run_saves_like_the_daemon_and_refuses_a_network_another_collector_holds(
    cli_db, http_mock, monkeypatch, capsys
):
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.test")
    GitHubStub(http_mock, stars=make_stars(150, seed=2), clock=utcnow())
    doc = add_network(cli_db)
    assert cli.main(["networks", "run", str(doc["_id"])]) == 0
    assert "saved: 100 new items, state saved" in capsys.readouterr().out
    saved = cli_db.networks.find_one({"_id": doc["_id"]})
    assert saved["page"] == 2 and "leaseOwner" not in saved and cli_db.items.count_documents({}) == 100
    cli_db.networks.update_one(
        {"_id": doc["_id"]}, {"$set": {"leaseOwner": "box-1", "leaseUntil": utcnow() + timedelta(minutes=5)}}
    )
    assert cli.main(["networks", "run", str(doc["_id"])]) == 1
    assert "is leased by box-1" in capsys.readouterr().err
    assert cli_db.items.count_documents({}) == 100


RFC3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


def test_run_dry_run_leaves_a_network_another_collector_holds_alone(cli_db, http_mock, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.test")
    GitHubStub(http_mock, stars=make_stars(150, seed=2), clock=utcnow())
    doc = add_network(cli_db, leaseOwner="box-1", leaseUntil=utcnow() + timedelta(minutes=5))
    before = list(cli_db.networks.find())
    assert cli.main(["networks", "run", str(doc["_id"]), "--dry-run"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "leased by box-1" in captured.err
    assert len(http_mock.calls) == 0 and list(cli_db.networks.find()) == before


def test_reset_and_enable_of_a_held_network_exit_1_and_a_write_that_matched_nothing_says_so(
    cli_db, monkeypatch, capsys
):
    from collector.ops import networks as admin

    ids, now = seed(cli_db)
    assert cli.main(["networks", "reset", str(ids["leased"])]) == 1
    assert "leased by box-1, left as it is" in capsys.readouterr().out
    assert cli.main(["networks", "reset", str(ids["walking"]), str(ids["leased"])]) == 1  # one of them held
    assert cli_db.networks.find_one({"_id": ids["walking"]})["mode"] == "initial"
    capsys.readouterr()
    # a collector claims the network between our read and our write: the fenced write matches nothing
    stale = cli_db.networks.find_one({"_id": ids["disabled"]})
    cli_db.networks.update_one({"_id": ids["disabled"]}, {"$set": {"leaseUntil": now + timedelta(minutes=5)}})
    monkeypatch.setattr(admin, "find", lambda db, key: [stale])
    for verb in ("enable", "reset"):
        assert cli.main(["networks", verb, str(ids["disabled"])]) == 1
        out = capsys.readouterr().out
        assert "not changed: a collector took it" in out and "cleared" not in out and "->" not in out
    assert cli_db.networks.find_one({"_id": ids["disabled"]})["disabled"] is True


def test_list_says_when_it_cut_the_list_and_refuses_a_limit_below_1(cli_db, capsys):
    for k in range(7):
        add_network(cli_db, user=f"u{k}@x.test")
    assert cli.main(["networks", "list", "--limit", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 3 + 1 and out[-1] == "3 of 7 shown; use --limit"
    assert cli.main(["networks", "list", "--limit", "7"]) == 0
    assert "shown" not in capsys.readouterr().out
    assert cli.main(["networks", "list", "--limit", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)) == 2 and captured.err.strip() == "2 of 7 shown; use --limit"
    for bad in ("0", "-1", "x"):
        try:
            cli.main(["networks", "list", "--limit", bad])
        except SystemExit as exit:
            assert exit.code == 2  # usage
        else:
            raise AssertionError(f"--limit {bad} accepted")
        assert "invalid limit" in capsys.readouterr().err


def test_every_json_output_writes_datetimes_as_rfc3339_strings(cli_db, capsys):
    import re

    ids, _ = seed(cli_db)
    cli_db.networks.update_one({"_id": ids["ok"]}, {"$set": {"ratio": float("nan"), "big": float("inf")}})
    assert cli.main(["networks", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(re.match(RFC3339, r["scheduledTo"]) for r in rows if r["scheduledTo"] is not None)
    assert cli.main(["networks", "show", str(ids["ok"])]) == 0
    shown = capsys.readouterr().out
    json.loads(shown, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # strict: no NaN/Infinity
    assert '"ratio": null' in shown and '"big": null' in shown
    assert (
        re.match(RFC3339, json.loads(shown)["scheduledTo"]) and json.loads(shown)["relative"]["scheduledTo"] == "in 10m"
    )
    assert cli.main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert re.match(RFC3339, status["at"])
