"""sinks/service.py: the sink service as `collector sink` drives it, on mongomock with fake sinks and a fake
clock — items a collector stores delivered once to each sink; rejects dead-lettered after SINK_MAX_TRIES, the
others delivered; an authentication failure stopping one sink loudly, not the other; pause and resume; a prepare
tried again; backfill and replay at a bounded pace; the lease (one service works, another takes over); the
database going away in the middle of a round losing nothing; secrets never in a reason or a log line."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from datetime import timedelta

from collector.devtools.fakeapi import make_stars
from collector.engine import run_once
from collector.settings import settings_for_tests
from collector.sinks import store as sinks_store
from collector.sinks.sdk import AuthFailed, BatchRefused
from collector.sinks.service import DOWN, IDLE, SinkService
from collector.sinks.store import DEAD, QUEUE

from helpers import API, T0, GitHubStub, add_network
from helpers.fakesink import (
    SECRET,
    SHADE,
    Clock,
    Destination,
    FlakyDb,
    add_items,
    run,
    service,
    settle,
    sink_settings,
)


def test_items_a_collector_stores_are_delivered_once_to_each_sink(db, http_mock):
    GitHubStub(http_mock, stars=make_stars(30, seed=5))
    add_network(db)
    run_once(db, "initial", settings_for_tests(github_api_url=API), now=T0)
    ids = {str(item["_id"]) for item in db.items.find({"sinkPending": True})}
    assert len(ids) == 30
    clock, destinations = Clock(), {"a": Destination(), "b": Destination()}
    svc = service(db, sink_settings("a", "b", SINK_B_BATCH="7"), clock, destinations)
    run(svc, clock, rounds=6)
    for destination in destinations.values():
        assert set(destination.received) == ids and set(destination.received.values()) == {1}
    assert max(destinations["b"].batches) <= 7
    assert db[QUEUE].count_documents({}) == 0 and db.items.count_documents({"sinkPending": True}) == 0
    body = destinations["a"].bodies[sorted(ids)[0]]
    assert "_id" not in body and "sinkPending" not in body and body["type"] == "github"
    doc = sinks_store.sink_docs(db)[0]
    assert doc["counts"]["delivered"] == 30 and doc["stats"]["backlog"] == 0 and doc["stats"]["owner"] == "one"
    figures = svc.snapshot()
    assert figures["a"].delivered == figures["b"].delivered == 30 and not figures["a"].stopped
    assert svc.outbox_pending == 0
    svc.stop(5)


def test_rejects_are_dead_lettered_after_max_tries_and_the_others_delivered(db):
    ids = add_items(db, 10)
    clock, destination = Clock(), Destination()
    destination.reject = {ids[3]}
    svc = service(db, sink_settings("a", SINK_MAX_TRIES="3", SINK_RETRY_MAX="4"), clock, {"a": destination})
    run(svc, clock, rounds=20, tick=5)
    assert set(destination.received) == set(ids) - {ids[3]}
    (letter,) = db[DEAD].find()
    assert str(letter["item"]) == ids[3] and letter["rejects"] == 3 and letter["status"] == 400
    assert "mapper_parsing_exception" in letter["reason"]
    assert db[QUEUE].count_documents({}) == 0
    assert svc.snapshot()["a"].dead_lettered == 1 and svc.snapshot()["a"].failed["rejected"] == 3
    svc.stop(5)


def test_a_refused_batch_is_retried_after_its_backoff_until_delivered(db):
    ids = add_items(db, 4)
    clock, destination = Clock(), Destination()
    destination.refuse, destination.retry_after = 3, 20.0
    svc = service(db, sink_settings("a", SINK_RETRY_MAX="30"), clock, {"a": destination})
    run(svc, clock, rounds=3, tick=1)
    entry = db[QUEUE].find_one()
    assert entry["tries"] == 1 and entry["nextAt"] >= T0 + timedelta(seconds=20)  # Retry-After respected
    assert entry["lastError"]["kind"] == "refused" and "503" in entry["lastError"]["message"]
    run(svc, clock, rounds=12, tick=10)
    assert set(destination.received) == set(ids) and set(destination.received.values()) == {1}
    assert svc.snapshot()["a"].failed["refused"] == 3
    svc.stop(5)


def test_an_authentication_failure_stops_that_sink_loudly_and_not_the_other(db, caplog):
    ids = add_items(db, 5)
    clock, good, bad = Clock(), Destination(), Destination()
    bad.auth = True
    svc = service(db, sink_settings("good", "bad"), clock, {"good": good, "bad": bad})
    with caplog.at_level(logging.ERROR, logger="collector.sinks"):
        run(svc, clock, rounds=5)
    assert set(good.received) == set(ids) and not bad.received
    assert len(bad.batches) == 1  # stopped after the first refusal: no hammering
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "sink bad stopped" in errors[0] and "collector sinks resume bad" in errors[0]
    docs = {d["_id"]: d for d in sinks_store.sink_docs(db)}
    assert "401" in docs["bad"]["stopped"]["reason"] and "stopped" not in docs["good"]
    assert svc.snapshot()["bad"].stopped and not svc.snapshot()["good"].stopped
    assert svc.snapshot()["bad"].failed["auth"] == 1
    assert db[QUEUE].count_documents({"sink": "bad"}) == 5  # kept for when it is resumed
    bad.auth = False
    sinks_store.resume(db, "bad", clock())
    run(svc, clock, rounds=4)
    assert set(bad.received) == set(ids) and not svc.snapshot()["bad"].stopped
    assert bad.prepared == 2  # prepared again after the resume
    svc.stop(5)


def test_a_paused_sink_queues_and_delivers_nothing_until_resumed(db):
    clock, destination = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": destination})
    run(svc, clock, rounds=1)  # registered
    assert sinks_store.pause(db, "a", "ann", "reindexing", clock())
    ids = add_items(db, 6)
    run(svc, clock, rounds=4)
    assert not destination.received and db[QUEUE].count_documents({"sink": "a"}) == 6
    assert svc.snapshot()["a"].paused
    more = add_items(db, 2, start=50)
    run(svc, clock, rounds=2)
    assert db[QUEUE].count_documents({"sink": "a"}) == 8  # the queue keeps growing
    sinks_store.resume(db, "a", clock())
    run(svc, clock, rounds=3)
    assert set(destination.received) == set(ids + more) and not svc.snapshot()["a"].paused
    svc.stop(5)


def test_a_sink_whose_prepare_fails_is_tried_again_later_and_auth_in_prepare_stops_it(db, caplog):
    ids = add_items(db, 3)
    clock, flaky, locked = Clock(), Destination(), Destination()
    flaky.prepare_errors = [BatchRefused("503 starting"), BatchRefused("503 starting")]
    locked.prepare_errors = [AuthFailed(f"403 bad key {SECRET}")]
    svc = service(db, sink_settings("flaky", "locked"), clock, {"flaky": flaky, "locked": locked})
    with caplog.at_level(logging.WARNING, logger="collector.sinks"):
        run(svc, clock, rounds=10, tick=2)
    assert set(flaky.received) == set(ids) and flaky.prepared == 1
    assert sum("sink flaky cannot start" in r.getMessage() for r in caplog.records) == 2
    assert not locked.received and svc.snapshot()["locked"].stopped
    assert svc.snapshot()["locked"].failed["auth"] == 1
    reason = sinks_store.sink_docs(db)[1]["stopped"]["reason"]
    assert "403" in reason and SECRET not in reason
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    svc.stop(5)


def test_a_new_sink_backfills_stored_items_at_its_pace_and_a_replay_sends_them_again(db):
    old = add_items(db, 25, marked=False, date=T0 - timedelta(days=10))
    clock, destination = Clock(), Destination()
    svc = service(db, sink_settings("a", SINK_A_PACE="10"), clock, {"a": destination})
    svc.step()
    settle(svc)
    assert len(destination.received) <= 10  # one second's worth at most
    run(svc, clock, rounds=6)
    assert set(destination.received) == set(old) and set(destination.received.values()) == {1}
    assert sinks_store.sink_docs(db)[0]["backfill"]["doneAt"] is not None
    recent = add_items(db, 3, marked=False, start=100, date=T0 + timedelta(days=1))
    sinks_store.replay(db, "a", T0, "ann", clock())
    run(svc, clock, rounds=4)
    assert set(destination.received) == set(old + recent)
    assert all(destination.received[i] == 1 for i in old) and all(destination.received[i] == 1 for i in recent)
    svc.stop(5)


def test_a_sink_without_backfill_gets_only_new_items(db):
    add_items(db, 5, marked=False)
    clock, destination = Clock(), Destination()
    svc = service(db, sink_settings("a", SINK_A_BACKFILL="false"), clock, {"a": destination})
    run(svc, clock, rounds=2)
    new = add_items(db, 2, start=50)
    run(svc, clock, rounds=3)
    assert set(destination.received) == set(new)
    svc.stop(5)


def test_two_services_one_delivers_the_other_takes_over_after_the_lease_lapses(db):
    ids = add_items(db, 8)
    clock, first, second = Clock(), Destination(), Destination()
    settings = sink_settings("a")
    one = service(db, settings, clock, {"a": first}, owner="one", lease_seconds=30)
    two = service(db, settings, clock, {"a": second}, owner="two", lease_seconds=30)
    for _ in range(4):
        one.step(), two.step()
        settle(one), settle(two)
        clock.advance(1)
    assert one.holds_lease and not two.holds_lease
    assert set(first.received) == set(ids) and not second.received
    later = add_items(db, 4, start=100)
    clock.advance(31)  # the first went silent: its lease lapsed
    run(two, clock, rounds=3)
    assert two.holds_lease and set(second.received) == set(later)
    one.step()  # the stale holder finds it lost the lease
    assert not one.holds_lease
    two.stop(5)
    assert sinks_store.lease_doc(db)["leaseUntil"] <= clock()  # let go at the stop: no wait for a successor
    one.stop(5)


def test_the_database_going_away_anywhere_in_a_round_loses_nothing(db):
    ids = add_items(db, 12)
    clock, destination = Clock(), Destination()
    destination.reject = {ids[0]}
    flaky = FlakyDb(db)
    svc = service(flaky, sink_settings("a", SINK_A_BATCH="3", SINK_RETRY_MAX="2"), clock, {"a": destination})
    failed = 0
    for k in range(60):  # the database goes away at a different call of each round (a round makes 5 to 20)
        flaky.calls, flaky.fail_at = 0, 1 + (k * 7) % 23
        failed += svc.step() == DOWN
        settle(svc)
        flaky.fail_at = None
        clock.advance(3)
    assert failed >= 15 and destination.received  # rounds broke off all along, and work got done between
    flaky.down = True
    assert svc.step() > 0 and not svc.database_up  # a round with the database away: a wait, no crash
    flaky.down = False
    run(svc, clock, rounds=10, tick=3)
    assert svc.database_up
    assert set(destination.received) == set(ids) - {ids[0]}  # everything, at least once
    assert db[DEAD].count_documents({}) == 1 and db[QUEUE].count_documents({}) == 0
    assert db.items.count_documents({"sinkPending": True}) == 0
    svc.stop(5)


def test_outcomes_finished_while_the_database_is_away_are_written_when_it_is_back(db):
    ids = add_items(db, 6)
    clock, destination = Clock(), Destination()
    flaky = FlakyDb(db)
    svc = service(flaky, sink_settings("a"), clock, {"a": destination})
    run(svc, clock, rounds=1)  # moved; the sink prepared
    svc.step()  # handed to the threads
    settle(svc)
    flaky.down = True
    for _ in range(3):
        svc.step()
        clock.advance(1)
    assert set(destination.received) == set(ids)
    assert db[QUEUE].count_documents({}) == 6  # not written yet ...
    flaky.down = False
    svc.step()
    assert db[QUEUE].count_documents({}) == 0  # ... and written now, without delivering again
    assert set(destination.received.values()) == {1}
    svc.stop(5)


def test_gone_items_are_dropped_and_an_item_no_destination_can_take_is_dead_lettered(db):
    ids = add_items(db, 3)
    db.items.update_one({"itemId": "1"}, {"$set": {"text": "x" * (2 * 1024 * 1024)}})
    clock, destination = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": destination})
    svc.step()  # queued and sent
    settle(svc)
    db.items.delete_one({"itemId": "2"})  # deleted while its entry waits (if it did)
    run(svc, clock, rounds=3)
    assert ids[0] in destination.received and ids[1] not in destination.received
    (letter,) = db[DEAD].find()
    assert str(letter["item"]) == ids[1] and "larger than" in letter["reason"]
    assert db[QUEUE].count_documents({}) == 0
    svc.stop(5)


def test_a_reload_adds_a_sink_which_gets_everything_stored(db):
    ids = add_items(db, 5)
    clock, destinations = Clock(), {"a": Destination(), "b": Destination()}
    svc = service(db, sink_settings("a"), clock, destinations)
    run(svc, clock, rounds=3)
    svc.apply_settings(sink_settings("a", "b"))
    run(svc, clock, rounds=4)
    assert set(destinations["b"].received) == set(ids)  # by its backfill: the items were unmarked already
    assert set(destinations["a"].received.values()) == {1}
    svc.apply_settings(sink_settings("a", SINK_A_BATCH="2"))  # a changed sink starts again with its settings
    more = add_items(db, 5, start=10)
    run(svc, clock, rounds=4)  # b is removed from SINKS but still registered: the items stay marked for it
    assert not set(more) & set(destinations["a"].received) and svc.outbox_pending == 5
    assert sinks_store.forget(db, "b") is not None  # removed on purpose: the operator forgets it
    run(svc, clock, rounds=4)
    assert set(more) <= set(destinations["a"].received) and max(destinations["a"].batches[-3:]) <= 2
    assert "b" not in svc.snapshot()
    svc.stop(5)


def test_secrets_of_the_sinks_never_reach_a_stored_reason_or_a_log_line(db, caplog):
    ids = add_items(db, 2)
    clock, destination = Clock(), Destination()
    destination.refuse, destination.message = 1, f"echoing {SECRET} and {SHADE}\x1b[31m"
    svc = service(db, sink_settings("a"), clock, {"a": destination})
    with caplog.at_level(logging.DEBUG):
        run(svc, clock, rounds=3)  # prepared, refused once, the refusal written
        entry = db[QUEUE].find_one()
        assert SECRET not in entry["lastError"]["message"] and SHADE not in entry["lastError"]["message"]
        run(svc, clock, rounds=3)
    assert set(destination.received) == set(ids)
    assert all(SECRET not in r.getMessage() and SHADE not in r.getMessage() for r in caplog.records)
    svc.stop(5)


def test_stop_waits_for_deliveries_in_flight_writes_them_and_lets_the_lease_go(db):
    ids = add_items(db, 4)
    clock, destination = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": destination})
    run(svc, clock, rounds=1)  # the sink prepared
    svc.step()  # the deliveries handed to the threads
    svc.stop(10)
    assert set(destination.received) == set(ids) and db[QUEUE].count_documents({}) == 0
    assert not svc.holds_lease and svc.step() >= 0  # a stopped service starts nothing
    assert destination.closed == 1  # the sink's client closed
    other = SinkService(db, sink_settings("a"), owner="two", registry=svc.kinds, clock=clock)
    assert other.store.hold_lease("two", "h", 1, clock(), 60)


def test_a_round_with_every_slot_busy_asks_to_wait_and_a_finished_delivery_wakes_it(db):
    ids = add_items(db, 6)
    clock, destination = Clock(), Destination()
    svc = service(db, sink_settings("a", SINK_A_BATCH="2", SINK_A_CONCURRENCY="2"), clock, {"a": destination})
    run(svc, clock, rounds=1)  # prepared
    destination.gate = threading.Event()
    assert svc.step() == IDLE  # two batches in flight: nothing to do until one finishes
    assert svc.step() == IDLE and not svc.wakeup.is_set()
    destination.gate.set()
    assert svc.wakeup.wait(60)  # a finished delivery wakes the loop
    run(svc, clock, rounds=3)
    assert set(destination.received) == set(ids)
    svc.stop(5)


def test_the_lease_is_renewed_every_sixth_of_it_not_every_round(db):
    clock, destination = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": destination}, lease_seconds=60)
    svc.step()
    beat = sinks_store.lease_doc(db)["beatAt"]
    for _ in range(9):
        clock.advance(1)
        svc.step()
    assert sinks_store.lease_doc(db)["beatAt"] == beat
    clock.advance(1)
    svc.step()
    assert sinks_store.lease_doc(db)["beatAt"] == clock() and svc.holds_lease
    svc.stop(5)


class FinishingAsLooked(Future):
    """A delivery that finishes between one look at it and the next (its worker thread ends meanwhile)."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def done(self) -> bool:
        self.looks += 1
        return self.looks > 1


def test_a_batch_finishing_while_the_lane_looks_is_kept_for_the_next_look_never_lost():
    from collector.sinks.builtin.webhook import WebhookSink
    from collector.sinks.lane import Flight, Lane
    from collector.testing.sinkkit import sink_config

    from helpers.sinkservers import WEBHOOK_SECRET

    lane = Lane(sink_config(WebhookSink, "https://hooks.example/in", SECRET=WEBHOOK_SECRET), None, threading.Event())
    try:
        flight = Flight([{"_id": "e1"}], "b1", FinishingAsLooked())
        lane.flights.append(flight)
        taken = lane.finished()
        assert taken or lane.flights == [flight]  # its outcome taken now, or still waiting to be: never dropped
    finally:
        lane.close()
