"""A sink's lag (review 2, findings 12 and 13): how late new items are — a new item counts from when it was
stored, a backfill's or replay's entry from when it was queued — read the same way by the metric (the service's
stats) and by `collector sinks status`; a queue entry a shell wrote with a text date hides nothing."""

from __future__ import annotations

from datetime import timedelta

from collector.ops import sinks as ops_sinks
from collector.ops.statuscheck import sink_problems
from collector.sinks import store as sinks_store
from collector.sinks.mover import queue_entry
from collector.sinks.store import QUEUE

from helpers import T0
from helpers.fakesink import Clock, Destination, add_items, run, service, settle, sink_settings


def lags(db, svc, clock: Clock) -> tuple[float, float]:
    """The lag the metric shows (measured now) and the one `collector sinks status` shows, at the same moment."""
    svc.stats.at = None  # measure at this round, not up to STATS_EVERY earlier
    svc.step()
    settle(svc)
    return svc.snapshot()["a"].lag_seconds, ops_sinks.gather(db, clock.now, ["a"])["sinks"][0]["lagSeconds"]


def pause(db, clock: Clock) -> None:
    db["sinks"].update_one({"_id": "a"}, {"$set": {"paused": {"at": clock.now, "by": "x", "reason": "r"}}})


def test_walked_entries_are_dated_when_queued_new_ones_by_their_items_date():
    item = {"_id": 1, "type": "github", "date": T0 - timedelta(days=90)}
    assert queue_entry("a", item, T0)["date"] == T0 - timedelta(days=90)
    assert queue_entry("a", item, T0, walked=True)["date"] == T0


def test_a_healthy_backfill_of_old_items_is_no_lag_and_no_warning(db):
    add_items(db, 3000, marked=False, date=T0 - timedelta(days=90))
    clock, dest = Clock(), Destination()
    settings = sink_settings("a")
    svc = service(db, settings, clock, {"a": dest})
    run(svc, clock, rounds=3, tick=6)
    add_items(db, 3, start=10_000)  # new items: delivered at once
    run(svc, clock, rounds=1, tick=6)
    assert db[QUEUE].count_documents({"sink": "a"}) > 0  # the backfill still under way
    problems, _ = sink_problems(ops_sinks.gather(db, clock.now, ["a"]), settings)
    metric, status = lags(db, svc, clock)
    svc.stop(5)
    assert not problems, problems
    assert metric == status and status < 60


def test_new_items_waiting_show_their_lag_during_a_backfill(db):
    add_items(db, 50, marked=False, date=T0 - timedelta(days=90))
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    svc.step()
    pause(db, clock)
    add_items(db, 3, start=1000, date=clock.now)
    run(svc, clock, rounds=3, tick=1000)
    metric, status = lags(db, svc, clock)
    svc.stop(5)
    assert metric == status == (clock.now - T0).total_seconds()


def test_a_queue_entry_with_a_text_date_leaves_the_lag_of_the_others_and_both_agree(db):
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    svc.step()
    pause(db, clock)
    add_items(db, 3)
    entry = {"_id": {"s": "a", "i": "hand"}, "sink": "a", "item": "hand", "date": "2026-01-01"}
    db[QUEUE].insert_one(entry | {"nextAt": clock.now + timedelta(days=999), "tries": 0, "rejects": 0})
    run(svc, clock, rounds=3, tick=1000)
    metric, status = lags(db, svc, clock)
    svc.stop(5)
    assert metric == status == 3000
    assert sinks_store.counts(db, "a")["oldest"] == T0
