"""Leases: several collectors share one mode safely. Time is driven through now=, never by sleeping."""

from __future__ import annotations

from datetime import timedelta

from collector import run_once
from collector.devtools.fakeapi import make_stars
from collector.engine import Collector
from collector.engine.dispatch import run_here
from collector.engine.run import admit
from collector.engine.saving import Saving

from helpers import T0, GitHubStub, add_network, network

LEASE = timedelta(seconds=300)


def test_claim_sets_owner_expiry_and_epoch(db, settings):
    doc = add_network(db)
    won = Collector(db, settings, instance_id="a").store.claim("initial", T0, 10, "a", T0 + LEASE)
    assert [n["_id"] for n in won] == [doc["_id"]]
    state = network(db, doc)
    assert (state["leaseOwner"], state["leaseUntil"], state["leaseEpoch"]) == ("a", T0 + LEASE, 1)


def test_a_leased_network_is_not_due_for_another_collector_until_the_lease_expires(db, settings):
    add_network(db)
    a = Collector(db, settings, instance_id="a").store
    b = Collector(db, settings, instance_id="b").store
    assert len(a.claim("initial", T0, 10, "a", T0 + LEASE)) == 1
    assert b.claim("initial", T0 + timedelta(seconds=1), 10, "b", T0 + LEASE) == []
    taken = b.claim("initial", T0 + LEASE, 10, "b", T0 + 2 * LEASE)  # a crashed: its lease ran out
    assert len(taken) == 1 and taken[0]["leaseOwner"] == "b" and taken[0]["leaseEpoch"] == 2


def test_claim_respects_the_limit_and_takes_the_most_overdue(db, settings):
    docs = [add_network(db, user=f"u{k}@x.test", scheduledTo=T0 - timedelta(minutes=k)) for k in range(5)]
    won = Collector(db, settings).store.claim("initial", T0, 2, "a", T0 + LEASE)
    assert [n["_id"] for n in won] == [docs[4]["_id"], docs[3]["_id"]]


def test_renew_extends_only_this_collectors_leases(db, settings):
    mine, theirs = add_network(db), add_network(db, user="b@x.test")
    store = Collector(db, settings).store
    store.claim("initial", T0, 1, "a", T0 + LEASE)
    store.claim("initial", T0, 1, "b", T0 + LEASE)
    assert store.renew([mine["_id"], theirs["_id"]], "a", T0 + 2 * LEASE) == 1
    assert network(db, mine)["leaseUntil"] == T0 + 2 * LEASE
    assert network(db, theirs)["leaseUntil"] == T0 + LEASE


def test_saving_releases_the_lease(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2))
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0, instance_id="a")
    state = network(db, doc)
    assert state["leaseEpoch"] == 1
    assert not {"leaseOwner", "leaseUntil", "leaseToken"} & set(state)


def test_a_stale_collectors_state_write_is_refused_but_its_items_are_kept_once(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(150, seed=11))
    doc = add_network(db)
    stalled = Collector(db, settings, instance_id="stalled")
    claimed = stalled.store.claim("initial", T0, 10, "stalled", T0 + LEASE)
    # the stalled collector's lease expires; another collector takes the network over and saves page 1
    report = run_once(db, "initial", settings, now=T0 + LEASE + timedelta(seconds=1), instance_id="fresh")
    assert report.tasks == 1 and network(db, doc)["page"] == 2
    # the stalled collector wakes up, runs its stale copy and tries to save it
    late = T0 + LEASE + timedelta(seconds=2)
    result = run_here(admit(claimed[0], stalled.registry), settings, stalled.http, late, 0.5, stalled.quotas)
    saving = Saving(result)
    stalled.saver.persist([saving], {})
    assert saving.state_saved is True and saving.accepted is False
    state = network(db, doc)
    assert state["page"] == 2 and state["lastExecution"] == T0 + LEASE + timedelta(seconds=1)
    assert db.items.count_documents({}) == 100  # the stale run's items were the same page: stored once


def test_two_collectors_alternating_never_run_a_network_twice_in_one_due_period(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(30, seed=12))
    docs = [add_network(db, user=f"u{k}@x.test", mode="normal") for k in range(6)]
    interval = timedelta(seconds=settings.normal_interval)
    runs: dict = {d["_id"]: [] for d in docs}
    for step in range(12):  # collectors a and b alternate, a pass every 5 minutes
        now = T0 + step * timedelta(minutes=5)
        before = {d["_id"]: network(db, d).get("lastExecution") for d in docs}
        run_once(db, "normal", settings, now=now, instance_id="ab"[step % 2])
        for d in docs:
            if network(db, d).get("lastExecution") != before[d["_id"]]:
                runs[d["_id"]].append(now)
    for times in runs.values():
        assert len(times) == 4  # 60 minutes, a 15-minute interval
        assert all(b - a >= interval for a, b in zip(times, times[1:], strict=False))


def test_stopping_gives_back_unstarted_leases(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(2))
    for k in range(4):
        add_network(db, user=f"u{k}@x.test")
    collector = Collector(db, settings, instance_id="a", concurrency=1)
    report = collector.run_pass("initial", now=T0, should_stop=lambda: True)
    collector.close()
    assert report.released == 4 and report.tasks == 0
    assert db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0
    assert run_once(db, "initial", settings, now=T0, instance_id="b").tasks == 4


def test_long_runs_have_their_leases_renewed(db, settings, monkeypatch):
    import threading

    from collector.engine.registry import Registry
    from collector.sdk.connector import Connector, Result

    release = threading.Event()

    class Slow(Connector):
        name = "slow"

        def initial(self, job):
            release.wait(timeout=30)
            return Result([], done=True)

        def normal(self, job):
            return self.initial(job)

    times = iter(T0 + timedelta(seconds=k) for k in range(10_000))
    collector = Collector(db, settings.with_(lease_seconds=0.15), instance_id="a", registry=Registry({"slow": Slow}))
    renewals = []
    real_renew = collector.store.renew

    def renew(ids, owner, until):
        renewals.append(until)
        if len(renewals) == 2:
            release.set()
        return real_renew(ids, owner, until)

    monkeypatch.setattr(collector.store, "renew", renew)
    doc = add_network(db, service="slow")
    collector.run_pass("initial", clock=lambda: next(times))
    collector.close()
    assert len(renewals) >= 2 and renewals == sorted(renewals)
    assert network(db, doc)["mode"] == "normal"
