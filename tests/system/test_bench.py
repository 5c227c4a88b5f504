"""`collector bench` on a tiny workload, a real process: it runs every part and reports every figure, consistently
(no timing asserts: speed is what the command reports, not what tests check), and leaves its TMPDIR empty. The one
run serves both (the module is one xdist group: a tiny bench takes half a minute)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from collector.devtools import bench

from helpers.proc import fresh_tmpdir, left_in

pytestmark = pytest.mark.xdist_group("bench_tiny")

BENCH_TINY = "--networks 4 --pages 2 --series-networks 1 --latencies 0 --concurrency 4 --compare-concurrency 2"
BENCH_TINY += " --poll-networks 8 --polls 40 --poll-latency 0 --cycle-networks 12 --cycle-latency 0 --quota-networks 2"
BENCH_TINY += " --quota 5 --quota-window 1 --quota-windows 1 --quota-pages 20 --soak-runs 60 --soak-networks 5"
BENCH_TINY += " --floor-pages 4 --floor-polls 20 --sink-networks 2 --split-processes 2 --claim-networks 20"
BENCH_TINY += " --run-lines 50 --goal-concurrency 4 --scale-networks 20 --scale-latency 0"

FIELDS = (
    "networks",
    "latency_ms",
    "concurrency",
    "wall_s_series",
    "wall_s_concurrent",
    "speedup",
    "speedup_bound",
    "efficiency",
    "cpu_ms_per_task",
    "db_ms_per_task",
    "engine_cpu_ms_per_page",
    "engine_cpu_ms_per_poll",
    "polls_per_s",
    "cycle_s_3000",
    "requests_over_quota",
    "quota_utilization",
    "rss_mb_start",
    "rss_mb_end",
    "database_apart",
    "engine_cpu_ms_per_page_apart",
    "engine_cpu_ms_per_poll_apart",
    "efficiency_apart",
    "floor_ms_per_page",
    "floor_ms_per_page_zlib_ng",
    "floor_ms_per_poll",
    "floor_ms_per_poll_socket",
    "floor_ms_per_poll_threads",
    "engine_vs_floor_page",
    "engine_vs_floor_page_zlib_ng",
    "engine_vs_floor_poll",
    "engine_vs_floor_poll_threads",
    "split_processes",
    "efficiency_apart_split",
    "speedup_apart_split",
    "engine_cpu_ms_per_page_apart_split",
)


def within_rounding(ratio: float, num: float, den: float) -> bool:
    """`ratio` (to 3 places) is num / den where num and den were each rounded to 2 places apart: the quotient of
    two rounded figures can stray far from the rounded ratio when they are small (0.42 / 0.43 for 0.988)."""
    half = 0.005
    low, high = (num - half) / (den + half), (num + half) / (den - half)
    return low - 0.0005 <= ratio <= high + 0.0005


def assert_sink_figures(result: dict, walk_items: int, items: int) -> None:
    """The sink workload's figures: both sides of the walk, their ratios, every item delivered and held."""
    assert result["sink_process"] == "collector sink" and result["sink_runs"] == 3
    for name in ("efficiency", "speedup", "engine_cpu_ms_per_page", "db_ms_per_task", "wall_s_concurrent"):
        off, on = result[f"{name}_apart_sink_off"], result[f"{name}_apart_sink_on"]
        assert off > 0 and on > 0 and abs(result[f"{name}_sink_on_vs_off"] - on / off) < 0.001 + 0.001 * on / off
    for name in ("standin_cpu_ms_per_task_sink_off", "standin_cpu_ms_per_task_sink_on", "sink_cpu_ms_per_task_sink_on"):
        assert result[name] >= 0  # CPU in clock ticks (10 ms): a tiny walk may cost none
    assert result["sink_walk_items"] == walk_items and 0 <= result["sink_delivered_during_walk"] <= walk_items
    assert result["sink_items"] == result["sink_delivered"] == result["sink_held"] == items
    assert result["sink_left"] == {"queued": 0, "marked": 0, "dead_letters": 0}
    rate = result["sink_items_per_s"]
    assert rate is None or (rate > 0 and result["sink_cpu_ms_per_item"] > 0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[dict, list[str]]:
    """One `collector bench` on the tiny workload, run as a user runs it, with TMPDIR a fresh empty folder: its
    report, and whatever it left in that folder."""
    temp, work, env = fresh_tmpdir(tmp_path_factory.mktemp("bench"))
    done = subprocess.run(
        [sys.executable, "-m", "collector", "bench", *BENCH_TINY.split()],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout), left_in(temp)


def test_the_bench_leaves_its_temporary_folder_empty(tiny):
    assert tiny[1] == []


def test_bench_reports_every_figure_on_a_tiny_workload(tiny):
    result = tiny[0]
    assert set(FIELDS) <= set(result)
    assert result["networks"] == 4 and result["database"] == "mongomock"
    assert [(p["concurrency"], p["tasks"]) for p in result["points"]] == [(2, 8), (4, 8)]  # 4 networks x 2 pages
    assert result["requests_over_quota"] == 0
    assert result["quota_requests_allowed"] == 10 and 0 < result["quota_requests_used"] <= 10
    assert result["soak_runs"] >= 60 and result["cycle_networks"] == 12
    assert within_rounding(result["efficiency"], result["speedup"], result["speedup_bound"])
    assert result["database_apart"] == "mongowire"  # the stand-in in a process of its own
    page, poll = result["engine_cpu_ms_per_page_apart"], result["engine_cpu_ms_per_poll_apart"]
    assert abs(result["engine_vs_floor_page"] - page / result["floor_ms_per_page"]) < 0.01
    assert abs(result["engine_vs_floor_page_zlib_ng"] - page / result["floor_ms_per_page_zlib_ng"]) < 0.01
    assert abs(result["engine_vs_floor_poll"] - poll / result["floor_ms_per_poll"]) < 0.01
    assert abs(result["engine_vs_floor_poll_threads"] - poll / result["floor_ms_per_poll_threads"]) < 0.01
    assert 0 < result["floor_ms_per_poll_socket"] < result["floor_ms_per_poll"]  # the bottom line lies below urllib3
    assert_sink_figures(result, walk_items=4 * 2 * bench.PER_PAGE, items=2 * 2 * bench.PER_PAGE)
    assert result["sink"] == "opensearch" and result["sink_destination"].startswith("osmem-server")
    assert result["split_processes"] == 2  # the walk again, by two collectors under leases (each stored it whole)
    assert result["speedup_bound_apart_split"] > 0  # (each split figure is a median of its own: no ratio between them)
    observed = result["engine_cpu_ms_per_poll_apart_observed"]  # the goal's figures (test_bench_goal.py)
    assert abs(result["engine_vs_bench_floor_poll_observed"] - observed / result["floor_ms_per_poll"]) < 0.01
    assert result["engine_vs_floor_poll_observed"] > 0 and result["floor_ms_per_poll_observed"] > 0
    assert result["processes_for_10M"] >= 1 and result["engine_cpu_ms_per_network_20"] > 0
    for key in (
        "wall_s_concurrent",
        "speedup",
        "speedup_bound",
        "cpu_ms_per_task",
        "engine_cpu_ms_per_page",
        "engine_cpu_ms_per_poll",
        "polls_per_s",
        "cycle_s_3000",
        "rss_mb_end",
        "engine_cpu_ms_per_page_apart",
        "engine_cpu_ms_per_poll_apart",
        "floor_ms_per_page",
        "floor_ms_per_page_zlib_ng",
        "efficiency_apart",
        "efficiency_apart_split",
        "engine_cpu_ms_per_page_apart_split",
    ):
        assert result[key] > 0


def test_database_cpu_counts_a_store_call_made_inside_another_once(db, settings):
    import time

    from collector.engine import Collector

    from helpers import add_network

    collector = Collector(db, settings)
    assert collector.store.mongomock  # where save_states goes through save_state, one write at a time
    docs = [add_network(db, user=f"u{k}@x.test", leaseEpoch=1) for k in range(300)]
    spent = bench.time_store(collector)
    started = time.thread_time()
    collector.store.save_states([(d["_id"], {"page": 2}, (), 1) for d in docs])
    outer = time.thread_time() - started
    assert 0 < spent["db"] <= outer  # counted twice, it would be about twice the call's own CPU
    collector.close()


def test_the_apart_figures_are_the_medians_of_three_runs(monkeypatch):
    """One run of a workload moved by ±15% between benches: the apart figures are medians of RUNS_APART runs."""
    from collector.devtools import bench
    from collector.devtools.options import Options

    pages = iter([5.0, 9.0, 4.0])
    split_pages = iter([3.0, 2.0, 7.0])
    polls = iter([(3.0, 0.1), (1.0, 0.1), (2.0, 0.1)])  # (cpu_s, db_s) of 1,000 polls each

    def point(opts, dbs, latency, concurrency, per_task, processes=1):
        page = next(pages if processes == 1 else split_pages)
        return {
            "engine_cpu_ms_per_page": page,
            "efficiency": page / 10,
            "speedup": page,
            "speedup_bound": 10.0,
            "db_ms_per_task": 1.0,
            "over_quota": 0,
        }

    def quiet(*args):
        cpu, db = next(polls)
        return {"cpu_s": cpu, "db_s": db, "polls": 1000, "over_quota": 0}

    monkeypatch.setattr(bench, "series_per_task", lambda *args: (0.6, 0))
    monkeypatch.setattr(bench, "history_point", point)
    monkeypatch.setattr(bench, "polls", quiet)
    result = bench.standin_apart(Options(), None)
    assert result["engine_cpu_ms_per_page_apart"] == 5.0 and result["efficiency_apart"] == 0.5
    assert result["engine_cpu_ms_per_poll_apart"] == 1.9  # (2.0 - 0.1) s over 1,000 polls
    assert result["split_processes"] == 2 and result["engine_cpu_ms_per_page_apart_split"] == 3.0
    assert result["efficiency_apart_split"] == 0.3


def test_collectors_in_processes_of_their_own_share_a_walk_under_leases_each_page_fetched_once():
    """The scale-out docs/performance.md assumes (one collector per core, leases on one database): two processes walk
    every network's history to normal mode together, no page fetched twice, every star stored once."""
    from collector.devtools.mongowire import WireProcess
    from collector.devtools.options import Options

    opts = Options(networks=6, pages=2, latency_sigma=0.0)
    with WireProcess() as uri:
        dbs = bench.Databases(uri, standin=True)
        try:
            walk = bench.history(opts, dbs, 0.0, 4, opts.networks, processes=2)
            stored = dbs.client[dbs.created[-1]].items.count_documents({})
        finally:
            dbs.close()
    assert stored == 6 * 2 * bench.PER_PAGE  # history() also refuses a walk that stored any other number
    assert walk["tasks"] == 6 * 2 and walk["pages"] == 6 * 2  # each page requested once, by one of the two
    assert walk["over_quota"] == 0 and walk["cpu_s"] > 0


def test_a_server_holds_one_workloads_database_at_a_time():
    """On a server (here the mongowire stand-in), the next workload's database replaces the last one: left in
    place, each workload's items slowed the ones after it; all of them are dropped at the end."""
    from collector.devtools.mongowire import WireProcess

    with WireProcess() as uri:
        dbs = bench.Databases(uri, standin=True)
        first = dbs.new()
        first.items.insert_one({"_id": 1})
        assert first.items.count_documents({}) == 1
        second = dbs.new()
        second.items.insert_one({"_id": 2})
        assert first.items.count_documents({}) == 0  # dropped when the next was made
        assert second.items.count_documents({}) == 1
        dbs.close()
        check = bench.Databases(uri, standin=True)
        assert check.client[second.name].items.count_documents({}) == 0  # and the last one at the end
        check.close()


def test_a_scale_out_walk_that_cannot_start_says_why_and_leaves_no_child_waiting():
    import pytest

    from collector.devtools import scaleout
    from collector.devtools.mongowire import WireProcess

    def prepare():
        raise OSError("the stand-in refused the index drop")

    with WireProcess() as uri:
        settings = bench.bench_settings("http://127.0.0.1:9", 2)
        with pytest.raises(RuntimeError, match="could not start.*index drop") as raised:
            scaleout.walk(uri, "scaleout_start", settings, 2, 4, prepare, bench.time_store)
    assert "BrokenBarrierError" in str(raised.value)  # both children were let go, and said so


def test_a_measuring_process_that_dies_is_an_error_not_a_wait_for_ever():
    import os

    import pytest

    with pytest.raises(RuntimeError, match="ended without an answer"):
        bench.in_child(os._exit, 3)  # the child dies before it answers


def test_every_measuring_process_collects_garbage_as_the_daemon_does():
    """The engine's measures and the floors' run with the daemon's garbage-collection thresholds (lifecycle.py)."""
    import gc

    from collector.lifecycle import GC_YOUNG

    assert tuple(bench.in_child(gc.get_threshold)) == (GC_YOUNG, *gc.get_threshold()[1:])
