"""A replay never loses a walk: `sinks replay` during a backfill (or another replay) takes the walk over, starting
from the first item and covering both (finding 4 of review 2); and a walk's step writes only onto the walk it read,
so a replay landing between the round's read and its write is not marked done by the old walk (finding 10)."""

from __future__ import annotations

from datetime import timedelta

from collector.ops import sinks as ops_sinks
from collector.sinks import store as sinks_store
from collector.sinks.store import SINKS

from helpers import T0
from helpers.fakesink import Clock, Destination, add_items, run, service, sink_settings


def test_a_replay_during_a_backfill_delivers_the_rest_of_the_backfill_too(db):
    old = add_items(db, 50, marked=False, date=T0 - timedelta(days=90))  # stored before the sink existed
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a", SINK_A_PACE="10"), clock, {"a": dest})
    run(svc, clock, rounds=2, tick=1)  # the backfill walked some of the 50
    assert 0 < len(dest.received) < 50
    ok, line = ops_sinks.replay(db, "a", T0 - timedelta(days=7), clock.now)
    assert ok and "a backfill was under way" in line and "every item is queued again" in line
    walk = db[SINKS].find_one({"_id": "a"})["backfill"]
    assert walk["since"] is None and walk["cursor"] is None and walk["joined"]["since"] is None
    run(svc, clock, rounds=40, tick=1)
    svc.stop(5)
    assert set(old) <= set(dest.received)


def test_two_replays_cover_the_earlier_date(db):
    add_items(db, 1, marked=False)
    clock = Clock()
    svc = service(db, sink_settings("a", SINK_A_BACKFILL="false"), clock, {"a": Destination()})
    run(svc, clock, rounds=1)
    svc.stop(5)
    first = sinks_store.replay(db, "a", T0 - timedelta(days=2), "ann", clock.now)
    later = sinks_store.replay(db, "a", T0 - timedelta(days=1), "bob", clock.now)
    assert first is not None and later is not None
    walk = db[SINKS].find_one({"_id": "a"})["backfill"]
    assert walk["since"].replace(tzinfo=None) == (T0 - timedelta(days=2)).replace(tzinfo=None)
    assert walk["by"] == "bob" and walk["id"] not in (None, first["id"])
    assert sinks_store.replay(db, "nope", T0, "ann", clock.now) is None


def test_a_replay_racing_the_last_step_of_a_walk_is_not_marked_done_by_it(db):
    ids = add_items(db, 30, marked=False, date=T0 - timedelta(days=3))
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    run(svc, clock, rounds=2)  # the backfill: the 30 delivered; the walk done
    assert set(ids) <= set(dest.received)
    dest.received.clear()
    # the operator starts a replay from an hour ago by mistake, then at once the right one, from four days ago:
    # it lands during the first one's last step, between the round's read of the walk and its write
    sinks_store.replay(db, "a", T0 - timedelta(hours=1), "ann", clock.now)
    real_walk = svc.store.walk

    def walk_then_operator(*args, **kwargs):
        found = real_walk(*args, **kwargs)
        sinks_store.replay(db, "a", T0 - timedelta(days=4), "ann", clock.now)
        svc.store.walk = real_walk
        return found

    svc.store.walk = walk_then_operator
    run(svc, clock, rounds=10)
    svc.stop(5)
    walk = db[SINKS].find_one({"_id": "a"})["backfill"]
    assert set(ids) <= set(dest.received), walk
    assert walk["enqueued"] == 30 and walk["doneAt"] is not None


def test_a_walk_from_before_walks_had_ids_still_advances(db):
    ids = add_items(db, 5, marked=False)
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a", SINK_A_BACKFILL="false"), clock, {"a": dest})
    run(svc, clock, rounds=1)
    legacy = {"since": None, "cursor": None, "startedAt": clock.now, "by": "old", "enqueued": 0}
    db[SINKS].update_one({"_id": "a"}, {"$set": {"backfill": legacy}})
    run(svc, clock, rounds=4)
    svc.stop(5)
    assert set(ids) <= set(dest.received)
    assert db[SINKS].find_one({"_id": "a"})["backfill"]["doneAt"] is not None


def test_a_replay_over_whatever_a_shell_wrote_as_the_walk_starts_one_that_covers_it(db):
    at = T0 - timedelta(days=1)
    legacy = {"since": None, "cursor": None, "startedAt": T0, "by": "old", "enqueued": 3}  # running, no id
    db[SINKS].insert_many(
        [
            {"_id": "a", "backfill": "junk"},
            {"_id": "b", "backfill": {"id": [1, 2], "since": "yesterday"}},
            {"_id": "c"},
            {"_id": "d", "backfill": legacy},
        ]
    )
    walks = {name: sinks_store.replay(db, name, at, "ann", T0) for name in "abcd"}
    assert all(walk is not None for walk in walks.values())
    since = {name: db[SINKS].find_one({"_id": name})["backfill"]["since"] for name in "abcd"}
    assert since["a"] == since["c"] == at.replace(tzinfo=since["a"].tzinfo)  # nothing under way: from `at`
    assert since["b"] is None and since["d"] is None  # under way over every item: the replay covers every item
