"""The collector's own recurring jobs on APScheduler: decided on the scheduler's thread, run on the loop's,
one instance at a time, coalesced, dropped past their grace, failures logged and counted, stopped with the
first signal; and the daemon's jobs themselves (heartbeat, stats, housekeeping, gauges, sweep)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest
from prometheus_client import generate_latest

from collector.daemon import Daemon
from collector.daemon.heartbeat import Heartbeat
from collector.daemon.jobs import Jobs
from collector.daemon.metrics import Metrics
from collector.engine import Collector
from collector.engine.quota import Facts
from collector.engine.store import Store
from collector.sdk.timeutil import utcnow

from helpers import T0, add_network, free_port


def wait_for(condition, seconds: float = 120.0) -> bool:
    """Poll until `condition()` holds; a bound against a hung test, not a timing assertion."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def jobs():
    made: list[Jobs] = []

    def make(**options) -> Jobs:
        made.append(Jobs(options.pop("grace", 60), **options))
        return made[-1]

    yield make
    for job in made:
        job.stop()


def test_a_due_job_runs_on_the_loops_thread_when_the_loop_comes_round(jobs):
    woken = threading.Event()
    ran: list[tuple] = []
    scheduler = jobs(clock=lambda: T0, wake=woken.set)
    outcomes: list[tuple[str, str]] = []
    scheduler.sinks.append(lambda job, outcome: outcomes.append((job, outcome)))
    scheduler.every("beat", 3600, lambda now: ran.append((now, threading.get_ident())), first=utcnow())
    scheduler.start()
    assert woken.wait(60)  # the scheduler's thread handed the run over and woke the loop...
    assert ran == []  # ...which runs it, not the scheduler's thread
    scheduler.on_tick(0)
    assert ran == [(T0, threading.get_ident())]
    assert outcomes == [("beat", "ok")] and scheduler.counts["beat", "ok"] == 1


def test_a_job_that_raises_is_logged_and_counted_and_the_others_still_run(jobs, caplog):
    metrics = Metrics("normal", "box-1", "0", bound=60)
    scheduler = jobs(clock=lambda: T0)
    scheduler.sinks.append(metrics.on_job)
    ran = []

    def broken(now):
        raise RuntimeError("boom")

    scheduler.every("broken", 3600, broken)
    scheduler.every("fine", 3600, ran.append)
    scheduler.start(paused=True)
    for job_id in ("broken", "fine"):
        scheduler.executor.submit_job(scheduler.scheduler.get_job(job_id), [utcnow()])
    with caplog.at_level(logging.ERROR, logger="collector.jobs"):
        assert scheduler.executor.drain() == 2
    assert ran == [T0]
    errors = [r for r in caplog.records if r.name == "collector.jobs" and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "job broken failed (RuntimeError: boom)" in errors[0].getMessage()
    assert "Traceback" in caplog.text and 'raise RuntimeError("boom")' in caplog.text  # with the traceback
    assert scheduler.counts["broken", "error"] == 1 and scheduler.counts["fine", "ok"] == 1
    text = generate_latest(metrics.registry).decode()
    assert 'collector_jobs_total{name="broken",outcome="error"} 1.0' in text
    assert 'collector_job_last_success_timestamp_seconds{name="fine"}' in text
    assert 'collector_job_last_success_timestamp_seconds{name="broken"}' not in text
    # and the failed job is still scheduled: it runs again at its next time
    assert scheduler.next_run("broken") is not None


def test_while_a_run_waits_for_a_busy_loop_the_next_ones_are_skipped_then_coalesced(jobs, caplog):
    ran = []
    scheduler = jobs()
    with caplog.at_level(logging.WARNING, logger="collector.jobs"):
        scheduler.every("beat", 0.02, ran.append, first=utcnow())
        scheduler.start()
        assert wait_for(lambda: scheduler.counts["beat", "skipped"] >= 3)  # the loop never came round
    warnings = [r.getMessage() for r in caplog.records if "still waits for the dispatch loop" in r.getMessage()]
    assert len(warnings) == 1  # said once, counted every time
    scheduler.on_tick(0)
    assert len(ran) == 1  # one instance at a time: the skipped runs were never queued


def test_a_quiet_job_counts_its_skips_and_database_outages_but_logs_only_its_other_failures(jobs, caplog):
    from pymongo.errors import AutoReconnect

    failures = [AutoReconnect("127.0.0.1:27017: connection closed"), RuntimeError("boom")]

    def beat(now):
        raise failures.pop(0)

    scheduler = jobs()
    with caplog.at_level(logging.DEBUG, logger="collector.jobs"):
        scheduler.every("stats", 0.02, beat, first=utcnow(), quiet=True)
        scheduler.start()
        assert wait_for(lambda: scheduler.counts["stats", "skipped"] >= 3)  # the loop never came round
        scheduler.on_tick(0)  # the database cannot be reached
        assert wait_for(lambda: scheduler.executor.drain() and scheduler.counts["stats", "error"] == 2)
    loud = [r.getMessage() for r in caplog.records if r.name == "collector.jobs" and r.levelno >= logging.WARNING]
    assert len(loud) == 1 and "job stats failed (RuntimeError: boom)" in loud[0]  # not the outage, not the skips
    assert "job stats: error (AutoReconnect" in caplog.text  # at DEBUG


def test_a_run_the_loop_reaches_after_its_grace_is_dropped(jobs, caplog):
    ran = []
    scheduler = jobs(grace=5)
    scheduler.every("late", 3600, ran.append)
    scheduler.start(paused=True)
    scheduler.executor.submit_job(scheduler.scheduler.get_job("late"), [utcnow() - timedelta(minutes=2)])
    with caplog.at_level(logging.WARNING, logger="collector.jobs"):
        scheduler.on_tick(0)
    assert ran == [] and scheduler.counts["late", "missed"] == 1
    assert "job late: the run due at" in caplog.text and "dropped" in caplog.text
    scheduler.executor.submit_job(scheduler.scheduler.get_job("late"), [utcnow()])  # the instance was released
    scheduler.on_tick(0)
    assert len(ran) == 1


def test_a_stop_drops_waiting_runs_and_ends_the_scheduler(jobs):
    stopping = threading.Event()
    ran = []
    scheduler = jobs(should_stop=stopping.is_set)
    scheduler.every("beat", 3600, ran.append)
    scheduler.start(paused=True)
    scheduler.executor.submit_job(scheduler.scheduler.get_job("beat"), [utcnow()])
    stopping.set()
    scheduler.on_tick(0)
    assert ran == [] and not scheduler.scheduler.running and scheduler.stopped
    scheduler.on_tick(0)
    scheduler.stop()  # twice is fine
    assert ran == []


def test_reloaded_intervals_and_cron_reschedule_the_jobs(db, settings):
    collector = Collector(db, settings.with_(heartbeat_seconds=15))
    daemon = Daemon(collector, "initial")
    daemon.heartbeat = Heartbeat(collector.store, "box-1", "initial", 15, "0")
    collector.observers.add(daemon.heartbeat)  # as Daemon.start_up wires it: it follows reloads itself
    daemon.jobs = daemon.start_jobs()
    try:
        daemon.load_settings = lambda: settings.with_(heartbeat_seconds=5, inactive_sweep_cron="30 2 * * *")
        applied = daemon.reload()
        assert applied == ["HEARTBEAT_SECONDS", "INACTIVE_SWEEP_CRON"]
        beat = daemon.jobs.scheduler.get_job("heartbeat")
        assert beat.trigger.interval == timedelta(seconds=5)
        assert beat.misfire_grace_time == 3 * 5 + settings.http_timeout and daemon.heartbeat.every == 5
        sweep = daemon.jobs.scheduler.get_job("inactive-sweep").trigger
        assert sweep.get_next_fire_time(None, T0) == T0.replace(hour=2, minute=30) + timedelta(days=1)
    finally:
        daemon.jobs.stop()
        collector.close()


def test_housekeeping_forgets_spent_quota_facts_and_clears_leases_of_dead_collectors(db, settings, caplog):
    collector = Collector(db, settings.with_(lease_seconds=300))
    now = T0
    dead = add_network(db, leaseOwner="box-dead", leaseUntil=now - timedelta(minutes=6), leaseToken="t1", leaseEpoch=4)
    lapsing = add_network(db, leaseOwner="box-slow", leaseUntil=now - timedelta(minutes=1), leaseToken="t2")
    live = add_network(db, leaseOwner="box-live", leaseUntil=now + timedelta(minutes=4), leaseToken="t3")
    collector.quotas.adopt(
        {"old": Facts(0, 60, now - timedelta(seconds=1)), "blocking": Facts(0, 60, now + timedelta(minutes=5))}
    )
    with caplog.at_level(logging.INFO, logger="collector.housekeeping"):
        done = collector.housekeep(now)
    assert done == {"quotaFactsForgotten": 1, "leasesCleared": 1, "waitsBounded": 0}
    assert len(collector.quotas) == 1
    cleared = db.networks.find_one({"_id": dead["_id"]})
    assert not {"leaseOwner", "leaseUntil", "leaseToken"} & set(cleared) and cleared["leaseEpoch"] == 4
    assert db.networks.find_one({"_id": lapsing["_id"]})["leaseOwner"] == "box-slow"  # not yet LEASE_SECONDS
    assert db.networks.find_one({"_id": live["_id"]})["leaseOwner"] == "box-live"
    assert "cleared 1 leases that lapsed over 300s ago or end further ahead than a lease reaches" in caplog.text
    assert "(held by box-dead: 1)" in caplog.text
    # the old lease's late save is still fenced by its epoch, exactly as before
    assert Store(db).save_state(dead["_id"], {"mode": "normal"}, (), 3) is False
    collector.close()


@pytest.mark.system
def test_the_daemon_runs_heartbeat_housekeeping_and_gauges_as_jobs_and_stops_them_first(db, settings):
    for k in range(3):
        add_network(db, user=f"u{k}@x.test", mode="normal", scheduledTo=utcnow() + timedelta(hours=1))
    add_network(
        db,
        user="gone@x.test",
        mode="normal",
        scheduledTo=utcnow() + timedelta(hours=1),
        leaseOwner="box-dead",
        leaseUntil=utcnow() - timedelta(hours=1),
        leaseToken="t-dead",
    )
    port = free_port()
    collector = Collector(
        db, settings.with_(metrics_port=port, heartbeat_seconds=0.05, loop_idle_pause=0.05), instance_id="box-8"
    )
    daemon = Daemon(collector, "normal")
    beats = []
    original = collector.store.beat
    collector.store.beat = lambda instance, doc: beats.append(doc.get("heartbeatAt")) or original(instance, doc)
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        assert wait_for(lambda: daemon.jobs is not None and daemon.jobs.scheduler.running)
        daemon.jobs.scheduler.modify_job("housekeeping", next_run_time=utcnow())  # due now, not in a minute
        assert wait_for(lambda: daemon.jobs.counts["housekeeping", "ok"] >= 1)
        assert wait_for(lambda: daemon.jobs.counts["heartbeat", "ok"] >= 3)
        assert wait_for(lambda: daemon.jobs.counts["gauges", "ok"] >= 1)
        text = generate_latest(daemon.metrics.registry).decode()
        assert 'collector_networks_due{mode="normal"} 0.0' in text  # all scheduled an hour ahead
        assert 'collector_jobs_total{name="heartbeat",outcome="ok"}' in text
    finally:
        daemon.on_signal(15)  # the first signal: jobs stop, the loop finishes and exits
        thread.join(30)
    assert not thread.is_alive() and daemon.jobs.stopped and not daemon.jobs.scheduler.running
    assert len([at for at in beats if at is not None]) >= 4  # the first at once, then the job's (not the stats beats)
    assert "leaseOwner" not in db.networks.find_one({"user": "gone@x.test"})
    assert db.collectors.count_documents({}) == 0  # a clean exit takes the heartbeat away


def test_once_runs_one_pass_and_no_jobs(db, settings):
    add_network(db, service="nosuch")
    collector = Collector(db, settings)
    daemon = Daemon(collector, "initial")
    assert daemon.run(once=True) == 0
    assert daemon.jobs is None and daemon.heartbeat is None
    assert db.collectors.count_documents({}) == 0 and db.networks.find_one({})["lastError"]["kind"]
    collector.close()
