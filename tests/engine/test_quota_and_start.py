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
    claimed = collector.claim_batch("normal", 10, T0)
    assert {n["service"] for n in claimed} == {"github"}
    collector.apply_settings(settings.with_(services=(), services_exclude=("mastodon",)))  # a reload
    assert collector.served() == (None, frozenset({"mastodon"}))
    assert {n["service"] for n in collector.claim_batch("normal", 10, T0)} == {"gist"}
    given = Collector(db, settings.with_(services=("gist",)), services=["mastodon"])  # --services wins
    assert given.served()[0] == frozenset({"mastodon"})
