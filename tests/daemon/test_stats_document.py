"""The stats beat: every STATS_SECONDS each collector upserts the moving part of its `collectors` document — when,
the interval, what is in flight and running, the counters since start (with the HTTP requests made and the 304s
among them) and its process's memory and CPU time — for the monitor to difference. A reload moves the interval."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from collector.daemon import Daemon, procmetrics
from collector.daemon.heartbeat import Heartbeat, not_modified
from collector.daemon.procmetrics import SandboxProcessCollector, usage, usage_of
from collector.engine import Collector
from collector.engine.events import Saved
from collector.engine.registry import Registry
from collector.engine.rules import Update
from collector.engine.run import RunResult
from collector.engine.store import Store
from collector.sdk import Connector, Result
from collector.sdk.errors import Unauthorized

from helpers import T0, add_network

STATS_FIELDS = {"statsAt", "statsSeconds", "inflight", "running", "sinceStart", "process"}


def result(requests: int = 0, codes: tuple = (), error=None, mode: str = "normal", called: bool = True) -> RunResult:
    return RunResult(
        {"_id": "n1"}, "normal", Update({"mode": mode}), T0, error=error, called=called, requests=requests, codes=codes
    )


def heartbeat(db, **options) -> Heartbeat:
    beat = Heartbeat(Store(db), "box-1", "normal", 15, "9.9", clock=lambda: T0, **options)
    beat.usage = lambda: (52_428_800, 12.5)
    return beat


def test_the_counters_since_start_add_up_requests_and_not_modified_answers(db):
    beat = heartbeat(db)
    beat.on_run(result(requests=3, codes=(("200", 2), ("304", 1))), Saved(new_items=4, state_saved=True))
    beat.on_run(result(requests=2, codes=(("304", 2),)), Saved(new_items=0, state_saved=True))
    beat.on_run(result(requests=1, codes=(("401", 1),), error=Unauthorized("no")), Saved(0, state_saved=False))
    beat.on_run(result(mode="rateLimit", called=False), Saved(new_items=0, state_saved=True))  # skipped for quota
    assert beat.stats()["sinceStart"] == {
        "runs": {"ok": 2, "unauthorized": 1, "rateLimit": 1},
        "newItems": 4,
        "quotaSkips": 1,
        "lostLeases": 1,
        "saveFailures": 0,
        "requests": 6,
        "notModified": 3,
    }


def test_not_modified_counts_only_the_304_answers():
    assert not_modified(()) == 0
    assert not_modified((("200", 5), ("304", 2), ("error", 1), ("3040", 9))) == 2


def test_the_stats_beat_upserts_only_the_moving_part_and_leaves_the_heartbeat_alone(db):
    beat = heartbeat(db, stats_every=1.0)
    beat.max_running = lambda: 2
    beat.runs_now = lambda: {i: (f"net-{i}", "github", "u" * 200, T0) for i in range(3)}
    beat.beat()  # the full heartbeat first, as the daemon starts
    beat.on_tick(3)
    beat.on_run(result(requests=2, codes=(("304", 1),)), Saved(new_items=1, state_saved=True))
    beat.beat_stats(T0 + timedelta(seconds=1))
    doc = db.collectors.find_one({"_id": "box-1"})
    assert doc["heartbeatAt"] == T0 and doc["mode"] == "normal"  # the heartbeat's fields are kept
    assert doc["statsAt"] == T0 + timedelta(seconds=1) and doc["statsSeconds"] == 1.0 and doc["inflight"] == 3
    assert doc["sinceStart"]["requests"] == 2 and doc["sinceStart"]["notModified"] == 1
    assert doc["sinceStart"]["runs"] == {"ok": 1}
    assert doc["process"] == {"rssBytes": 52_428_800, "cpuSeconds": 12.5}
    assert [r["network"] for r in doc["running"]] == ["net-0", "net-1"]  # bounded by the runs it may hold
    assert set(doc["running"][0]) == {"network", "service", "user", "since"} and len(doc["running"][0]["user"]) <= 80


def test_a_stats_beat_alone_writes_exactly_the_stats_fields(db):
    beat = heartbeat(db, stats_every=2.5)
    beat.beat_stats()
    doc = db.collectors.find_one({"_id": "box-1"})
    assert set(doc) - {"_id"} == STATS_FIELDS
    assert doc["statsAt"] == T0 and doc["statsSeconds"] == 2.5 and doc["running"] == []
    assert isinstance(doc["process"]["rssBytes"], int) and isinstance(doc["process"]["cpuSeconds"], float)


def test_the_full_heartbeat_carries_the_stats_too(db):
    beat = heartbeat(db)
    document = beat.document()
    assert STATS_FIELDS <= set(document) and document["statsAt"] == document["heartbeatAt"] == T0
    assert {"startedAt", "heartbeatSeconds", "services", "jobs", "lastMinute"} <= set(document)


def test_the_stats_document_is_a_copy_of_the_counters(db):
    beat = heartbeat(db)
    before = beat.stats()
    beat.on_run(result(requests=1), Saved(new_items=1, state_saved=True))
    assert before["sinceStart"]["runs"] == {} and before["sinceStart"]["requests"] == 0
    assert beat.stats()["sinceStart"]["requests"] == 1


def test_the_process_figures_come_from_proc_self_stat(tmp_path):
    fields = ["S"] + [str(n) for n in range(1, 30)]
    fields[11], fields[12], fields[21] = str(3 * procmetrics.TICKS), str(procmetrics.TICKS), "100"
    (tmp_path / "stat").write_text("4242 (a (tricky) name) " + " ".join(fields))
    assert usage(str(tmp_path)) == (100 * procmetrics.PAGE, 4.0)
    values = SandboxProcessCollector(str(tmp_path)).values()  # the /metrics collector reads the same figures
    assert (values["rss"], values["cpu"]) == (100.0 * procmetrics.PAGE, 4.0)


def test_without_proc_self_the_process_figures_come_from_the_kernel(tmp_path):
    rss, cpu = usage(str(tmp_path / "absent"))  # the peak resident size and the CPU time getrusage gives
    assert rss > 1_000_000 and cpu > 0
    assert usage_of([b"S", b"1"])[0] > 1_000_000  # a truncated stat line is no stat line


def test_this_process_reports_its_own_memory_and_cpu():
    rss, cpu = usage()
    assert rss > 1_000_000 and cpu > 0


def test_the_daemon_runs_the_stats_job_and_a_reload_moves_its_interval(db, settings):
    collector = Collector(db, settings.with_(stats_seconds=1.0))
    daemon = Daemon(collector, "normal")
    daemon.heartbeat = Heartbeat(collector.store, "box-1", "normal", 15, "0", stats_every=1.0)
    collector.observers.add(daemon.heartbeat)  # as Daemon.start_up wires it: it follows reloads itself
    daemon.jobs = daemon.start_jobs()
    try:
        assert daemon.jobs.scheduler.get_job("stats").trigger.interval == timedelta(seconds=1)
        daemon.load_settings = lambda: settings.with_(stats_seconds=0.5)
        assert daemon.reload() == ["STATS_SECONDS"]
        assert daemon.jobs.scheduler.get_job("stats").trigger.interval == timedelta(seconds=0.5)
        assert daemon.jobs.plans["stats"] == "every 0.5s" and daemon.heartbeat.stats_every == 0.5
        assert daemon.heartbeat.stats()["statsSeconds"] == 0.5
    finally:
        daemon.jobs.stop()
        collector.close()


class Slow(Connector):
    """A run that lasts until the test lets it end."""

    name = "slow"
    gate = threading.Event()

    def initial(self, job):
        assert type(self).gate.wait(60)
        return Result([{"itemId": job.network["user"], "source": "https://x.test/"}], done=True)

    def normal(self, job):
        return self.initial(job)


def test_the_stats_beat_goes_on_while_a_slow_run_is_all_the_loop_waits_for(db, settings):
    """The loop waits for runs to finish at most STATS_SECONDS at a time, so the job runs on time even when
    nothing finishes and the next heartbeat or claim is far off."""
    add_network(db, service="slow")
    quiet = settings.with_(heartbeat_seconds=600, stats_seconds=0.05, loop_idle_pause=600)
    collector = Collector(db, quiet, registry=Registry({"slow": Slow}), instance_id="box-4")
    daemon = Daemon(collector, "initial")
    Slow.gate.clear()
    beats: list[int] = []
    original = collector.store.beat
    collector.store.beat = lambda i, doc: (
        (beats.append(doc["inflight"]) if "heartbeatAt" not in doc else None) or (original(i, doc))
    )
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        deadline = time.monotonic() + 30  # a bound against a hung test, not a timing assertion
        while beats.count(1) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert beats.count(1) >= 3  # stats beats while the one network is still in flight
    finally:
        daemon.on_signal(15)
        Slow.gate.set()
        thread.join(30)
    assert not thread.is_alive() and db.collectors.count_documents({}) == 0
