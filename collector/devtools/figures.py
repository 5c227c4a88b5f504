"""The bench's figures from what its workloads measured (pure arithmetic, no I/O): a history point's speedup and
its bound, the headline line, the medians of the runs with the database apart, and the engine's distance to the
floor."""

from __future__ import annotations

import os
import statistics

from .options import Options

RUNS_APART = 3  # runs of each workload measured with the database apart (their median is reported)
SPLIT = ("efficiency", "speedup", "speedup_bound", "engine_cpu_ms_per_page")  # of the walk shared by processes
APART = ("engine_cpu_ms_per_page", "engine_cpu_ms_per_poll", "efficiency", "speedup", "speedup_bound", "db_ms_per_task")
HEADLINE = (  # of the last history point, the headline one
    "wall_s_series",
    "wall_s_concurrent",
    "speedup",
    "speedup_bound",
    "efficiency",
    "cpu_ms_per_task",
    "db_ms_per_task",
    "engine_cpu_ms_per_page",
)


def point_figures(run: dict, latency: float, concurrency: int, per_task: float, processes: int = 1) -> dict:
    """One history walk against the series time per task: speedup, its bound (the concurrency's, or the CPU's:
    one core per interpreter, as many as the machine has), and the CPU split between the engine and the
    database calls."""
    cpu_per_task = run["cpu_s"] / run["tasks"]
    waited = latency + run["server_ms"] / 1000  # what a task waits for, the server's own time included
    cores = min(processes, os.cpu_count() or 1)
    bound = min(concurrency * per_task / waited if waited else float("inf"), cores * per_task / cpu_per_task)
    speedup = per_task * run["tasks"] / run["wall_s"]
    return {
        "latency_ms": round(latency * 1000),
        "concurrency": concurrency,
        "tasks": run["tasks"],
        "wall_s_series": round(per_task * run["tasks"], 2),
        "wall_s_concurrent": round(run["wall_s"], 2),
        "speedup": round(speedup, 2),
        "speedup_bound": round(bound, 2),
        "efficiency": round(speedup / bound, 3),
        "cpu_ms_per_task": round(cpu_per_task * 1000, 2),
        "db_ms_per_task": round(run["db_s"] / run["tasks"] * 1000, 2),
        "engine_cpu_ms_per_page": round((run["cpu_s"] - run["db_s"]) / max(run["pages"], 1) * 1000, 2),
        "over_quota": run["over_quota"],
    }


def engine_per_poll(quiet: dict) -> float:
    return round((quiet["cpu_s"] - quiet["db_s"]) / quiet["polls"] * 1000, 3)


def summary(opts: Options, points: list[dict], runs: dict[str, dict], over_quota: int) -> dict:
    """The bench's line: the headline history point (the last), the polls, the cycle, the quota bound and the
    soak (`runs` by name: quiet, steady, cycle, quota, memory), and every history point."""
    head, quiet, steady = points[-1], runs["quiet"], runs["steady"]
    cycle, quota, memory = runs["cycle"], runs["quota"], runs["memory"]
    steady_cpu_ms = steady["cpu_s"] / steady["polls"] * 1000
    return {
        "networks": opts.networks,
        "pages": opts.pages,
        "database": "mongodb" if opts.mongodb_uri else "mongomock",
        "latency_ms": head["latency_ms"],
        "latency_sigma": opts.latency_sigma,
        "concurrency": head["concurrency"],
        **{k: head[k] for k in HEADLINE},
        "engine_cpu_ms_per_poll": engine_per_poll(quiet),
        "polls_per_s": round(steady["polls"] / steady["wall_s"], 1),
        "polls_per_s_bound": round(
            min(opts.concurrency / opts.poll_latency if opts.poll_latency else float("inf"), 1000 / steady_cpu_ms), 1
        ),
        "poll_cpu_ms_per_task": round(steady_cpu_ms, 3),
        "poll_db_ms_per_task": round(steady["db_s"] / steady["polls"] * 1000, 3),
        "polls_changed_share": opts.change_share,
        "cycle_s_3000": round(cycle["wall_s"], 2),
        "cycle_networks": opts.cycle_networks,
        "requests_over_quota": over_quota,
        "quota_utilization": round(quota["used"] / quota["allowed"], 3),
        "quota_requests_used": quota["used"],
        "quota_requests_allowed": quota["allowed"],
        "soak_runs": memory["runs"],
        "rss_mb_start": round(memory["rss_mb_start"], 1),
        "rss_mb_end": round(memory["rss_mb_end"], 1),
        "points": points,
    }


def apart_figures(points: list[dict], quiets: list[dict], split: list[dict], split_processes: int) -> dict:
    """The figures with the database apart: each the median of its runs (the walk shared by `split_processes`
    processes, when it ran, as well)."""

    def median(field: str, runs: list[dict] = points) -> float:
        return statistics.median(point[field] for point in runs)

    if split:
        split_figures = {
            "split_processes": split_processes,
            **{f"{name}_apart_split": median(name, split) for name in SPLIT},
        }
    else:
        split_figures = {"split_processes": 1}

    return {
        "database_apart": "mongowire",
        "engine_cpu_ms_per_page_apart": median("engine_cpu_ms_per_page"),
        "engine_cpu_ms_per_poll_apart": statistics.median(engine_per_poll(quiet) for quiet in quiets),
        "efficiency_apart": median("efficiency"),
        "speedup_apart": median("speedup"),
        "speedup_bound_apart": median("speedup_bound"),
        "db_ms_per_task_apart": median("db_ms_per_task"),
        **split_figures,
    }


def floor_ratios(apart: dict, ground: dict) -> dict:
    """The engine's CPU with the database apart over the floor's, per page and per poll."""
    return {
        "engine_vs_floor_page": round(apart["engine_cpu_ms_per_page_apart"] / ground["floor_ms_per_page"], 2),
        "engine_vs_floor_page_zlib_ng": round(
            apart["engine_cpu_ms_per_page_apart"] / ground["floor_ms_per_page_zlib_ng"], 2
        ),
        "engine_vs_floor_poll": round(apart["engine_cpu_ms_per_poll_apart"] / ground["floor_ms_per_poll"], 2),
        "engine_vs_floor_poll_threads": round(
            apart["engine_cpu_ms_per_poll_apart"] / ground["floor_ms_per_poll_threads"], 2
        ),
    }


SINK_COMPARED = ("efficiency", "speedup", "engine_cpu_ms_per_page", "db_ms_per_task", "wall_s_concurrent")
SINK_CPU = ("standin", "sink", "destination")  # the processes beside the collector whose CPU a walk is charged


def sink_figures(off: list[dict], on: list[dict]) -> dict:
    """The walk without a sink (`off`) and while one delivers (`on`): the median of each side, their ratio, and
    the CPU per page requested of the processes beside the collector (those measured: no stand-in on a MongoDB)."""
    out: dict = {"sink_runs": len(on)}
    for name in SINK_COMPARED:
        without, within = statistics.median(r[name] for r in off), statistics.median(r[name] for r in on)
        out[f"{name}_apart_sink_off"], out[f"{name}_apart_sink_on"] = without, within
        out[f"{name}_sink_on_vs_off"] = round(within / without, 3) if without else None
    for side, runs in (("off", off), ("on", on)):
        for process in SINK_CPU:
            if f"{process}_cpu_s" in runs[0]:
                per_task = statistics.median(r[f"{process}_cpu_s"] / r["tasks"] * 1000 for r in runs)
                out[f"{process}_cpu_ms_per_task_sink_{side}"] = round(per_task, 3)
    out["sink_walk_items"] = on[0]["items"]
    out["sink_delivered_during_walk"] = statistics.median(r["delivered"] for r in on)
    return out


def sink_rate(
    items: int, first: tuple[float, int], last: tuple[float, int], spent: dict, held: int, left: dict
) -> dict:
    """A sink's own throughput: `first` and `last` are (when, delivered so far) at the first delivery seen and once
    every item was; items per second between them (None when both were seen at once) and the CPU per item each
    process spent in between."""
    (started, count_first), (ended, count_last) = first, last
    moved = count_last - count_first
    rate = round(moved / (ended - started), 1) if moved > 0 and ended > started else None
    return {
        "sink_items": items,
        "sink_delivered": count_last,
        "sink_held": held,
        "sink_items_per_s": rate,
        **{
            f"{'sink' if process == 'sink' else 'sink_' + process}_cpu_ms_per_item": (
                round(spent[process] / moved * 1000, 3) if moved > 0 else None
            )
            for process in SINK_CPU
            if process in spent
        },
        "sink_left": left,
    }
