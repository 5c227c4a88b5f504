"""sinks/mover.py and sinks/backfill.py: marked items queued once for each sink that wants them, then unmarked —
a crash between the two re-done by the next round without loss or duplicate; new sinks registered with their
backfill; the walk over unmarked items at a bounded pace, below the queue cap, and a replay since a date."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collector.sinks.backfill import Walks
from collector.sinks.mover import move, queue_entry, register_new
from collector.sinks.sdk import SinkConfig
from collector.sinks.store import QUEUE, SinkStore, replay

from helpers import T0
from helpers.fakesink import add_items


def config(name: str, **fields) -> SinkConfig:
    return SinkConfig(name=name, kind="fake", url=f"https://{name}.test", **fields)


def queued(db, sink: str) -> list:
    return sorted(str(e["item"]) for e in db[QUEUE].find({"sink": sink}))


def test_each_marked_item_is_queued_for_each_sink_that_wants_it_then_unmarked(db):
    github = add_items(db, 5)
    reddit = add_items(db, 2, service_name="reddit")
    add_items(db, 3, marked=False, start=100)  # not marked: not the mover's
    store = SinkStore(db)
    assert move(store, [config("all"), config("gh", services=("github",))], T0) == 7
    assert queued(db, "all") == sorted(github + reddit) and queued(db, "gh") == sorted(github)
    assert store.outbox_pending() == 0
    entry = db[QUEUE].find_one({"sink": "gh"})
    assert (entry["date"], entry["at"], entry["nextAt"], entry["tries"], entry["rejects"]) == (T0, T0, T0, 0, 0)
    assert move(store, [config("all")], T0) == 0


def test_a_crash_between_the_insert_and_the_unset_is_redone_without_loss(db, monkeypatch):
    ids = add_items(db, 6)
    store = SinkStore(db)
    sinks = [config("a"), config("b")]

    def crash(ids):
        raise SystemExit("killed between the insert and the unset")

    with monkeypatch.context() as patch:
        patch.setattr(store, "unmark", crash)
        with pytest.raises(SystemExit):
            move(store, sinks, T0)
    assert db.items.count_documents({"sinkPending": True}) == 6  # the marker stayed
    assert move(store, sinks, T0 + timedelta(seconds=1)) == 6  # the next round does it again
    assert queued(db, "a") == queued(db, "b") == sorted(ids)
    assert db[QUEUE].count_documents({}) == 12 and store.outbox_pending() == 0
    assert db[QUEUE].find_one({"sink": "a"})["at"] == T0  # the first insert stands


def test_a_round_moves_at_most_its_limit_and_the_rest_waits(db):
    add_items(db, 25)
    store = SinkStore(db)
    assert [move(store, [config("a")], T0, limit=10) for _ in range(4)] == [10, 10, 5, 0]
    assert db[QUEUE].count_documents({}) == 25


def test_with_no_sink_nothing_moves_so_the_first_sink_gets_everything(db):
    add_items(db, 3)
    store = SinkStore(db)
    assert move(store, [], T0) == 0 and store.outbox_pending() == 3


def test_new_sinks_are_registered_once_with_their_backfill(db):
    store = SinkStore(db)
    sinks = [config("a"), config("b", backfill=False)]
    assert register_new(store, sinks, store.sink_docs(), "one", T0) == ["a", "b"]
    assert register_new(store, sinks, store.sink_docs(), "one", T0) == []
    docs = store.sink_docs()
    assert docs["a"]["backfill"]["startedAt"] == T0 and "backfill" not in docs["b"]


def test_an_item_without_a_date_is_dated_when_it_is_queued(db):
    entry = queue_entry("a", {"_id": 1, "type": "github", "date": "yesterday"}, T0)
    assert entry["date"] == T0 and entry["_id"] == {"s": "a", "i": 1}


# --- backfill and replay -------------------------------------------------------------------------------------------
def walk_rounds(db, walks, sinks, now, rounds):
    counts = []
    for i in range(rounds):
        counts.append(walks.round(sinks, SinkStore(db).sink_docs(), now + timedelta(seconds=i)))
    return counts


def test_a_backfill_walks_every_stored_item_at_its_pace(db):
    ids = add_items(db, 35, marked=False)
    store = SinkStore(db)
    sink = config("a", pace=10)
    register_new(store, [sink], {}, "one", T0)
    counts = walk_rounds(db, Walks(store), [sink], T0, 6)
    assert counts == [10, 10, 10, 5, 0, 0]  # ten items a second, one round a second: then done
    assert queued(db, "a") == sorted(ids)
    walk = store.sink_docs()["a"]["backfill"]
    assert walk["enqueued"] == 35 and walk["doneAt"] == T0 + timedelta(seconds=3)


def test_a_backfill_never_goes_faster_than_its_pace_however_often_it_is_called(db):
    add_items(db, 100, marked=False)
    store = SinkStore(db)
    sink = config("a", pace=4)
    register_new(store, [sink], {}, "one", T0)
    walks = Walks(store)
    done = sum(walks.round([sink], store.sink_docs(), T0 + timedelta(milliseconds=100 * i)) for i in range(50))
    assert done <= 4 + 4 * 5  # one second's worth at first, then four a second over five seconds
    assert done >= 20


def test_a_backfill_waits_while_the_queue_is_at_its_cap(db):
    ids = add_items(db, 30, marked=False)
    store = SinkStore(db)
    sink = config("a", pace=100)
    register_new(store, [sink], {}, "one", T0)
    store.enqueue([queue_entry("a", {"_id": f"x{i}"}, T0) for i in range(12)])  # a queue at its cap
    walks = Walks(store, queue_cap=12)
    assert walk_rounds(db, walks, [sink], T0, 3) == [0, 0, 0]  # full: it waits
    db[QUEUE].delete_many({"item": {"$regex": "^x"}})  # delivered meanwhile
    assert walk_rounds(db, walks, [sink], T0 + timedelta(seconds=10), 2) == [30, 0]
    assert queued(db, "a") == sorted(ids)


def test_a_replay_enqueues_the_items_since_a_date_and_only_those(db):
    add_items(db, 4, marked=False, date=T0)
    recent = add_items(db, 3, marked=False, start=10, date=T0 + timedelta(days=3))
    store = SinkStore(db)
    sink = config("a", backfill=False)
    register_new(store, [sink], {}, "one", T0)
    walks = Walks(store)
    assert walk_rounds(db, walks, [sink], T0, 2) == [0, 0]  # no backfill: nothing
    assert replay(db, "a", T0 + timedelta(days=1), "ann", T0 + timedelta(days=4))
    assert sum(walk_rounds(db, walks, [sink], T0 + timedelta(days=4), 3)) == 3
    assert queued(db, "a") == sorted(recent)
    assert store.sink_docs()["a"]["backfill"]["by"] == "ann"


def test_an_interrupted_walk_goes_on_from_its_cursor(db):
    ids = add_items(db, 20, marked=False)
    store = SinkStore(db)
    sink = config("a", pace=8)
    register_new(store, [sink], {}, "one", T0)
    assert walk_rounds(db, Walks(store), [sink], T0, 1) == [8]
    assert walk_rounds(db, Walks(store), [sink], T0 + timedelta(seconds=5), 3) == [8, 4, 0]  # a new service
    assert queued(db, "a") == sorted(ids) and db[QUEUE].count_documents({}) == 20
