"""Quota and start-up: a quota refusal whose reset is already past blocks the token's other networks for the
minimum wait too; the unique index on items exists before any item is written (a transient failure creating it
is retried, a refusal stops the start)."""

from __future__ import annotations

import json

import pytest
import responses
from pymongo.errors import AutoReconnect, OperationFailure

from collector import run_once
from collector.engine import Collector
from collector.engine.store import IndexRefused
from collector.sdk.timeutil import utcnow

from helpers import STARRED, T0, add_network, starred_headers


@pytest.mark.parametrize("reset_ago", [1, 3600, 10**6])
def test_a_refusal_whose_reset_is_past_blocks_the_tokens_other_networks_for_the_minimum_wait(db, settings, reset_ago):
    first = add_network(db, user="a@x.test")
    second = add_network(db, user="b@x.test")  # the same token
    calls = []

    def answer(request):
        calls.append(request)
        headers = starred_headers(
            remaining=0, reset=T0.replace(microsecond=0) - __import__("datetime").timedelta(seconds=reset_ago)
        )
        return 403, headers, json.dumps({"message": "API rate limit exceeded"})

    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.GET, STARRED, callback=answer)
        report = run_once(db, "initial", settings, now=T0, concurrency=1)
    assert len(calls) == 1  # the second network did not call again at once
    assert report.by_status == {"rateLimit": 2} and report.requests_skipped == 1
    for doc in (first, second):
        saved = db.networks.find_one({"_id": doc["_id"]})
        assert (saved["scheduledTo"] - T0).total_seconds() >= settings.rate_limit_min_wait


def test_a_transient_failure_creating_the_unique_index_is_retried_then_it_exists(db, settings, monkeypatch, caplog):
    from collector.engine.store import others

    real = db.items.create_index
    failures = {"left": 2}

    def flaky(keys, **options):
        if options.get("unique") and failures["left"]:
            failures["left"] -= 1
            raise AutoReconnect("db:27017: connection reset (a fail-over)")
        return real(keys, **options)

    monkeypatch.setattr(type(db.items), "create_index", lambda self, keys, **o: flaky(keys, **o))
    monkeypatch.setattr(others.time, "sleep", lambda seconds: None)
    Collector(db, settings)
    assert failures["left"] == 0
    assert any(info.get("unique") for info in db.items.index_information().values())
    assert caplog.text.count("retrying in") == 2


def test_a_unique_index_the_database_refuses_stops_the_start(db, settings, monkeypatch):
    real = db.items.create_index

    def refused(self, keys, **options):
        if options.get("unique"):
            raise OperationFailure("E11000 duplicate key error: items already hold duplicates", code=11000)
        return real(keys, **options)

    monkeypatch.setattr(type(db.items), "create_index", refused)
    with pytest.raises(IndexRefused, match="cannot be created"):
        Collector(db, settings)


def test_a_reload_changes_the_services_a_collector_serves(db, settings):
    from helpers import add_network as add

    for service in ("github", "gist", "mastodon"):
        add(db, service=service, user=f"{service}@x.test", mode="normal")
    collector = Collector(db, settings.with_(services=("github",)))
    assert collector.served() == (frozenset({"github"}), frozenset())
    claimed = collector.claims.claim("normal", 10, T0)
    assert {c.network["service"] for c in claimed} == {"github"}
    collector.apply_settings(settings.with_(services=(), services_exclude=("mastodon",)))  # a reload
    assert collector.served() == (None, frozenset({"mastodon"}))
    assert {c.network["service"] for c in collector.claims.claim("normal", 10, T0)} == {"gist"}
    given = Collector(db, settings.with_(services=("gist",)), services=["mastodon"])  # --services wins
    assert given.served()[0] == frozenset({"mastodon"})


# Every use of a reset is bounded by RATE_LIMIT_MAX_WAIT (rules.latest_wait): the network that heard it, the
# token's other networks parked through the quota memory, the facts shared in `quotas`, and housekeeping's repair
# of waits written by older collectors or other programs. These run at the real time: mongomock's TTL index drops
# a `quotas` document whose expiresAt is past by the wall clock, as MongoDB does.
NOW = utcnow().replace(microsecond=0)
FAR_RESETS = {  # what a server may send, as the headers of a 403/429
    "reset in year 9999": {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "253402300799"},
    "reset 10^11 s away": {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(10**11)},
    "reset just past the bound": {
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": str(int(NOW.timestamp()) + 90_000),
    },
    "Retry-After 10^20 s": {"Retry-After": str(10**20)},
    "Retry-After in year 9999": {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
}


@pytest.mark.parametrize("headers", list(FAR_RESETS.values()), ids=list(FAR_RESETS))
def test_a_far_reset_is_bounded_for_the_network_its_token_the_shared_facts_and_the_next_run(db, settings, headers):
    from datetime import timedelta

    latest = NOW + timedelta(seconds=settings.rate_limit_max_wait)
    networks = [add_network(db, user=f"{name}@x.test") for name in ("a", "b", "c")]  # one token
    calls = []

    def answer(request):
        calls.append(request)
        return 429, {"x-ratelimit-limit": "5000", **headers}, json.dumps({"message": "API rate limit exceeded"})

    collector = Collector(db, settings.with_(concurrency=1))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.GET, STARRED, callback=answer)
        report = collector.run_pass("initial", now=NOW)
    assert len(calls) == 1 and report.by_status == {"rateLimit": 3}  # the others parked without a call
    for doc in networks:
        assert NOW < db.networks.find_one({"_id": doc["_id"]})["scheduledTo"] <= latest
    key = collector.quotas.key("github", networks[0]["accessToken"])
    assert collector.quotas.blocked_until("github", networks[0]["accessToken"], NOW) <= latest
    shared = db.quotas.find_one({"_id": key})
    assert shared["blockedUntil"] <= latest and shared["expiresAt"] <= latest
    # once the bound has passed, the token is tried again: nothing holds it on the far reset
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(responses.GET, STARRED, json=[], headers=starred_headers())
        after = collector.run_pass("initial", now=latest + timedelta(seconds=1))
    assert after.by_status == {"ok": 3}
    collector.close()


@pytest.mark.parametrize("days", [2, 365, 10**5, 2_900_000])
def test_a_block_another_program_shared_is_bounded_when_adopted_and_by_housekeeping(db, settings, days):
    from datetime import UTC, datetime, timedelta

    latest = NOW + timedelta(seconds=settings.rate_limit_max_wait)
    far = min(NOW + timedelta(days=days), datetime(9999, 12, 31, tzinfo=UTC))
    spent = add_network(db, user="a@x.test")
    parked = add_network(db, user="b@x.test", accessToken="other-token-0002", mode="rateLimit", scheduledTo=far)
    held = add_network(
        db,
        user="c@x.test",
        accessToken="third-token-0003",
        mode="rateLimit",
        scheduledTo=far,
        leaseUntil=NOW + timedelta(minutes=5),
    )
    collector = Collector(db, settings)
    key = collector.quotas.key("github", spent["accessToken"])
    db.quotas.insert_one({"_id": key, "blockedUntil": far, "expiresAt": far, "remaining": 0, "limit": 60})
    report = collector.run_pass("initial", now=NOW)  # adopts the far block: parked, no call made
    assert report.by_status == {"rateLimit": 1}
    assert db.networks.find_one({"_id": spent["_id"]})["scheduledTo"] <= latest
    assert collector.quotas.blocked_until("github", spent["accessToken"], NOW) <= latest
    done = collector.housekeep(NOW)
    assert done["waitsBounded"] == 2  # the shared block and the parked network; the held one is left alone
    assert db.quotas.find_one({"_id": key})["blockedUntil"] == latest
    assert db.networks.find_one({"_id": parked["_id"]})["scheduledTo"] == latest
    assert db.networks.find_one({"_id": held["_id"]})["scheduledTo"] == far
    assert collector.housekeep(NOW)["waitsBounded"] == 0  # nothing left to bring back
    collector.close()


@pytest.mark.parametrize("seconds", [10**9, 86_401, 10**6])
def test_a_backoff_asked_for_on_success_is_bounded_in_the_quota_memory(seconds):
    from datetime import timedelta

    from collector.engine.quota import QuotaMemory
    from collector.sdk.errors import Quota

    memory, latest = QuotaMemory(), NOW + timedelta(days=1)
    memory.remember("stackoverflow", "tok-1234", Quota(5, 300, None), NOW + timedelta(seconds=seconds), latest)
    memory.remember("github", "tok-5678", Quota(0, 60, NOW + timedelta(seconds=seconds)), None, latest)
    assert memory.blocked_until("stackoverflow", "tok-1234", NOW) == latest
    assert memory.blocked_until("github", "tok-5678", NOW) == latest
