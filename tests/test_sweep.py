"""The inactive-user sweep: skip who left, revive who is back, once a day among several collectors."""

from __future__ import annotations

import logging
from datetime import timedelta

import mongomock
import pytest

from collector.sweep import InactiveSweep, claim_day, next_run, sweep

from helpers import T0, add_network


def seed(db):
    db.users.insert_many(
        [
            {"email": "active@x.test", "loginLastDate": T0 - timedelta(days=3)},
            {"email": "gone@x.test", "loginLastDate": T0 - timedelta(days=90)},
            {"email": "never@x.test"},
            {"email": "back@x.test", "loginLastDate": T0 - timedelta(hours=1)},
        ]
    )
    return {
        "active": add_network(db, user="active@x.test"),
        "gone": add_network(db, user="gone@x.test"),
        "never": add_network(db, user="never@x.test", service="mastodon"),
        "back": add_network(db, user="back@x.test", skip=True, skipReason="inactive"),
        "held": add_network(db, user="back@x.test", service="reddit", skip=True, skipReason="manual"),
        "stranger": add_network(db, user="nobody@x.test"),
    }


def doc(db, network):
    return db.networks.find_one({"_id": network["_id"]})


def test_inactive_users_are_skipped_and_returning_ones_revived_in_small_batches(db):
    nets = seed(db)
    counts = sweep(db, T0, days=60, batch=2)  # four users: two batches and an empty read
    assert counts == {"users": 4, "skipped": 2, "revived": 1}
    for name in ("gone", "never"):
        assert doc(db, nets[name])["skip"] is True and doc(db, nets[name])["skipReason"] == "inactive"
    revived = doc(db, nets["back"])
    assert "skip" not in revived and "skipReason" not in revived and revived["scheduledTo"] == T0
    assert doc(db, nets["held"])["skipReason"] == "manual"  # skipped for another reason: not ours to undo
    assert "skip" not in doc(db, nets["active"]) and "skip" not in doc(db, nets["stranger"])
    assert sweep(db, T0, days=60) == {"users": 4, "skipped": 0, "revived": 0}  # idempotent


def test_only_one_of_two_collectors_sweeps_per_day(db):
    assert claim_day(db, T0, "box-1") is True
    assert claim_day(db, T0 + timedelta(minutes=1), "box-2") is False
    assert claim_day(db, T0 + timedelta(days=1), "box-2") is True
    assert db.jobs.find_one({"_id": "inactive-sweep"})["owner"] == "box-2"


def test_two_collectors_racing_at_the_cron_time_sweep_once(db, settings, caplog):
    seed(db)
    now = {"t": T0.replace(hour=3, minute=59)}
    jobs = [InactiveSweep(db, f"box-{i}", lambda: settings, clock=lambda: now["t"]) for i in (1, 2)]
    for job in jobs:
        job.on_tick(0)
    assert db.jobs.count_documents({}) == 0  # not 04:00 yet
    now["t"] = T0.replace(hour=4, minute=0, second=5)
    with caplog.at_level(logging.INFO, logger="collector.sweep"):
        for job in jobs:
            job.on_tick(0)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("2 networks skipped as inactive, 1 revived" in line for line in lines) == 1
    assert sum("another collector has today's" in line for line in lines) == 1
    assert all(job.due == T0.replace(hour=4) + timedelta(days=1) for job in jobs)


def test_zero_days_turns_it_off(db, settings):
    seed(db)
    job = InactiveSweep(db, "box-1", lambda: settings.with_(inactive_days=0), clock=lambda: T0 + timedelta(days=2))
    job.on_tick(0)
    assert db.networks.count_documents({"skip": True}) == 2 and db.jobs.count_documents({}) == 0


def test_a_database_failure_gives_the_day_back_for_a_retry(db, settings, monkeypatch):
    seed(db)
    now = {"t": T0.replace(hour=4, minute=1)}
    job = InactiveSweep(db, "box-1", lambda: settings, clock=lambda: now["t"])
    job.due = now["t"]

    def broken(*args, **kwargs):
        raise mongomock.OperationFailure("not primary")

    monkeypatch.setattr("collector.sweep.sweep", broken)
    with pytest.raises(mongomock.OperationFailure):
        job.on_tick(0)
    assert db.jobs.find_one({"_id": "inactive-sweep"})["day"] is None
    assert job.due == now["t"] + timedelta(minutes=5)
    assert claim_day(db, now["t"], "box-2") is True


def test_the_cron_expression_is_read_in_utc():
    assert next_run("0 4 * * *", T0.replace(hour=4, minute=0)) == T0.replace(hour=4) + timedelta(days=1)
    assert next_run("30 */6 * * *", T0.replace(hour=1)) == T0.replace(hour=6, minute=30)
