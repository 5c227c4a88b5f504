"""`collector bench`: the real collector (continuous dispatch, as the daemon runs it) against the fake GitHub API
in its own process, serving entries of GitHub's real shape and size (~5.6 KB, gzip when asked), on mongomock or
on a real MongoDB (`--mongodb-uri`). Prints one line of JSON.

Workloads:
  history   N networks x P pages walked to normal mode at each latency, with --concurrency and the comparison
            concurrency; a sample of the same walk in series gives the series time per task.
  polls     steady-state normal-mode polls (a share of them find a changed page, the rest are 304s).
  cycle     one cycle of `cycle_networks` normal-mode networks at `cycle_latency`, the daemon's default settings
            except the concurrency: how long until every network was polled once.
  quota     networks with more history than their quota allows, for K windows: quota used, requests refused.
  soak      many normal-mode polls: resident memory before and after.
  apart     the headline history point and the 304 polls again with the database out of this process (the
            mongowire stand-in in its own process, or the MongoDB given), three runs each, their medians: `*_apart`.
  floor     the least CPU the same page and the same 304 cost with urllib3 (floor.py): `floor_*` fields, and
            the engine's distance to it, `engine_vs_floor_page` and `engine_vs_floor_poll` (from `*_apart`).
  goal      the run line at 0, 4,096 and 16,384 secrets held; the 304 polls at --poll-latency with the daemon's
            observers and 4,096 secrets held (`engine_vs_floor_poll_observed`); the all-in CPU per poll and the
            share of a core reached (`processes_for_10M`); the engine's CPU per network in a cycle of each of
            --scale-networks (goal.py).
  sink      the headline walk again, database apart, three runs without a sink and three while a sink service
            delivers the items it stores (`*_sink_off`, `*_sink_on`, their ratios), then that sink's own
            throughput on the items of a walk (`sink_items_per_s`): sinkbench.py (--sink: where it delivers).
Database time (the scheduler thread's CPU inside the store) is measured apart from the engine's CPU.

The workloads are workloads.py's and the arithmetic of the figures figures.py's; this module runs the workloads in
order (the database-apart ones, the floor and the sink workload in fresh processes) and prints the line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..settings import load_settings
from .figures import APART, RUNS_APART, apart_figures, floor_ratios, point_figures, summary
from .options import Options
from .spawned import in_child
from .workloads import (
    PER_PAGE,
    Databases,
    bench_settings,
    history,
    latencies_of,
    polls,
    quota_bound,
    series_per_task,
    soak,
    time_store,
)

__all__ = [  # what tests and the CLI use from here
    "PER_PAGE",
    "Databases",
    "Options",
    "bench_settings",
    "history",
    "history_point",
    "in_child",
    "polls",
    "run",
    "series_per_task",
    "standin_apart",
    "time_store",
]


def run(opts: Options, out: Any = sys.stdout) -> int:
    from . import idlookup

    idlookup.install()  # mongomock answers `_id` queries from an index, as MongoDB does (idlookup.py)
    dbs = Databases(opts.mongodb_uri)
    try:
        result = measure(opts, dbs)  # Python's own garbage collection: mongomock's cycles live here (spawned.py)
    finally:
        dbs.close()
    result.update(measure_apart(opts, result))
    result.update(measure_goal(opts, result))
    result.update(measure_sink(opts))
    result.update(measure_claim(opts))
    print(json.dumps(result), file=out)
    return 0


def history_point(
    opts: Options, dbs: Databases, latency: float, concurrency: int, per_task: float, processes: int = 1
) -> dict:
    """The history walk at one latency and concurrency, against the series time per task (figures.py)."""
    walked = history(opts, dbs, latency, concurrency, opts.networks, processes)
    return point_figures(walked, latency, concurrency, per_task, processes)


def measure(opts: Options, dbs: Databases) -> dict:
    """Every workload in this process, on `dbs`: the history points at each latency and concurrency, the polls
    (304s only, then steady state), one cycle at the daemon's defaults, the quota bound and the soak."""
    points, over_quota = [], 0
    for latency in latencies_of(opts):
        per_task, series_over = series_per_task(opts, dbs, latency)
        for concurrency in dict.fromkeys([opts.compare_concurrency, opts.concurrency]):
            point = history_point(opts, dbs, latency, concurrency, per_task)
            over_quota += point.pop("over_quota") + series_over
            points.append(point)
    runs = {
        "quiet": polls(opts, dbs, 0.0, opts.polls // 2, 0.0, opts.concurrency, opts.poll_networks),
        "steady": polls(
            opts, dbs, opts.change_share, opts.polls, opts.poll_latency, opts.concurrency, opts.poll_networks
        ),
        "cycle": polls(
            opts,
            dbs,
            0.0,
            opts.cycle_networks,
            opts.cycle_latency,
            opts.concurrency,
            opts.cycle_networks,
            interval=load_settings().normal_interval,
        ),
        "quota": quota_bound(opts, dbs),
        "memory": soak(opts, dbs),
    }
    over_quota += sum(measured["over_quota"] for measured in runs.values())
    return summary(opts, points, runs, over_quota)


def measure_apart(opts: Options, main: dict) -> dict:
    """The engine with the database out of this process (a real MongoDB given by --mongodb-uri: the main
    figures already are; else the mongowire stand-in in a process of its own), and the floor measured in the
    same run: the engine's distance to it per page and per poll. Each is measured in a fresh process (a heap
    that ran the mongomock workloads makes a 560 KB page cost up to twice as much CPU, engine and floor alike),
    and the floor on both sides of the engine's measure, averaged: the machine's speed drifts."""
    from . import floor

    before = in_child(floor.measure, opts.floor_pages, opts.floor_polls, opts.concurrency)
    if opts.mongodb_uri:
        apart = {
            "database_apart": "mongodb",
            **{f"{k}_apart": main[k] for k in APART},
        }
    else:
        apart = in_child(standin_apart_here, opts)
    after = in_child(floor.measure, opts.floor_pages, opts.floor_polls, opts.concurrency)
    ground = {name: round((before[name] + after[name]) / 2, 3) for name in before}
    return {**apart, **ground, **floor_ratios(apart, ground)}


def measure_claim(opts: Options) -> dict:
    """The claim's wall time at scale (claimbench.py) in a fresh interpreter, unless --claim-networks is empty."""
    if not opts.claim_networks.strip():
        return {}
    from . import claimbench

    return in_child(claimbench.measure, opts)


def measure_goal(opts: Options, result: dict) -> dict:
    """The goal's figures (goal.py): the run line by secrets held, polls with the daemon's observers, scaling."""
    from . import goal

    return goal.measure(opts, result["floor_ms_per_poll"])


def measure_sink(opts: Options) -> dict:
    """The sink workload (sinkbench.py) in a fresh interpreter, unless --sink off."""
    if opts.sink == "off":
        return {"sink": "off"}
    from . import sinkbench

    return in_child(sinkbench.measure, opts)


def standin_apart_here(opts: Options) -> dict:
    from .mongowire import WireProcess

    with WireProcess() as uri:
        dbs = Databases(uri, standin=True)
        try:
            return standin_apart(opts, dbs)
        finally:
            dbs.close()


def standin_apart(opts: Options, dbs: Databases) -> dict:
    """The headline history point and the 304 polls with the database apart, each run three times: each figure
    is the median of its three (one run is a few seconds of CPU against a floor that is a median of three rounds,
    and alone it moved by ±15% from one bench to the next on this machine)."""
    latency = latencies_of(opts)[-1]
    per_task, over_quota = series_per_task(opts, dbs, latency)
    points = [history_point(opts, dbs, latency, opts.concurrency, per_task) for _ in range(RUNS_APART)]
    quiets = [polls(opts, dbs, 0.0, opts.polls // 2, 0.0, opts.concurrency, opts.poll_networks) for _ in points]
    split = [
        history_point(opts, dbs, latency, opts.concurrency, per_task, opts.split_processes)
        for _ in range(RUNS_APART if opts.split_processes > 1 else 0)
    ]
    if over_quota + sum(run["over_quota"] for run in (*points, *quiets, *split)):
        raise RuntimeError("requests over quota with the database apart")
    return apart_figures(points, quiets, split, opts.split_processes)
