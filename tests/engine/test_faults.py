"""Faults of one network, one document or the database, injected at each step of a pass: the failure stays with
the network that caused it, nothing collected is lost, nothing is stored twice, and tokens from a refresh
survive any database hiccup."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
from bson import ObjectId
from pymongo.errors import AutoReconnect, BulkWriteError, WriteError

from collector.devtools.fakeapi import make_stars
from collector.engine import Collector
from collector.engine.registry import Registry
from collector.engine.store import item_key
from collector.sdk.connector import Connector, Result
from collector.sdk.errors import TokenExpired

from helpers import T0, TOKEN, FixedRefresh, GitHubStub, add_network, network


class Faults:
    """Make a Store method raise the next `times` calls (those for which `when(*args)` holds)."""

    def __init__(self, monkeypatch, target):
        self.monkeypatch, self.target, self.raised = monkeypatch, target, []

    def fail(self, method, times=1, error=None, when=lambda *args, **kwargs: True, then=None):
        original = getattr(self.target, method)
        left = {"n": times}

        def faulty(*args, **kwargs):
            if left["n"] > 0 and when(*args, **kwargs):
                left["n"] -= 1
                self.raised.append(method)
                if then is not None:
                    then()
                raise error or AutoReconnect(f"injected: connection reset during {method}")
            return original(*args, **kwargs)

        self.monkeypatch.setattr(self.target, method, faulty)


def two_networks(db, http_mock, stars=150):
    stub = GitHubStub(http_mock, stars=make_stars(stars, seed=3))
    stub.fake.add_user("ghp_second_user_token_9", make_stars(40, seed=4))
    a = add_network(db)
    b = add_network(db, user="bo@example.com", accessToken="ghp_second_user_token_9")
    return a, b


@pytest.mark.parametrize("step", ["insert_items", "save_state"])
def test_a_database_hiccup_while_saving_delays_the_save_and_loses_nothing(db, settings, http_mock, monkeypatch, step):
    a, b = two_networks(db, http_mock)
    collector = Collector(db, settings)
    faults = Faults(monkeypatch, collector.store)
    faults.fail(step)
    report = collector.run_pass("initial", now=T0)
    assert faults.raised == [step] and report.save_failures == 1
    assert report.tasks == 2 and report.new_items == 140 and report.by_status == {"ok": 2}
    assert db.items.count_documents({}) == 140  # every item once
    assert network(db, a)["page"] == 2 and network(db, b)["mode"] == "normal"
    assert "leaseOwner" not in network(db, a)


def test_a_failed_claim_fails_the_pass_and_the_next_pass_runs_everything(db, settings, http_mock, monkeypatch):
    two_networks(db, http_mock)
    collector = Collector(db, settings)
    Faults(monkeypatch, collector.store).fail("claim")
    with pytest.raises(AutoReconnect):
        collector.run_pass("initial", now=T0)
    assert collector.run_pass("initial", now=T0).tasks == 2
    assert db.items.count_documents({}) == 140


class Slow(Connector):
    """Each run takes a little real time, so that lease renewals come due during a pass."""

    name = "slow"
    started: list = []

    def initial(self, job):
        type(self).started.append(job.network["_id"])
        time.sleep(0.12)
        return Result([{"itemId": str(job.network["_id"]), "type": "slow", "source": "https://x.test/"}], done=True)

    def normal(self, job):
        return self.initial(job)


def test_renewal_covers_networks_still_waiting_for_a_worker(db, settings, monkeypatch):
    Slow.started = []
    docs = [add_network(db, service="slow", user=f"u{k}@x.test") for k in range(3)]
    collector = Collector(db, settings.with_(lease_seconds=0.15), registry=Registry({"slow": Slow}), concurrency=1)
    renewed: list[tuple[list, list]] = []
    original = collector.store.renew

    def spy(ids, owner, until):
        renewed.append((list(ids), list(Slow.started)))
        return original(ids, owner, until)

    monkeypatch.setattr(collector.store, "renew", spy)
    collector.run_pass("initial", now=T0)
    waiting = [d["_id"] for d in docs[1:]]
    assert any(
        set(waiting) - set(started) <= set(ids) and set(waiting) - set(started) for ids, started in renewed
    )  # a renewal included networks that had not started yet


def test_failed_renewals_and_releases_are_logged_and_never_drop_finished_runs(db, settings, monkeypatch, caplog):
    Slow.started = []
    for k in range(3):
        add_network(db, service="slow", user=f"u{k}@x.test")
    collector = Collector(db, settings.with_(lease_seconds=0.15), registry=Registry({"slow": Slow}), concurrency=1)
    Faults(monkeypatch, collector.store).fail("renew", times=100)
    with caplog.at_level(logging.WARNING):
        report = collector.run_pass("initial", now=T0)
    assert report.by_status == {"ok": 3} and db.items.count_documents({}) == 3
    assert any("renewing" in r.getMessage() for r in caplog.records)

    for k in range(3, 6):
        add_network(db, service="slow", user=f"u{k}@x.test")
    release_faults = Faults(monkeypatch, collector.store)
    release_faults.fail("release", times=1)
    Slow.started = []

    def stop_after_first():  # the stop comes while the first network runs
        return len(Slow.started) >= 1

    with caplog.at_level(logging.WARNING):
        stopped = collector.run_pass("initial", now=T0, should_stop=stop_after_first)
    assert stopped.tasks == 1 and stopped.released == 2 and release_faults.raised == ["release"]
    assert any("giving back" in r.getMessage() for r in caplog.records)
    assert db.items.count_documents({}) == 4  # the run that finished was saved
    assert db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0  # the retry gave them back


def test_results_kept_through_an_outage_are_dropped_when_their_leases_lapse_and_recollected_once(
    db, settings, http_mock, monkeypatch
):
    a, b = two_networks(db, http_mock)
    collector = Collector(db, settings)
    now = {"t": T0}
    lapse = lambda: now.update(t=T0 + timedelta(seconds=settings.lease_seconds + 1))  # noqa: E731
    Faults(monkeypatch, collector.store).fail("insert_items", times=1000, then=lapse)
    report = collector.run_pass("initial", clock=lambda: now["t"])
    assert report.dropped == 2 and report.tasks == 0 and db.items.count_documents({}) == 0
    monkeypatch.undo()
    later = T0 + timedelta(seconds=settings.lease_seconds + 2)
    again = Collector(db, settings).run_pass("initial", now=later)
    assert again.tasks == 2 and again.new_items == 140 and db.items.count_documents({}) == 140


class Rotating(Connector):
    """Tokens expire; a refresh rotates both (as Reddit, X and Spotify do)."""

    name = "rotating"
    token_refresh = FixedRefresh({"accessToken": "new-access-token", "refreshToken": "new-refresh-token"})

    def initial(self, job):
        if job.token == "old-access-token":
            raise TokenExpired("401", 401)
        return Result([{"itemId": "1", "type": "rotating", "source": "https://x.test/1"}], {"cursor": "c2"})

    def normal(self, job):
        return self.initial(job)


def rotating_network(db):
    return add_network(db, service="rotating", accessToken="old-access-token", refreshToken="old-refresh-token")


def test_tokens_from_a_refresh_survive_a_state_save_that_never_succeeds(db, settings, monkeypatch):
    doc = rotating_network(db)
    collector = Collector(db, settings, registry=Registry({"rotating": Rotating}))
    now = {"t": T0}
    lapse = lambda: now.update(t=T0 + timedelta(seconds=settings.lease_seconds + 1))  # noqa: E731
    Faults(monkeypatch, collector.store).fail("save_state", times=1000, then=lapse)
    report = collector.run_pass("initial", clock=lambda: now["t"])
    assert report.dropped == 1
    state = network(db, doc)
    assert state["accessToken"] == "new-access-token" and state["refreshToken"] == "new-refresh-token"
    assert state.get("cursor") is None  # the state itself was not saved: the run is re-collected


class RotatingUnkeepable(Rotating):
    """The refresh succeeds, then the run's answer cannot be kept (no storable item, or a state too odd to store)."""

    name = "rotating-unkeepable"
    spoil = "items"

    def initial(self, job):
        result = super().initial(job)
        if self.spoil == "items":
            result.items = [{"itemId": None}]  # nothing of the page can be stored: BadResponse
        else:
            result.state = {"cursor": {"$bad": 1}}  # a state the database would refuse: Malformed
        return result


@pytest.mark.parametrize("spoil", ["items", "state"])
def test_tokens_from_a_refresh_are_saved_when_the_run_then_fails(db, settings, monkeypatch, spoil):
    monkeypatch.setattr(RotatingUnkeepable, "spoil", spoil)
    doc = add_network(
        db, service="rotating-unkeepable", accessToken="old-access-token", refreshToken="old-refresh-token"
    )
    collector = Collector(db, settings, registry=Registry({"rotating-unkeepable": RotatingUnkeepable}))
    report = collector.run_pass("initial", now=T0)
    assert report.tasks == 1 and "ok" not in report.by_status
    state = network(db, doc)
    assert state["accessToken"] == "new-access-token" and state["refreshToken"] == "new-refresh-token"
    assert state.get("cursor") is None and state["errors"] == 1


def test_tokens_from_a_refresh_survive_a_hiccup_on_their_own_write(db, settings, monkeypatch):
    doc = rotating_network(db)
    collector = Collector(db, settings, registry=Registry({"rotating": Rotating}))
    faults = Faults(monkeypatch, collector.store)
    faults.fail("save_tokens")
    report = collector.run_pass("initial", now=T0)
    assert faults.raised == ["save_tokens"] and report.by_status == {"ok": 1}
    state = network(db, doc)
    assert state["refreshToken"] == "new-refresh-token" and state["cursor"] == "c2"


def test_tokens_from_a_refresh_are_not_written_over_newer_ones(db, settings, monkeypatch):
    doc = rotating_network(db)
    collector = Collector(db, settings, registry=Registry({"rotating": Rotating}))
    original = collector.store.save_tokens

    def app_reauthorised_meanwhile(network_id, tokens, previous):
        db.networks.update_one({"_id": network_id}, {"$set": {"refreshToken": "from-the-app-1234"}})
        return original(network_id, tokens, previous)

    monkeypatch.setattr(collector.store, "save_tokens", app_reauthorised_meanwhile)
    collector.run_pass("initial", now=T0)
    assert network(db, doc)["refreshToken"] != "old-refresh-token"


class Odd(Connector):
    """A page whose second item holds a value the database cannot store."""

    name = "odd"
    value: object = None

    def initial(self, job):
        items = [{"itemId": str(k), "type": "odd", "source": f"https://x.test/{k}", "title": f"t{k}"} for k in range(3)]
        items[1]["extra"] = type(self).value
        return Result(items, done=True)

    def normal(self, job):
        return self.initial(job)


def nested(depth):
    value: dict = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    "value, why",
    [
        (2**70, "8 bytes"),
        ({"$where": "x"}, "refused by MongoDB"),
        ({"a.b": 1}, "refused by MongoDB"),
        (nested(120), "nested deeper"),
        ("x" * (17 * 1024 * 1024), "bytes, more than"),
        ("\ud800 lone surrogate", "not encodable"),
    ],
    ids=["int-over-8-bytes", "dollar-key", "dotted-key", "nested-120", "17-MiB", "lone-surrogate"],
)
def test_an_item_the_database_cannot_store_is_named_on_its_network_and_the_rest_kept(
    db, settings, http_mock, value, why
):
    Odd.value = value
    GitHubStub(http_mock, stars=make_stars(5, seed=5))
    odd = add_network(db, service="odd")
    good = add_network(db, user="good@example.com")
    report = collector_pass(db, settings, Registry({"odd": Odd}))
    assert report.by_status == {"ok": 2}
    error = network(db, odd)["lastError"]
    assert error["kind"] == "itemRefused" and "item '1'" in error["message"] and why in error["message"]
    assert network(db, odd)["skippedItems"] == 1 and network(db, odd)["mode"] == "normal"
    assert sorted(i["itemId"] for i in db.items.find({"type": "odd"})) == ["0", "2"]
    assert db.items.count_documents({"user": "good@example.com"}) == 5 and network(db, good)["errors"] == 0


def collector_pass(db, settings, registry):
    return Collector(db, settings, registry=registry).run_pass("initial", now=T0)


def test_an_item_refused_by_the_server_is_named_and_the_batch_is_not_lost(db, settings, http_mock, monkeypatch):
    """What a real server does with a document nested beyond 100 levels: a write error for that one index."""
    Odd.value = "fine"
    GitHubStub(http_mock, stars=make_stars(5, seed=5))
    odd = add_network(db, service="odd")
    add_network(db, user="good@example.com")
    collector = Collector(db, settings, registry=Registry({"odd": Odd}))
    original = collector.store.items.insert_many

    def server_refuses_one(docs, ordered=True):
        bad = [i for i, d in enumerate(docs) if d.get("extra") == "fine"]
        original([d for i, d in enumerate(docs) if i not in bad], ordered=False)
        raise BulkWriteError(
            {
                "writeErrors": [
                    {"index": i, "code": 15, "errmsg": "Document exceeds maximum nesting depth of 100"} for i in bad
                ],
                "nInserted": len(docs) - 1,
            }
        )

    monkeypatch.setattr(collector.store.items, "insert_many", server_refuses_one)
    report = collector.run_pass("initial", now=T0)
    assert report.by_status == {"ok": 2} and report.new_items == 7
    assert "nesting depth" in network(db, odd)["lastError"]["message"]
    assert db.items.count_documents({}) == 7


def test_a_state_the_database_refuses_is_an_error_on_that_network_only(db, settings, http_mock, monkeypatch):
    a, b = two_networks(db, http_mock)
    collector = Collector(db, settings)
    Faults(monkeypatch, collector.store).fail(
        "save_state",
        error=WriteError("injected: document failed validation", code=121),
        when=lambda network_id, *rest: network_id == a["_id"],
    )
    report = collector.run_pass("initial", now=T0)
    assert report.by_status == {"badResponse": 1, "ok": 1}
    state = network(db, a)
    assert "state could not be stored" in state["lastError"]["message"] and state["errors"] == 1
    assert "leaseOwner" not in state and network(db, b)["mode"] == "normal"
    assert db.items.count_documents({}) == 140  # the items were stored; re-collecting them later is harmless


def test_a_cursor_the_database_could_not_keep_is_a_bad_response(db, settings):
    class Cursor(Connector):
        name = "cursor"

        def initial(self, job):
            return Result([{"itemId": "1", "type": "cursor", "source": "https://x.test/1"}], {"cursor": 2**70})

        def normal(self, job):
            return self.initial(job)

    doc = add_network(db, service="cursor")
    report = collector_pass(db, settings, Registry({"cursor": Cursor}))
    assert report.by_status == {"badResponse": 1}
    assert "cursor" in network(db, doc)["lastError"]["message"]


BAD_DOCUMENTS = [
    {"user": {"email": "a@b.c"}},
    {"user": ["a@b.c"]},
    {"page": 2**63 - 1},
    {"page": True},
    {"seenIds": 5},
    {"seenIds": [{"id": 1}]},
    {"mode": "normal", "etag": 'W/"1"\r\nX-Injected: 1'},
    {"mode": "normal", "etag": 12},
    {"accessToken": "ghp_line\nbreak_token"},
    {"sinceLikedAt": "yesterday", "mode": "normal"},
    {"cursor": {"$gt": 1}},
    {"username": "../../admin", "service": "reddit"},
]


@pytest.mark.parametrize("fields", BAD_DOCUMENTS, ids=lambda f: ",".join(f"{k}" for k in f))
def test_a_malformed_document_is_an_error_on_it_alone_and_the_pass_runs_the_rest(db, settings, http_mock, fields):
    GitHubStub(http_mock, stars=make_stars(3, seed=6))
    bad = add_network(db, **fields)
    good = add_network(db, user="good@example.com", mode=fields.get("mode"))
    report = Collector(db, settings).run_pass(fields.get("mode") or "initial", now=T0)
    assert report.tasks == 2
    state = network(db, bad)
    assert state["lastError"]["kind"] == "malformed" and state["errors"] == 1
    assert "ghp_line" not in str(state["lastError"])
    assert db.items.count_documents({"user": "good@example.com"}) == 3 and network(db, good)["errors"] == 0


@pytest.mark.parametrize(
    "epoch",
    [None, "seven", 2**63 - 1, {"n": 1}, [1], 1.5, -3],
    ids=["null", "string", "int64-max", "dict", "list", "float", "negative"],
)
def test_a_lease_epoch_of_any_shape_does_not_break_the_claim_of_the_others(db, settings, http_mock, epoch):
    GitHubStub(http_mock, stars=make_stars(3, seed=7))
    odd = add_network(db, leaseEpoch=epoch)
    good = add_network(db, user="good@example.com")
    report = Collector(db, settings).run_pass("initial", now=T0)
    assert report.tasks == 2 and report.by_status == {"ok": 2}
    assert network(db, good)["mode"] == "normal" and network(db, odd)["mode"] == "normal"
    assert isinstance(network(db, odd)["leaseEpoch"], (int, float))


def test_a_claim_refused_as_a_batch_falls_back_to_one_by_one(db, settings, http_mock, monkeypatch):
    GitHubStub(http_mock, stars=make_stars(3, seed=8))
    odd = add_network(db)
    good = add_network(db, user="good@example.com")
    collector = Collector(db, settings)
    networks = collector.store.networks
    update_many, update_one = networks.update_many, networks.update_one

    def refuse_batch(query, update, *args, **kwargs):
        if "$inc" in update:
            raise WriteError("injected: Cannot apply $inc to a value of non-numeric type", code=14)
        return update_many(query, update, *args, **kwargs)

    def refuse_odd(query, update, *args, **kwargs):
        if "$inc" in update and query.get("_id") == odd["_id"]:
            raise WriteError("injected: Cannot apply $inc", code=14)
        return update_one(query, update, *args, **kwargs)

    monkeypatch.setattr(networks, "update_many", refuse_batch)
    monkeypatch.setattr(networks, "update_one", refuse_odd)
    report = collector.run_pass("initial", now=T0)
    assert report.tasks == 1 and network(db, good)["mode"] == "normal"
    assert "leaseOwner" not in network(db, odd)


def test_an_unhashable_id_or_service_never_breaks_a_pass(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(3, seed=9))
    db.networks.insert_one(
        {"_id": {"legacy": 1}, "user": "x@example.com", "service": {"name": "github"}, "accessToken": TOKEN}
    )
    good = add_network(db, user="good@example.com")
    report = Collector(db, settings).run_pass("initial", now=T0)
    assert report.tasks == 2
    assert db.networks.find_one({"_id": {"legacy": 1}})["lastError"]["kind"] == "unknownService"
    assert network(db, good)["mode"] == "normal"


def test_items_are_keyed_as_before(db):
    assert item_key("a@b.c", "github", "1") == item_key("a@b.c", "github", "1")
    assert isinstance(item_key("a@b.c", "github", "1"), ObjectId)


def test_one_unreadable_entry_does_not_cost_the_page(db, settings, http_mock, caplog):
    import json as _json

    import responses as _responses

    from helpers import STARRED, starred_headers

    stars = make_stars(5, seed=10)
    del stars[2]["repo"]  # one entry without the field the mapping needs
    http_mock.add(_responses.GET, STARRED, body=_json.dumps(stars), headers=starred_headers())
    doc = add_network(db)
    with caplog.at_level(logging.INFO, logger="collector"):
        report = Collector(db, settings).run_pass("initial", now=T0)
    assert report.by_status == {"ok": 1} and report.new_items == 4 and report.skipped == 1
    state = network(db, doc)
    assert state["errors"] == 0 and state["skippedItems"] == 1 and "repo" in state["lastSkipped"]["reason"]
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("run "))
    assert "skipped=1" in line and "skip_reason=" in line


def test_a_last_page_with_no_readable_entry_ends_the_walk_with_them_counted(db, settings, http_mock):
    import responses as _responses

    from helpers import STARRED, starred_headers

    http_mock.add(_responses.GET, STARRED, json=[{"starred_at": "x"}, {"nope": 1}], headers=starred_headers())
    doc = add_network(db)
    assert Collector(db, settings).run_pass("initial", now=T0).by_status == {"ok": 1}
    state = network(db, doc)
    assert state["mode"] == "normal" and state["errors"] == 0 and state["skippedItems"] == 2
    assert "repo" in state["lastSkipped"]["reason"]


def test_a_body_nested_too_deeply_to_parse_is_a_bad_response_not_a_bug(db, settings, http_mock):
    import responses as _responses

    from helpers import STARRED, starred_headers

    http_mock.add(_responses.GET, STARRED, body="[" * 100_000 + "]" * 100_000, headers=starred_headers())
    doc = add_network(db)
    assert Collector(db, settings).run_pass("initial", now=T0).by_status == {"badResponse": 1}
    assert network(db, doc)["lastError"]["kind"] == "badResponse"


def test_fields_a_connector_does_not_put_in_urls_are_not_held_to_url_rules(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2, seed=11))
    doc = add_network(db, username="Ann Smith (old app)")  # the original app stored display names here
    assert Collector(db, settings).run_pass("initial", now=T0).by_status == {"ok": 1}
    assert network(db, doc)["errors"] == 0
