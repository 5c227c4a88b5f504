"""The mover unsets an item's marker only once it is queued for every registered sink (review 2, finding 3): a
service whose settings lack a sink the database knows (a stand-by rolled out with other SINKS, a sink removed from
SINKS and not forgotten) keeps the items marked — nothing lost, deliveries of what is queued go on — says so once in
the log and in the lease document, and moves again once every registered sink is configured (or forgotten)."""

from __future__ import annotations

import logging

from collector.sinks import store as sinks_store
from collector.sinks.mover import queue_entry
from collector.sinks.store import QUEUE, SERVICE_ID, SINKS

from helpers.fakesink import Clock, Destination, add_items, run, service, sink_settings


def blocked(db):
    return (db[SINKS].find_one({"_id": SERVICE_ID}) or {}).get("blocked")


def test_a_service_with_other_settings_keeps_the_items_marked_for_the_sink_it_does_not_know(db, caplog):
    clock = Clock()
    dests = {"a": Destination(), "b": Destination()}
    b_svc = service(db, sink_settings("a", "b"), clock, dests, owner="B")
    run(b_svc, clock, rounds=3)
    b_svc.stop(5)  # a restart of B: the lease let go
    assert db[SINKS].find_one({"_id": "b"})["backfill"].get("doneAt") is not None
    a_svc = service(db, sink_settings("a"), clock, dests, owner="A")
    queued = add_items(db, 2, marked=False, start=100)  # already queued for a: its deliveries go on
    db[QUEUE].insert_many([queue_entry("a", item, clock.now) for item in db.items.find({"itemId": "100"})])
    new = add_items(db, 5)  # collected while A works
    with caplog.at_level(logging.INFO, logger="collector.sinks"):
        run(a_svc, clock, rounds=8)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "not configured here" in r.message]
    assert len(warnings) == 1 and "sink(s) b registered" in warnings[0].getMessage()
    assert blocked(db)["sinks"] == ["b"] and blocked(db)["owner"] == "A"
    assert db.items.count_documents({"sinkPending": True}) == 5  # kept marked
    assert queued[0] in dests["a"].received  # what was queued is delivered meanwhile
    a_svc.stop(5)
    b2 = service(db, sink_settings("a", "b"), clock, dests, owner="B")
    run(b2, clock, rounds=5)
    b2.stop(5)
    assert set(new) <= set(dests["a"].received) and set(new) <= set(dests["b"].received)
    assert blocked(db) is None  # B serves every registered sink: it said so


def test_forgetting_the_removed_sink_lets_the_items_move_and_the_log_says_so(db, caplog):
    clock = Clock()
    dests = {"a": Destination(), "gone": Destination()}
    svc = service(db, sink_settings("a", "gone"), clock, dests)
    run(svc, clock, rounds=2)
    svc.apply_settings(sink_settings("a"))  # "gone" removed from SINKS on purpose
    new = add_items(db, 3)
    with caplog.at_level(logging.INFO, logger="collector.sinks"):
        run(svc, clock, rounds=3)
        assert not set(new) & set(dests["a"].received)
        assert sinks_store.forget(db, "gone") == 0
        run(svc, clock, rounds=3)
    svc.stop(5)
    assert set(new) <= set(dests["a"].received) and db.items.count_documents({"sinkPending": True}) == 0
    assert any("new items are queued again" in r.getMessage() for r in caplog.records)
    assert sinks_store.forget(db, "gone") is None


def test_a_sink_registered_by_another_service_during_the_move_keeps_the_marker(db):
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    run(svc, clock, rounds=1)
    ids = add_items(db, 4)
    enqueue = svc.store.enqueue

    def enqueue_then_another_registers(entries):
        enqueue(entries)
        svc.store.register("late", "fake", True, "other", clock.now)  # its backfill starts after these were stored

    svc.store.enqueue = enqueue_then_another_registers
    svc.step()
    svc.store.enqueue = enqueue
    assert db.items.count_documents({"sinkPending": True}) == 4
    run(svc, clock, rounds=2)
    svc.stop(5)
    assert set(ids) <= set(dest.received)


def test_a_document_that_is_no_sink_name_does_not_hold_the_mover(db):
    db[SINKS].insert_many([{"_id": 5}, {"_id": "Not A Sink"}])
    clock, dest = Clock(), Destination()
    ids = add_items(db, 3)
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    run(svc, clock, rounds=3)
    svc.stop(5)
    assert set(ids) <= set(dest.received) and blocked(db) is None
