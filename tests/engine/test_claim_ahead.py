"""Claiming ahead (engine/claimahead.py): with a thread-safe database client (pymongo, here against the mongowire
stand-in on a real socket), the claim's database work runs on a thread of its own while runs are in flight; what
it leases is taken in on the dispatcher's thread, or given back when a stop came meanwhile; every network runs
once; the database's reports reach the observers from the dispatcher's thread only."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from pymongo import MongoClient

from collector.devtools.fakeapi import FakeGitHub, FakeServer
from collector.devtools.mongowire import WireServer as MongoWire
from collector.devtools.workloads import seed_normal
from collector.engine import Collector, claimahead
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
    """The claims started ahead, and the thread each database report reached the observers on."""
    seen = {"starts": 0}
    real = claimahead.ClaimAhead.start

    def counted(self, *args, **kwargs):
        seen["starts"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(claimahead.ClaimAhead, "start", counted)
    return seen


class Threads:
    """An observer that remembers the threads the database's reports came from."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def on_database(self, operation, seconds, error) -> None:
        self.threads.add(threading.current_thread().name)


def serve_until(collector: Collector, done) -> None:
    deadline = time.monotonic() + 120  # only ends a hung test
    collector.serve("normal", lambda: done() or time.monotonic() > deadline, wait=lambda s: time.sleep(min(s, 0.05)))


def test_claims_go_ahead_while_runs_are_in_flight_and_every_network_runs_once(wire_db, starts):
    fake = FakeGitHub(latency=0.05)
    seed_normal(wire_db, fake, NETWORKS, utcnow())
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=4, normal_interval=3600)
        collector = Collector(wire_db, settings)
        threads = Threads()
        collector.observe(threads)
        serve_until(
            collector, lambda: wire_db.networks.count_documents({"lastExecution": {"$exists": True}}) == NETWORKS
        )
        collector.close()
        polled = fake.stats()["requests"]
    assert starts["starts"] >= 1  # claims went ahead while runs were in flight
    assert polled == NETWORKS  # each network polled once: no claim took one twice
    runs = list(wire_db.networks.find({}, {"lastError": 1, "leaseOwner": 1, "scheduledTo": 1}))
    assert all("lastError" not in n and "leaseOwner" not in n for n in runs)
    assert all(n["scheduledTo"] > utcnow() + timedelta(minutes=50) for n in runs)  # due again in an hour
    assert threads.threads == {threading.current_thread().name}  # told from the dispatcher's thread only


def test_what_a_claim_ahead_brings_back_after_a_stop_is_given_back_unrun(wire_db, monkeypatch):
    fake = FakeGitHub(latency=0.3)
    seed_normal(wire_db, fake, NETWORKS, utcnow())
    stop = threading.Event()
    real_lease = claimahead.Claims.lease

    def lease_then_stop(self, *args, **kwargs):
        documents = real_lease(self, *args, **kwargs)
        if threading.current_thread().name == "claim-ahead":
            stop.set()  # the stop comes while this claim's answer is on its way back
        return documents

    monkeypatch.setattr(claimahead.Claims, "lease", lease_then_stop)
    with FakeServer(fake) as url:
        settings = settings_for_tests(github_api_url=url, concurrency=2, normal_interval=3600)
        collector = Collector(wire_db, settings)
        deadline = time.monotonic() + 120
        collector.serve("normal", lambda: stop.is_set() or time.monotonic() > deadline, wait=time.sleep)
        collector.close()
    assert stop.is_set()
    networks = list(wire_db.networks.find({}))
    ran = [n for n in networks if "lastExecution" in n]
    unrun = [n for n in networks if "lastExecution" not in n]
    assert ran and unrun and fake.stats()["requests"] == len(ran)
    assert all("leaseOwner" not in n and "leaseToken" not in n for n in networks)  # every lease given back
    assert all(n["scheduledTo"] <= utcnow() for n in unrun)  # due again at once, not held to a lease's end


def test_a_pause_read_while_a_claim_ahead_was_out_holds_what_it_brings_back(wire_db, monkeypatch):
    """The operator pauses the mode while a claim's round trips are out (the first half of the networks in flight,
    slots free, the second half coming due): the networks it brings back are given back unrun, as a claim made
    after the pause would not have taken them."""
    fake = FakeGitHub(latency=1.0)
    seed_normal(wire_db, fake, NETWORKS, utcnow())
    later = [n["_id"] for n in wire_db.networks.find({}, {"_id": 1})][NETWORKS // 2 :]
    wire_db.networks.update_many({"_id": {"$in": later}}, {"$set": {"scheduledTo": utcnow() + timedelta(seconds=0.5)}})
    brought: list[object] = []
    real_lease = claimahead.Claims.lease

    def lease_then_pause(self, *args, **kwargs):
        documents = real_lease(self, *args, **kwargs)
        if threading.current_thread().name == "claim-ahead" and documents and not brought:
            wire_db.control.insert_one({"_id": "pause:normal:*", "mode": "normal", "service": "*", "by": "test"})
            self.pauses_read_at = 0.0  # read at the next look, not a heartbeat later
            brought.extend(d["_id"] for d in documents)
        return documents

    monkeypatch.setattr(claimahead.Claims, "lease", lease_then_pause)
    with FakeServer(fake) as url:
        settings = settings_for_tests(
            github_api_url=url, concurrency=64, service_concurrencies={"github": 64}, normal_interval=3600
        )
        collector = Collector(wire_db, settings)
        deadline = time.monotonic() + 120

        def done() -> bool:
            if time.monotonic() > deadline:
                return True
            if not brought or collector.dispatcher.inflight:
                return False
            held = wire_db.networks.count_documents({"_id": {"$in": brought}, "leaseOwner": {"$exists": True}})
            return held == 0 and wire_db.networks.count_documents({"lastExecution": {"$exists": True}}) >= len(later)

        collector.serve("normal", done, wait=lambda s: time.sleep(min(s, 0.05)))
        collector.close()
    assert brought  # a claim went ahead and came back after the pause
    ran = wire_db.networks.count_documents({"_id": {"$in": brought}, "lastExecution": {"$exists": True}})
    assert len(brought) == NETWORKS // 2 and ran == 0 and fake.stats()["requests"] == NETWORKS // 2
