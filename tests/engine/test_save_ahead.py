"""Saving ahead (engine/saveahead.py): with a thread-safe database client (pymongo, here against the mongowire
stand-in on a real socket), a save batch's database work runs on a thread of its own while runs are in flight; the
batch is settled on the dispatcher's thread; a database away keeps it for a retry, a stop waits for it, an engine
error on it is raised where it would have been raised in place; with mongomock in the process, saves stay on the
dispatcher's thread."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from pymongo import MongoClient
from pymongo.errors import AutoReconnect

from collector.devtools.fakeapi import FakeGitHub, FakeServer
from collector.devtools.mongowire import WireServer as MongoWire
from collector.devtools.workloads import seed_normal
from collector.engine import Collector, saveahead
from collector.engine.dispatch import Dispatcher
from collector.engine.events import Observer
from collector.engine.quota import QuotaSharing
from collector.engine.store import Store
from collector.sdk import utcnow
from collector.settings import settings_for_tests

pytestmark = pytest.mark.system
NETWORKS = 40


@pytest.fixture
def wire_db():
    with MongoWire() as wire:
        client = MongoClient(wire.uri, tz_aware=True)
        yield client.get_default_database()
        client.close()


@pytest.fixture
def starts(monkeypatch):
    """The batches started ahead, by size."""
    seen: list[int] = []
    real = saveahead.SaveAhead.start

    def counted(self, batch, users, done):
        seen.append(len(batch))
        return real(self, batch, users, done)

    monkeypatch.setattr(saveahead.SaveAhead, "start", counted)
    return seen


class Watch(Observer):
    """An observer: the threads the database's reports and the runs reached it on, and the runs by network."""

    def __init__(self) -> None:
        self.threads: set[str] = set()
        self.runs: list[object] = []
        self.save_failures = 0

    def on_database(self, operation, seconds, error) -> None:
        self.threads.add(threading.current_thread().name)

    def on_run(self, result, saved) -> None:
        self.threads.add(threading.current_thread().name)
        self.runs.append(result.network["_id"])

    def on_pass(self, report) -> None:
        self.save_failures += report.save_failures


def ran_all(db) -> bool:
    return db.networks.count_documents({"lastExecution": {"$exists": True}}) == NETWORKS


def serve(collector: Collector, done) -> None:
    deadline = time.monotonic() + 120  # only ends a hung test
    collector.serve("normal", lambda: done() or time.monotonic() > deadline, wait=lambda s: time.sleep(min(s, 0.05)))


def settled(db, watch: Watch, fake: FakeGitHub) -> None:
    """Every network polled once, saved once, told once; its lease given back, due again in an hour."""
    runs = list(db.networks.find({}))
    assert fake.stats()["requests"] == NETWORKS and sorted(map(str, watch.runs)) == sorted(str(n["_id"]) for n in runs)
    assert all("lastError" not in n and "leaseOwner" not in n for n in runs)
    assert all(n["scheduledTo"] > utcnow() + timedelta(minutes=50) for n in runs)
    assert watch.threads == {threading.main_thread().name}  # the observers hear from the dispatcher's thread only


def test_saves_go_ahead_while_runs_are_in_flight_and_every_run_is_saved_once(wire_db, starts, monkeypatch):
    sharing: set[str] = set()  # the threads the quota facts were shared from: the quota memory is the dispatcher's
    real_share = QuotaSharing.share

    def share(self):
        sharing.add(threading.current_thread().name)
        return real_share(self)

    monkeypatch.setattr(QuotaSharing, "share", share)
    fake = FakeGitHub(latency=0.05, change_share=0.5, seed=3)
    seed_normal(wire_db, fake, NETWORKS, utcnow())
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=8, normal_interval=3600)
        collector = Collector(wire_db, settings)
        watch = Watch()
        collector.observe(watch)
        serve(collector, lambda: ran_all(wire_db) and not collector.dispatcher.holding())
        collector.close()
    assert starts and sum(starts) < NETWORKS  # batches went ahead; the last ones, with nothing in flight, in place
    settled(wire_db, watch, fake)
    items = list(wire_db.items.find({}))
    assert items  # changed pages: their items stored, with their users' data looked up on the thread
    assert all(item["userData"]["email"] == item["user"] for item in items)
    assert sharing == {threading.main_thread().name}


def test_a_save_ahead_the_database_did_not_take_is_kept_and_retried(wire_db, monkeypatch):
    fake = FakeGitHub(latency=0.05)
    seed_normal(wire_db, fake, NETWORKS, utcnow())
    refused: list[int] = []
    real = Store.save_states

    def away_once(self, writes):
        if threading.current_thread().name == "save-ahead" and not refused:
            refused.append(len(writes))
            raise AutoReconnect("connection closed")
        return real(self, writes)

    monkeypatch.setattr(Store, "save_states", away_once)
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=8, normal_interval=3600)
        collector = Collector(wire_db, settings)
        watch = Watch()
        collector.observe(watch)
        serve(collector, lambda: ran_all(wire_db) and not collector.dispatcher.holding())
        collector.close()
    assert refused and watch.save_failures == 1  # one batch met the database away; it was kept, not dropped
    settled(wire_db, watch, fake)


def test_a_stop_while_a_save_is_out_waits_for_it(wire_db, monkeypatch):
    fake = FakeGitHub(latency=0.05)
    seed_normal(wire_db, fake, NETWORKS, utcnow())
    stop = threading.Event()
    real = Store.save_states

    def slow_then_stop(self, writes):
        if threading.current_thread().name == "save-ahead" and not stop.is_set():
            stop.set()  # the stop comes while this batch is in the database
            time.sleep(0.3)
        return real(self, writes)

    monkeypatch.setattr(Store, "save_states", slow_then_stop)
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=8, normal_interval=3600)
        collector = Collector(wire_db, settings)
        watch = Watch()
        collector.observe(watch)
        serve(collector, lambda: stop.is_set() or (ran_all(wire_db) and not collector.dispatcher.holding()))
        collector.close()
    assert stop.is_set()
    networks = list(wire_db.networks.find({}))
    ran = [n for n in networks if "lastExecution" in n]
    assert ran and fake.stats()["requests"] == len(ran) == len(watch.runs)  # every run out was saved and told
    assert all("leaseOwner" not in n for n in networks)


def test_an_engine_error_on_the_save_thread_is_raised_on_the_dispatchers(wire_db, monkeypatch):
    fake = FakeGitHub(latency=0.05)
    seed_normal(wire_db, fake, NETWORKS, utcnow())

    def broken(self, writes):
        if threading.current_thread().name == "save-ahead":
            raise RuntimeError("a bug in the save")
        return []

    monkeypatch.setattr(Store, "save_states", broken)
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=8, normal_interval=3600)
        collector = Collector(wire_db, settings)
        with pytest.raises(RuntimeError, match="a bug in the save"):
            serve(collector, lambda: ran_all(wire_db) and not collector.dispatcher.holding())
        collector.close()


def test_with_mongomock_in_the_process_saves_stay_on_the_dispatchers_thread(db, starts):
    fake = FakeGitHub(latency=0.02)
    seed_normal(db, fake, NETWORKS, utcnow())
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=8, normal_interval=3600)
        collector = Collector(db, settings)
        watch = Watch()
        collector.observe(watch)
        serve(collector, lambda: ran_all(db) and not collector.dispatcher.holding())
        collector.close()
    assert starts == []
    settled(db, watch, fake)


def test_while_a_save_hangs_claims_stop_once_the_outbox_holds_a_concurrency(wire_db, monkeypatch):
    """Runs that finish while a save is out wait for the next batch; once they are a concurrency's worth, no more
    networks are claimed: a database slow to save does not make the collector hold the whole collection."""
    fake = FakeGitHub(latency=0.01)
    seed_normal(wire_db, fake, NETWORKS, utcnow())
    during: list[int] = []
    steps = [0]  # the loop's rounds: while the save hangs, it waits for answers, it does not spin
    real, real_step = Store.save_states, Dispatcher.step

    def step(self):
        steps[0] += 1
        return real_step(self)

    def hangs_once(self, writes):
        if threading.current_thread().name == "save-ahead" and not during:
            before = steps[0]
            time.sleep(1.5)  # at 4 in flight and 10 ms a poll, time for every network to run twice over
            during.extend([fake.stats()["requests"], steps[0] - before])
        return real(self, writes)

    monkeypatch.setattr(Store, "save_states", hangs_once)
    monkeypatch.setattr(Dispatcher, "step", step)
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=4, normal_interval=3600)
        collector = Collector(wire_db, settings)
        watch = Watch()
        collector.observe(watch)
        serve(collector, lambda: ran_all(wire_db) and not collector.dispatcher.holding())
        collector.close()
    # held at most: the batch out, a concurrency in the outbox, what was claimed (three concurrencies), in flight
    assert during and during[0] <= 6 * 4
    assert during[1] < 100  # a round per answer, per timer (6 here); spinning made over a thousand in 1.5 s
    settled(wire_db, watch, fake)
