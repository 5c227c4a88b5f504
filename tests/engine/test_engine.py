"""The pass: which networks run, what is saved, and bad input that must not stop the others."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from collector import run_once
from collector.devtools.fakeapi import make_stars
from collector.engine.store import item_key

from helpers import T0, TOKEN, GitHubStub, add_network, network


def test_rerunning_the_same_page_saves_each_item_once(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(40, seed=8))
    doc = add_network(db)
    first = run_once(db, "initial", settings, now=T0)
    db.networks.update_one({"_id": doc["_id"]}, {"$set": {"mode": "initial", "page": 1}})
    again = run_once(db, "initial", settings, now=T0 + timedelta(seconds=1))
    assert (first.new_items, again.new_items) == (40, 0)
    assert db.items.count_documents({}) == 40
    item = db.items.find_one()
    assert item["_id"] == item_key("ann@example.com", "github", item["itemId"])
    assert db.items.count_documents({"sinkPending": True}) == 40  # each new item is marked for the sinks, once


def test_a_new_item_is_marked_for_the_sinks_with_or_without_a_user(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(3, seed=4))
    db.users.insert_one({"email": "ann@example.com", "name": "Ann"})
    add_network(db)
    add_network(db, user="ghost@example.com")  # no such user: no userData
    run_once(db, "initial", settings, now=T0)
    items = list(db.items.find())
    assert len(items) == 6 and all(item["sinkPending"] is True for item in items)
    assert {"userData" in item for item in items} == {True, False}


def test_items_collected_by_the_original_collector_are_not_duplicated(db, settings, http_mock):
    stars = make_stars(5, seed=9)
    GitHubStub(http_mock, stars=stars)
    legacy_id = str(stars[0]["repo"]["id"])
    db.items.insert_one({"user": "ann@example.com", "type": "github", "itemId": legacy_id, "title": "old"})
    add_network(db)
    report = run_once(db, "initial", settings, now=T0)
    assert report.new_items == 4
    assert db.items.count_documents({"itemId": legacy_id}) == 1


def test_same_item_for_two_users_is_kept_for_each(db, settings, http_mock):
    stars = make_stars(3, seed=10)
    stub = GitHubStub(http_mock, stars=stars)
    stub.fake.add_user("ghp_other_user_token_2", stars)
    add_network(db)
    add_network(db, user="bo@example.com", accessToken="ghp_other_user_token_2")
    run_once(db, "initial", settings, now=T0)
    assert db.items.count_documents({}) == 6


def test_indexes_are_created(db, settings):
    run_once(db, "initial", settings, now=T0)
    network_keys = [list(ix["key"]) for ix in db.networks.index_information().values()]
    assert [("mode", 1), ("scheduledTo", 1)] in network_keys
    unique = [ix for ix in db.items.index_information().values() if ix.get("unique")]
    assert [list(ix["key"]) for ix in unique] == [[("user", 1), ("type", 1), ("itemId", 1)]]


@pytest.mark.parametrize("fields", [{}, {"mode": "initial"}, {"mode": None}, {"mode": "rateLimit"}])
def test_initial_collector_serves_initial_missing_and_rate_limit_modes(db, settings, http_mock, fields):
    GitHubStub(http_mock, stars=make_stars(2))
    add_network(db, **fields)
    assert run_once(db, "normal", settings, now=T0).tasks == 0
    assert run_once(db, "initial", settings, now=T0).tasks == 1


def test_normal_collector_serves_only_normal(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2))
    add_network(db, mode="normal")
    assert run_once(db, "initial", settings, now=T0).tasks == 0
    assert run_once(db, "normal", settings, now=T0).tasks == 1


@pytest.mark.parametrize(
    "fields", [{"disabled": True}, {"skip": True}, {"unauthorized": True}, {"scheduledTo": T0 + timedelta(seconds=1)}]
)
def test_networks_that_must_not_run(db, settings, http_mock, fields):
    stub = GitHubStub(http_mock, stars=make_stars(2))
    add_network(db, **fields)
    assert run_once(db, "initial", settings, now=T0).tasks == 0
    assert stub.requests == []


def test_due_means_scheduled_at_or_before_now(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2))
    add_network(db, scheduledTo=T0)
    add_network(db, user="late@example.com", scheduledTo=T0 - timedelta(days=3))
    assert run_once(db, "initial", settings, now=T0).tasks == 2


@pytest.mark.parametrize(
    "fields, kind, words",
    [
        ({"service": "myspace"}, "unknownService", "unknown service 'myspace'"),
        ({"service": None}, "unknownService", "field 'service'"),
        ({"accessToken": None}, "malformed", "accessToken"),
        ({"accessToken": ""}, "malformed", "accessToken"),
        ({"accessToken": 12345}, "malformed", "accessToken"),
        ({"user": None}, "malformed", "field 'user'"),
        ({"mode": "sideways"}, "malformed", "field 'mode'"),
        ({"page": "two"}, "malformed", "field 'page'"),
        ({"page": 0}, "malformed", "field 'page'"),
        ({"mode": "normal", "sinceLikedAt": "2020-01-01"}, "malformed", "sinceLikedAt"),
    ],
)
def test_malformed_networks_get_a_clear_error_and_the_pass_goes_on(db, settings, http_mock, fields, kind, words):
    GitHubStub(http_mock, stars=make_stars(3))
    bad = add_network(db, **fields)
    good = add_network(db, user="good@example.com")
    mode = "normal" if fields.get("mode") == "normal" else "initial"
    for run_mode in dict.fromkeys([mode, "initial"]):
        run_once(db, run_mode, settings, now=T0)
    state = network(db, bad)
    assert state["errors"] == 1
    assert state["lastError"]["kind"] == kind and words in state["lastError"]["message"]
    assert network(db, good)["errors"] == 0
    assert db.items.count_documents({"user": "good@example.com"}) == 3


def test_a_string_scheduled_to_counts_as_due_and_is_replaced(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2))
    doc = add_network(db, scheduledTo="tomorrow")
    assert run_once(db, "initial", settings, now=T0).tasks == 1
    assert network(db, doc)["scheduledTo"] == T0 + timedelta(seconds=settings.normal_interval)


def test_user_data_has_public_fields_only(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2))
    db.users.insert_one(
        {
            "email": "ann@example.com",
            "name": "Ann",
            "username": "ann",
            "avatar": "a.png",
            "password": "hash",
            "apiToken": "secret-api-token",
        }
    )
    add_network(db)
    run_once(db, "initial", settings, now=T0)
    user_data = db.items.find_one()["userData"]
    assert {k: v for k, v in user_data.items() if k != "_id"} == {
        "email": "ann@example.com",
        "name": "Ann",
        "username": "ann",
        "avatar": "a.png",
    }


def test_missing_user_is_a_warning_not_a_failure(db, settings, http_mock, caplog):
    GitHubStub(http_mock, stars=make_stars(2))
    doc = add_network(db, user="ghost@example.com")
    with caplog.at_level(logging.WARNING):
        run_once(db, "initial", settings, now=T0)
    assert db.items.count_documents({"user": "ghost@example.com"}) == 2
    assert "userData" not in db.items.find_one()
    assert network(db, doc)["errors"] == 0
    assert any("ghost@example.com" in r.getMessage() and "not found" in r.getMessage() for r in caplog.records)


def test_one_log_line_per_network_run(db, settings, http_mock, caplog):
    GitHubStub(http_mock, stars=make_stars(7))
    add_network(db)
    with caplog.at_level(logging.INFO, logger="collector"):
        run_once(db, "initial", settings, now=T0)
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.run"]
    assert len(lines) == 1
    assert "service=github" in lines[0] and "user=ann@example.com" in lines[0]
    assert "new_items=7" in lines[0] and "duration_ms=" in lines[0]


def test_a_crashing_connector_is_an_error_on_its_network(db, settings, http_mock):
    from collector.engine.registry import Registry
    from connectors.github import GitHubConnector

    class Broken(GitHubConnector):
        def initial(self, job):
            raise ZeroDivisionError("bug")

    registry = Registry()
    registry.register("broken", Broken)
    GitHubStub(http_mock, stars=make_stars(2))
    bad = add_network(db, service="broken")
    add_network(db, user="good@example.com")
    report = run_once(db, "initial", settings, now=T0, registry=registry)
    assert report.tasks == 2
    assert network(db, bad)["lastError"]["kind"] == "internal"
    assert db.items.count_documents({}) == 2


def test_items_a_connector_maps_wrongly_are_skipped_and_counted_the_rest_kept(db, settings):
    from collector.engine.registry import Registry
    from collector.sdk.connector import Connector, Result

    class Sloppy(Connector):
        name = "sloppy"

        def initial(self, job):
            return Result(
                [
                    {"itemId": "1", "type": "sloppy", "source": "https://x.test/1"},
                    {"itemId": 2, "type": "sloppy", "source": "https://x.test/2"},
                ]
            )

        def normal(self, job):
            return self.initial(job)

    doc = add_network(db, service="sloppy")
    report = run_once(db, "initial", settings, now=T0, registry=Registry({"sloppy": Sloppy}))
    assert report.by_status == {"ok": 1} and report.skipped == 1
    state = network(db, doc)
    assert state["skippedItems"] == 1 and "itemId" in state["lastSkipped"]["reason"]
    assert [i["itemId"] for i in db.items.find()] == ["1"]


def test_a_page_with_no_storable_item_fails_the_run(db, settings):
    from collector.engine.registry import Registry
    from collector.sdk.connector import Connector, Result

    class Sloppy(Connector):
        name = "sloppy"

        def initial(self, job):
            return Result([{"itemId": 2, "type": "sloppy", "source": "https://x.test/2"}])

        def normal(self, job):
            return self.initial(job)

    doc = add_network(db, service="sloppy")
    report = run_once(db, "initial", settings, now=T0, registry=Registry({"sloppy": Sloppy}))
    assert report.by_status == {"badResponse": 1}
    assert "itemId" in network(db, doc)["lastError"]["message"]
    assert db.items.count_documents({}) == 0


def test_token_never_reaches_logs_errors_or_items(db, settings, http_mock, caplog):
    def echo_token(request):  # a hostile API that echoes the Authorization header in its error
        return 422, {}, json.dumps({"message": f"cannot use {request.headers['Authorization']}"})

    import responses

    from helpers import STARRED

    http_mock.add_callback(responses.GET, STARRED, callback=echo_token)
    doc = add_network(db)
    with caplog.at_level(logging.DEBUG):
        run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert TOKEN not in str(state["lastError"])
    assert "***" in state["lastError"]["message"]
    assert all(TOKEN not in r.getMessage() for r in caplog.records)

    http_mock.reset()
    GitHubStub(http_mock, stars=make_stars(3))
    db.networks.update_one({"_id": doc["_id"]}, {"$set": {"scheduledTo": T0}})
    with caplog.at_level(logging.DEBUG):
        run_once(db, "initial", settings, now=T0)
    assert db.items.count_documents({}) == 3
    assert all(TOKEN not in str(item) for item in db.items.find())
    assert all(TOKEN not in r.getMessage() for r in caplog.records)


def test_report_counts_tasks_and_statuses(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2))
    add_network(db)
    add_network(db, user="x@example.com", service="nosuch")
    report = run_once(db, "initial", settings, now=T0)
    assert report.tasks == 2 and report.new_items == 2
    assert report.by_status == {"ok": 1, "unknownService": 1}


def test_a_pass_lets_go_of_the_secrets_of_every_network_it_held(db, settings, http_mock):
    """Each network's secret values are hidden while it is held and let go of when its run is saved: after a pass,
    whatever each run came to, none is held (a value let go of stays masked a while all the same)."""
    from collector.sdk.redaction import SECRETS, redact

    GitHubStub(http_mock, stars=make_stars(2))
    add_network(db)
    add_network(db, user="x@example.com", service="nosuch", accessToken="nosuch-token-0123456789")
    add_network(db, user="y@example.com", accessToken=12345, oauth={"secret": "nested-secret-0123456789"})
    held = len(SECRETS)
    report = run_once(db, "initial", settings, now=T0)
    assert report.tasks == 3 and report.by_status.get("ok") == 1
    assert len(SECRETS) == held
    assert "nested-secret" not in redact("nested-secret-0123456789")


def test_a_network_is_let_go_of_with_the_secrets_its_claim_hid():
    """The secrets a claim read from a network are the ones let go of with it, read once: not read again from a
    document that may have changed meanwhile."""
    from collector.engine.registry import Registry
    from collector.engine.run import admit, forget
    from collector.sdk.redaction import SECRETS

    network = {"_id": 1, "user": "a@x.test", "service": "github", "accessToken": "tok-claimed-0123456789"}
    claimed = admit(network, Registry())
    assert set(claimed.held) == {"tok-claimed-0123456789"} and "held=" not in repr(claimed)
    SECRETS.add(claimed.held)
    network["accessToken"] = "tok-other-0123456789"
    forget(network, {}, claimed.held)
    held = SECRETS.snapshot()[0]
    assert "tok-claimed-0123456789" not in held and "tok-other-0123456789" not in held


def test_pass_limit_takes_the_most_overdue_first(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(1))
    old = add_network(db, user="old@example.com", scheduledTo=T0 - timedelta(hours=2))
    add_network(db, user="new@example.com", scheduledTo=T0 - timedelta(hours=1))
    assert run_once(db, "initial", settings.with_(pass_limit=1), now=T0).tasks == 1
    assert network(db, old)["lastExecution"] == T0


def test_run_once_rejects_an_unknown_mode(db, settings):
    with pytest.raises(ValueError, match="mode"):
        run_once(db, "rateLimit", settings, now=T0)


def test_a_crashing_connector_never_logs_the_token(db, settings, caplog):
    from collector.engine.registry import Registry
    from collector.sdk.connector import Connector

    class Leaky(Connector):
        name = "leaky"

        def initial(self, job):
            raise ValueError(f"cannot parse {job.token}")

        def normal(self, job):
            return self.initial(job)

    doc = add_network(db, service="leaky")
    with caplog.at_level(logging.DEBUG):
        run_once(db, "initial", settings, now=T0, registry=Registry({"leaky": Leaky}))
    assert "***" in network(db, doc)["lastError"]["message"]
    assert any("crashed" in r.getMessage() for r in caplog.records)
    assert all(TOKEN not in r.getMessage() and TOKEN not in (r.exc_text or "") for r in caplog.records)


@pytest.mark.system
def test_real_http_debug_logs_carry_no_token(db, settings, caplog):
    """Over a real socket (the fake API), with every library logging at DEBUG."""
    from collector.devtools.fakeapi import FakeGitHub, FakeServer

    fake = FakeGitHub()
    fake.add_user(TOKEN, generated=150, seed=4)
    add_network(db)
    with FakeServer(fake) as url, caplog.at_level(logging.DEBUG):
        for k in range(2):
            run_once(db, "initial", settings.with_(github_api_url=url), now=T0 + timedelta(seconds=k))
    assert db.items.count_documents({}) == 150
    assert caplog.records and all(TOKEN not in r.getMessage() for r in caplog.records)
