"""Continuous dispatch: slots are refilled before finished runs are saved, one slow network never holds the
others, states are saved in one fenced batch, and a stop still finishes what is in flight."""

from __future__ import annotations

import threading
from datetime import timedelta

import mongomock

from collector.engine import Collector
from collector.engine.events import Observer
from collector.engine.registry import Registry
from collector.engine.store import Store
from collector.sdk import Connector, Result

from helpers import T0, BulkCollection, add_network, network
from helpers.proc import wait_until


class Gate(Connector):
    """Networks whose user starts with 'slow' wait for the gate; the others return at once."""

    name = "gate"
    gate = threading.Event()
    started: list[str] = []
    finished: list[str] = []

    def initial(self, job):
        type(self).started.append(job.network["user"])
        if job.network["user"].startswith("slow"):
            assert type(self).gate.wait(30)
        type(self).finished.append(job.network["user"])
        return Result([{"itemId": job.network["user"], "source": "https://x.test/"}], done=True)

    def normal(self, job):
        return self.initial(job)


def gate_collector(db, settings, concurrency=4):
    Gate.gate.clear()
    Gate.started, Gate.finished = [], []
    return Collector(
        db, settings.with_(loop_idle_pause=0.05), registry=Registry({"gate": Gate}), concurrency=concurrency
    )


def test_a_slow_network_does_not_hold_back_the_next_claims(db, settings):
    add_network(db, service="gate", user="slow@x.test", scheduledTo=T0 - timedelta(hours=1))  # claimed first
    for k in range(12):  # more than one claim batch (concurrency 4): later batches come while the slow one runs
        add_network(db, service="gate", user=f"fast{k}@x.test", scheduledTo=T0)
    collector = gate_collector(db, settings)
    stop = threading.Event()
    # the test thread never touches the database while the collector runs (mongomock is not thread-safe)
    thread = threading.Thread(target=collector.serve, args=("initial", stop.is_set, stop.wait))
    thread.start()
    try:
        wait_until(lambda: len(Gate.finished) == 12, timeout=120)
        assert len(Gate.finished) == 12 and "slow@x.test" not in Gate.finished  # every fast one ran meanwhile
    finally:
        Gate.gate.set()
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert Gate.finished[-1] == "slow@x.test" and db.networks.count_documents({"mode": "normal"}) == 13


def test_free_slots_are_refilled_before_finished_runs_are_saved(db, settings, monkeypatch):
    for k in range(6):
        add_network(db, service="gate", user=f"fast{k}@x.test")
    collector = gate_collector(db, settings, concurrency=2)
    events: list[str] = []
    pool = collector.dispatcher.capacity.pool
    submit, save_states = pool.submit, collector.store.save_states
    monkeypatch.setattr(pool, "submit", lambda *a, **k: events.append("start") or submit(*a, **k))
    monkeypatch.setattr(collector.store, "save_states", lambda w: events.append(f"save{len(w)}") or save_states(w))
    collector.run_pass("initial", now=T0)
    first_save = next(i for i, e in enumerate(events) if e.startswith("save"))
    assert events[:2] == ["start", "start"] and "start" in events[2:first_save]  # refilled, then saved
    assert events.count("start") == 6 and db.networks.count_documents({"mode": "normal"}) == 6


def test_a_stop_finishes_the_runs_in_flight_and_gives_back_the_rest(db, settings):
    add_network(db, service="gate", user="slow@x.test")
    for k in range(3):
        add_network(db, service="gate", user=f"fast{k}@x.test", scheduledTo=T0 + timedelta(days=999))
    collector = gate_collector(db, settings, concurrency=1)
    stop = threading.Event()
    thread = threading.Thread(target=collector.serve, args=("initial", stop.is_set, stop.wait))
    thread.start()
    wait_until(lambda: Gate.started, timeout=120)
    stop.set()  # first stage: no new run starts; the one in flight finishes and is saved
    Gate.gate.set()
    thread.join(30)
    assert not thread.is_alive()
    assert Gate.finished == ["slow@x.test"]
    assert db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0


def test_states_are_saved_in_one_batch_and_a_stale_epoch_is_refused_alone(db):
    store = Store(db)
    store.mongomock = False  # take the bulk_write path, as with a real MongoDB
    store.networks = BulkCollection(db.networks)
    docs = [add_network(db, user=f"u{k}@x.test", leaseEpoch=3) for k in range(3)]
    db.networks.update_one({"_id": docs[1]["_id"]}, {"$set": {"leaseEpoch": 4}})  # reclaimed by another
    results = store.save_states([(d["_id"], {"page": 9}, (), 3) for d in docs])
    assert results == [True, False, True]
    assert [network(db, d).get("page") for d in docs] == [9, None, 9]


def test_the_mongomock_path_saves_states_one_by_one_with_the_same_answers():
    db = mongomock.MongoClient(tz_aware=True)["d"]
    store = Store(db)
    assert store.mongomock
    docs = [add_network(db, user=f"u{k}@x.test", leaseEpoch=1) for k in range(2)]
    db.networks.update_one({"_id": docs[0]["_id"]}, {"$set": {"leaseEpoch": 2}})
    assert store.save_states([(d["_id"], {"page": 2}, (), 1) for d in docs]) == [False, True]


class Counting(Observer):
    """Claim sizes, and a stop once `target` runs are saved."""

    def __init__(self, target: int):
        self.sizes: list[int] = []
        self.runs, self.target, self.done = 0, target, threading.Event()

    def on_claim(self, mode, claimed):
        self.sizes.append(claimed)

    def on_run(self, result, saved):
        self.runs += 1
        if self.runs >= self.target:
            self.done.set()


class Quiet(Connector):
    """Networks whose user starts with 'new' find one item; the others find nothing (a 304 poll)."""

    name = "quiet"

    def initial(self, job):
        found = [{"itemId": job.network["user"], "source": "https://x.test/"}]
        return Result(found if job.network["user"].startswith("new") else [], done=True)

    def normal(self, job):
        return self.initial(job)


def serve_until_done(db, settings, counting: Counting, concurrency: int) -> Collector:
    collector = Collector(
        db,
        settings.with_(loop_idle_pause=0.05),
        registry=Registry({"quiet": Quiet}),
        concurrency=concurrency,
        observers=[counting],
    )
    collector.serve("initial", should_stop=counting.done.is_set, wait=counting.done.wait)  # on this thread
    return collector


def test_claims_keep_networks_waiting_so_a_freed_worker_never_waits_for_a_claim(db, settings):
    for k in range(40):
        add_network(db, service="quiet", user=f"u{k}@x.test")
    counting = Counting(40)
    serve_until_done(db, settings, counting, concurrency=4).close()
    # the first claim fills the 4 request slots and keeps two concurrencies waiting (four of them are started at
    # once, two runs per slot); the next ones come when at most one network (a quarter of the concurrency) still
    # waits, so the slots are refilled while the claim is made
    assert counting.sizes[0] == 12
    assert sum(counting.sizes) == 40 and len([size for size in counting.sizes if size]) <= 5, counting.sizes
    assert db.networks.count_documents({"mode": "normal"}) == 40


def test_users_are_looked_up_only_for_runs_that_have_items_to_store(db, settings, monkeypatch):
    db.users.insert_many([{"email": f"{who}{k}@x.test", "name": f"N{k}"} for who in ("new", "u") for k in range(6)])
    for k in range(6):
        add_network(db, service="quiet", user=f"u{k}@x.test")  # polls that find nothing
        add_network(db, service="quiet", user=f"new{k}@x.test")
    looked_up: list[set] = []
    original = Store.users_by_email
    monkeypatch.setattr(
        Store, "users_by_email", lambda self, emails: looked_up.append(set(emails)) or original(self, emails)
    )
    counting = Counting(12)
    serve_until_done(db, settings, counting, concurrency=4).close()
    assert set().union(*looked_up) == {f"new{k}@x.test" for k in range(6)}  # never a user without items
    assert len(looked_up) <= 6  # at most one query per save batch, and none for a user already known
    item = db.items.find_one({"user": "new3@x.test"})
    assert item["userData"]["name"] == "N3"


def test_a_failed_user_look_up_keeps_the_items_without_user_data(db, settings, monkeypatch, caplog):
    add_network(db, service="quiet", user="new1@x.test")

    def refused(self, emails):
        raise mongomock.OperationFailure("not authorized on likeastore to execute command { find: users }")

    monkeypatch.setattr(Store, "users_by_email", refused)
    counting = Counting(1)
    serve_until_done(db, settings, counting, concurrency=2).close()
    assert db.items.count_documents({"user": "new1@x.test"}) == 1 and "userData" not in db.items.find_one({})
    assert "looking up 1 users failed" in caplog.text
    assert db.networks.find_one({})["mode"] == "normal"


def test_a_claim_spends_no_repair_round_trip_unless_an_epoch_needs_one(db, monkeypatch):
    store = Store(db)
    for k in range(3):
        add_network(db, user=f"u{k}@x.test", leaseEpoch=k, scheduledTo=T0)
    updates: list[dict] = []
    original = db.networks.update_many
    monkeypatch.setattr(store.networks, "update_many", lambda f, u, **kw: updates.append(u) or original(f, u, **kw))
    assert len(store.claim("initial", T0, 10, "box-1", T0 + timedelta(minutes=5))) == 3
    assert len(updates) == 1  # the claim itself
    # the leases lapse unsaved: the networks due again (a claim moved scheduledTo to the lease's end)
    db.networks.update_many({}, {"$unset": {"leaseUntil": "", "leaseToken": "", "leaseOwner": ""}})
    db.networks.update_many({}, {"$set": {"scheduledTo": T0}})
    db.networks.update_one({"user": "u1@x.test"}, {"$set": {"leaseEpoch": "7"}})
    updates.clear()
    won = store.claim("initial", T0, 10, "box-1", T0 + timedelta(minutes=5))
    assert len(won) == 3 and len(updates) == 2  # the repair of the one bad epoch, then the claim
    assert {n["user"]: n["leaseEpoch"] for n in won}["u1@x.test"] == 1


class Other(Quiet):
    name = "other"


def test_a_service_at_its_cap_does_not_leave_the_other_slots_idle(db, settings):
    # the capped service's networks are the most overdue: they fill the first claim, and its runs hang
    for k in range(12):
        add_network(db, service="gate", user=f"slow{k}@x.test", scheduledTo=T0 - timedelta(hours=1))
    for k in range(6):
        add_network(db, service="other", user=f"u{k}@x.test", scheduledTo=T0)
    Gate.gate.clear()
    Gate.started, Gate.finished = [], []
    counting = Counting(6)
    collector = Collector(
        db,
        settings.with_(loop_idle_pause=0.05, service_concurrencies={"gate": 1}),
        registry=Registry({"gate": Gate, "other": Other}),
        concurrency=4,
        observers=[counting],
    )
    stop = threading.Event()
    thread = threading.Thread(target=collector.serve, args=("initial", stop.is_set, stop.wait))
    thread.start()
    try:
        assert counting.done.wait(30)  # every other network ran while the capped service's one run hung
        assert len(Gate.started) == 1 and Gate.finished == []  # the cap held
    finally:
        stop.set()
        Gate.gate.set()
        thread.join(30)
    assert not thread.is_alive()
    # the claims after the first skipped the saturated service; its waiting networks were given back at the stop
    assert db.networks.count_documents({"service": "other", "mode": "normal"}) == 6
    assert db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0


def test_a_cap_as_large_as_the_concurrency_never_holds_back_the_claims(db, settings):
    for k in range(40):
        add_network(db, service="quiet", user=f"u{k}@x.test")
    counting = Counting(40)
    collector = Collector(
        db,
        settings.with_(loop_idle_pause=60, service_concurrency=4),  # an empty claim would wait a minute
        registry=Registry({"quiet": Quiet}),
        concurrency=4,
        observers=[counting],
    )
    thread = threading.Thread(target=collector.serve, args=("initial", counting.done.is_set, counting.done.wait))
    thread.start()
    finished = counting.done.wait(30)
    counting.done.set()
    thread.join(30)
    assert finished and sum(counting.sizes) == 40
    assert 0 not in counting.sizes[:-1]  # no claim skipped the only service and came back empty (then a minute idle)
    collector.close()


def test_runs_in_a_slots_second_seat_count_as_work_held_when_sizing_a_claim():
    from collector.engine.sizing import claim_size, seats

    assert seats(1) == 1 and seats(4) == 8  # one slot stays one run; else two runs per request slot
    assert claim_size([], 0, 4, set()) == 12  # the free slots plus two concurrencies
    # all eight seats taken, nothing claimed waits: four runs wait for (or work past) a slot, no claim yet, so
    # that a collector does not hold work another collector of the fleet could do now
    assert claim_size([], 8, 4, set()) == 0
    assert claim_size([], 5, 4, set()) == 7  # one run beyond the slots: two concurrencies less that one


def test_a_dispatch_stops_when_every_service_still_waiting_is_blocked_and_not_before():
    from types import SimpleNamespace

    from collector.engine.sizing import Blocked

    def waiting(*services):
        return [SimpleNamespace(service=s) for s in services]

    blocked = Blocked(waiting("a", "b", None, "a"))
    assert not blocked.add("a")  # "b" and a garbage service still wait: they may start
    assert not blocked.add("b")
    assert blocked.add(None)
    assert Blocked(waiting("a", "a")).add("a")  # one service, blocked: nothing more starts in this dispatch
    assert Blocked([]).add("a")  # the last one waiting was the one blocked


def test_the_services_waiting_are_known_without_a_look_at_each_network_and_never_fewer_than_there_are():
    from types import SimpleNamespace

    from collector.engine.sizing import Blocked, Pending

    def claimed(service):
        return SimpleNamespace(service=service)

    pending = Pending([claimed("a"), claimed("b")])
    pending.extend([claimed(None)])
    pending.appendleft(claimed("c"))
    assert [one.service for one in pending] == ["c", "a", "b", None]
    assert pending.services == {"a", "b", "c", None}
    while pending:
        pending.popleft()
    assert pending.services == {"a", "b", "c", None}  # more than wait (none), never fewer
    pending.extend([claimed("d")])  # the deque was empty: it starts over
    assert pending.services == {"d"}
    pending.extendleft([claimed("e")])
    assert pending.services == {"d", "e"}

    class Unread(Pending):
        def __iter__(self):
            raise AssertionError("a dispatch read every network waiting")

    held = Pending([claimed("a"), claimed("a"), claimed("b")])
    held.__class__ = Unread
    blocked = Blocked(held)
    assert not blocked.add("a") and blocked.add("b")
