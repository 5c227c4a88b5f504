"""The inactive-user sweep: skip who left, revive who is back, once a day among several collectors."""

from __future__ import annotations

import logging
from datetime import timedelta

import mongomock
import pytest
from pymongo.errors import DuplicateKeyError

from collector.daemon import Daemon
from collector.daemon.jobs import Jobs
from collector.daemon.sweep import InactiveSweep, claim_day, sweep
from collector.engine import Collector

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
    assert counts == {"users": 4, "skipped": 2, "revived": 1, "unreadable": 0}
    for name in ("gone", "never"):
        assert doc(db, nets[name])["skip"] is True and doc(db, nets[name])["skipReason"] == "inactive"
    revived = doc(db, nets["back"])
    assert "skip" not in revived and "skipReason" not in revived and revived["scheduledTo"] == T0
    assert doc(db, nets["held"])["skipReason"] == "manual"  # skipped for another reason: not ours to undo
    assert "skip" not in doc(db, nets["active"]) and "skip" not in doc(db, nets["stranger"])
    assert sweep(db, T0, days=60) == {"users": 4, "skipped": 0, "revived": 0, "unreadable": 0}  # idempotent


def test_every_user_is_seen_whatever_the_type_of_its_id_and_string_dates_are_read(db):
    recent, old = T0 - timedelta(days=1), T0 - timedelta(days=400)
    db.users.insert_many(
        [
            {"_id": 7, "email": "num@x.test", "loginLastDate": old},
            {"_id": "abc", "email": "str@x.test", "loginLastDate": old},
            {"email": "oid@x.test", "loginLastDate": old},  # an ObjectId
            {"_id": 8, "email": "iso@x.test", "loginLastDate": recent.isoformat()},  # a writer that kept a string
            {"_id": 9, "email": "junk@x.test", "loginLastDate": ["yesterday"]},
            {"_id": 10, "email": "naive@x.test", "loginLastDate": recent.replace(tzinfo=None)},
        ]
    )
    for who in ("num", "str", "oid", "iso", "junk", "naive"):
        add_network(db, user=f"{who}@x.test")
    counts = sweep(db, T0, days=60, batch=1)  # a batch ending on a number must not hide the strings and ObjectIds
    assert counts == {"users": 6, "skipped": 3, "revived": 0, "unreadable": 1}
    skipped = {n["user"] for n in db.networks.find({"skip": True})}
    assert skipped == {"num@x.test", "str@x.test", "oid@x.test"}  # junk cannot be read: counted as active


def test_only_one_of_two_collectors_sweeps_per_day(db):
    assert claim_day(db, T0, "box-1") is True
    assert claim_day(db, T0 + timedelta(minutes=1), "box-2") is False
    assert claim_day(db, T0 + timedelta(days=1), "box-2") is True
    assert db.jobs.find_one({"_id": "inactive-sweep"})["owner"] == "box-2"


def test_an_upsert_lost_to_another_collector_is_not_a_win(db, monkeypatch):
    def raced(*args, **kwargs):  # MongoDB's answer when two upserts of the same _id meet
        raise DuplicateKeyError("E11000 duplicate key error collection: likeastore.jobs index: _id_")

    monkeypatch.setattr(db.jobs, "update_one", raced)
    assert claim_day(db, T0, "box-2") is False


def test_two_collectors_racing_at_the_cron_time_sweep_once(db, settings, caplog):
    seed(db)
    retries = []
    jobs = [InactiveSweep(db, f"box-{i}", lambda: settings, retry=retries.append) for i in (1, 2)]
    at = T0.replace(hour=4, minute=0, second=5)
    with caplog.at_level(logging.INFO, logger="collector.sweep"):
        results = [job(at) for job in jobs]
    assert results == [{"users": 4, "skipped": 2, "revived": 1, "unreadable": 0}, None]
    lines = [r.getMessage() for r in caplog.records]
    assert sum("2 networks skipped as inactive, 1 revived" in line for line in lines) == 1
    assert sum("another collector has today's" in line for line in lines) == 1
    assert db.jobs.find_one({"_id": "inactive-sweep"})["owner"] == "box-1" and retries == []


def test_the_daemon_schedules_the_sweep_at_the_cron_time_in_utc(db, settings):
    collector = Collector(db, settings.with_(inactive_sweep_cron="15 3 * * *"))
    daemon = Daemon(collector, "initial")
    jobs, normal = daemon.start_jobs(), Daemon(collector, "normal").start_jobs()
    try:
        trigger = jobs.scheduler.get_job("inactive-sweep").trigger
        assert trigger.get_next_fire_time(None, T0) == T0.replace(hour=3, minute=15) + timedelta(days=1)
        assert normal.scheduler.get_job("inactive-sweep") is None  # the initial collector's job only
    finally:
        jobs.stop()
        normal.stop()
        collector.close()


def test_zero_days_turns_it_off(db, settings):
    seed(db)
    job = InactiveSweep(db, "box-1", lambda: settings.with_(inactive_days=0), retry=lambda at: None)
    assert job(T0 + timedelta(days=2)) is None
    assert db.networks.count_documents({"skip": True}) == 2 and db.jobs.count_documents({}) == 0


def test_a_database_failure_gives_the_day_back_for_a_retry(db, settings, monkeypatch):
    seed(db)
    now = T0.replace(hour=4, minute=1)
    retries = []
    job = InactiveSweep(db, "box-1", lambda: settings, retry=retries.append)

    def broken(*args, **kwargs):
        raise mongomock.OperationFailure("not primary")

    monkeypatch.setattr("collector.daemon.sweep.sweep", broken)
    with pytest.raises(mongomock.OperationFailure):
        job(now)
    assert db.jobs.find_one({"_id": "inactive-sweep"})["day"] is None
    assert retries == [now + timedelta(minutes=5)]
    assert claim_day(db, now, "box-2") is True


def next_run(cron, after):
    """When the daemon's cron job fires first after `after`."""
    jobs = Jobs(60)
    return jobs.cron("inactive-sweep", cron, lambda now: None).trigger.get_next_fire_time(
        None, after + timedelta(seconds=1)
    )


def test_the_cron_expression_is_read_in_utc():
    assert next_run("0 4 * * *", T0.replace(hour=4, minute=0)) == T0.replace(hour=4) + timedelta(days=1)
    assert next_run("30 */6 * * *", T0.replace(hour=1)) == T0.replace(hour=6, minute=30)


JS_FORMS = {
    "date": lambda at: at,
    "naive date": lambda at: at.replace(tzinfo=None),
    "iso": lambda at: at.isoformat(),
    "iso Z": lambda at: at.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
    "epoch ms": lambda at: int(at.timestamp() * 1000),
    "epoch s": lambda at: int(at.timestamp()),
    "epoch float": lambda at: at.timestamp(),
    "epoch ms text": lambda at: str(int(at.timestamp() * 1000)),
    "Date.toString()": lambda at: (
        (at + timedelta(hours=2)).strftime("%a %b %d %Y %H:%M:%S GMT+0200") + " (Eastern European Standard Time)"
    ),
    "Date.toUTCString()": lambda at: at.strftime("%a, %d %b %Y %H:%M:%S GMT"),
    "{$date}": lambda at: {"$date": at.strftime("%Y-%m-%dT%H:%M:%SZ")},
    "{date}": lambda at: {"date": at},
}


def test_every_form_the_web_app_may_have_stored_is_read(db):
    from collector.daemon.logindates import login_date

    recent, old = T0 - timedelta(days=1, minutes=7), T0 - timedelta(days=400)
    for form, write in JS_FORMS.items():
        for age, at in (("recent", recent), ("old", old)):
            seen = login_date(write(at))
            assert abs((seen - at).total_seconds()) < 1, (form, age, seen)
            db.users.insert_one({"email": f"{form}-{age}@x.test", "loginLastDate": write(at)})
            add_network(db, user=f"{form}-{age}@x.test")
    counts = sweep(db, T0, days=60, batch=3)
    skipped = {n["user"] for n in db.networks.find({"skip": True})}
    assert skipped == {f"{form}-old@x.test" for form in JS_FORMS} and counts["unreadable"] == 0


def test_a_date_that_cannot_be_read_never_stops_a_user_and_is_logged_once(db, caplog):
    import logging

    junk = ["yesterday", "Tue Foo 99 2026", True, float("nan"), [T0], {"when": "?"}, "2026-13-45", "x" * 5000, -5]
    for k, value in enumerate(junk):
        db.users.insert_one({"email": f"u{k}@x.test", "loginLastDate": value})
        add_network(db, user=f"u{k}@x.test")
    db.users.insert_one({"email": "none@x.test"})  # missing: never logged in, as far as anyone knows
    add_network(db, user="none@x.test")
    with caplog.at_level(logging.WARNING, logger="collector.sweep"):
        counts = sweep(db, T0, days=60, batch=4)
    assert counts["unreadable"] == len(junk) and counts["skipped"] == 1
    assert [n["user"] for n in db.networks.find({"skip": True})] == ["none@x.test"]
    lines = [r for r in caplog.records if r.name == "collector.sweep"]
    assert len(lines) == 1 and f"{len(junk)} users have a loginLastDate that cannot be read" in lines[0].getMessage()


def test_the_most_recent_login_of_every_document_of_one_email_decides_across_batches(db):
    recent, old = T0 - timedelta(days=1), T0 - timedelta(days=400)
    # the same email three times (two app versions and a shell insert), around other users
    db.users.insert_many(
        [
            {"email": "dup@x.test", "loginLastDate": old},
            {"email": "a@x.test", "loginLastDate": old},
            {"email": "dup@x.test", "loginLastDate": old.isoformat()},
            {"email": "z@x.test", "loginLastDate": recent},
            {"email": "dup@x.test", "loginLastDate": int(recent.timestamp() * 1000)},
        ]
    )
    for who in ("dup", "a", "z"):
        add_network(db, user=f"{who}@x.test")
    for batch in (1, 2, 3, 500):
        db.networks.update_many({}, {"$unset": {"skip": "", "skipReason": ""}})
        sweep(db, T0, days=60, batch=batch)
        assert {n["user"] for n in db.networks.find({"skip": True})} == {"a@x.test"}, batch


def test_inactive_days_is_bounded(tmp_path):
    import pytest

    from collector.settings import SettingsError, load_settings

    for bad in ("-1", "36501", "99999999999", "1e9"):
        with pytest.raises(SettingsError, match="INACTIVE_DAYS"):
            load_settings(environ={"INACTIVE_DAYS": bad}, env="test", read_dotenv=False)
    assert load_settings(environ={"INACTIVE_DAYS": "36500"}, env="test", read_dotenv=False).inactive_days == 36500
