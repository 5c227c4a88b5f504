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
Database time (the scheduler thread's CPU inside the store) is measured apart from the engine's CPU.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..engine import Collector
from ..settings import Settings, load_settings
from .fakeapi import GENERATED_NEWEST, FakeGitHub, FakeProcess, fetch_stats, generated_star
from .meter import Meter, reached_normal
from .options import Options
from .spawned import NoAnswer, answer, spawn

PER_PAGE = 100
STORE_CALLS = (
    "claim",
    "users_by_email",
    "insert_items",
    "save_states",
    "save_state",
    "save_tokens",
    "renew",
    "release",
    "save_quotas",
    "load_quotas",
)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Databases:
    """Fresh databases: mongomock in this process, or scratch databases on a MongoDB at `uri` — a real one, or the
    mongowire stand-in in a process of its own (`standin`). A server holds one workload's database at a time: the
    last one is dropped when the next is made (workloads run one after another, each on its own), and all of them
    at the end. Left in place, each workload's items slowed the ones after it (on the stand-in, the third history
    walk of the apart figures took ~0.3 s longer than the first two)."""

    def __init__(self, uri: str, standin: bool = False):
        self.uri = uri
        self.standin = standin or not uri
        self.created: list[str] = []
        self.client: Any = None
        if uri:
            from pymongo import MongoClient

            self.client = MongoClient(uri, tz_aware=True)

    def new(self) -> Any:
        if self.client is None:
            import mongomock

            return mongomock.MongoClient(tz_aware=True)["likeastore_bench"]
        if self.created:
            self.client.drop_database(self.created[-1])
        name = f"collector_bench_{os.getpid()}_{len(self.created)}"
        self.created.append(name)
        return self.client[name]

    def relax(self, db: Any) -> None:
        """A stand-in (mongomock, here or behind mongowire) enforces a secondary unique index by scanning:
        quadratic inserts. On a fresh database the item `_id` (a hash of user, type and itemId) keeps items
        unique on its own, so the bench drops that index there; a real MongoDB keeps it."""
        if self.standin:
            for name, info in db.items.index_information().items():
                if info.get("unique") and name != "_id_":
                    db.items.drop_index(name)

    def close(self) -> None:
        if self.client is not None:
            for name in self.created:
                self.client.drop_database(name)
            self.client.close()


def time_store(collector: Collector) -> dict[str, float]:
    """Wrap the store's calls to add up the scheduler thread's CPU spent in them. A store call made inside another
    (mongomock's `save_states` goes through `save_state`) is counted once, in the outer one."""
    spent = {"db": 0.0}
    depth = [0]
    for name in STORE_CALLS:
        original = getattr(collector.store, name)

        def timed(*args: Any, _original: Callable = original, **kwargs: Any) -> Any:
            depth[0] += 1
            started = time.thread_time()
            try:
                return _original(*args, **kwargs)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    spent["db"] += time.thread_time() - started

        setattr(collector.store, name, timed)
    return spent


def bench_settings(url: str, concurrency: int, **changes: Any) -> Settings:
    base = {
        "github_api_url": url,
        "initial_interval": 0,
        "initial_intervals": {},
        "concurrency": concurrency,
        "service_concurrency": concurrency,
        "pass_limit": 100_000,
        "loop_idle_pause": 0.05,
        "rate_limit_min_wait": 0.2,
    }
    return load_settings().with_(**{**base, **changes})


def serve_until(collector: Collector, mode: str, meter: Meter, limit_s: float = 3600) -> dict[str, float]:
    """Run the continuous loop until the meter's target; wall time, process CPU and database CPU."""
    spent = time_store(collector)
    cpu, wall = time.process_time(), time.perf_counter()
    deadline = time.monotonic() + limit_s
    collector.serve(mode, should_stop=lambda: meter.done.is_set() or time.monotonic() > deadline, wait=meter.done.wait)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if not meter.done.is_set():
        raise RuntimeError(f"{mode} workload did not finish within {limit_s:.0f}s")
    if meter.errors:
        raise RuntimeError(f"{mode} workload: runs failed, the figures would not be the engine's: {meter.errors}")
    return {"wall_s": wall, "cpu_s": cpu, "db_s": spent["db"]}


def seed_history(db: Any, fake: FakeGitHub, networks: int, stars: int, quota: int | None = None) -> None:
    db.users.insert_many([{"email": f"user{i}@bench.test", "name": f"User {i}"} for i in range(networks)])
    db.networks.insert_many(
        [
            {"user": f"user{i}@bench.test", "service": "github", "accessToken": f"bench-token-{i}"}
            for i in range(networks)
        ]
    )
    for i in range(networks):
        fake.add_user(f"bench-token-{i}", generated=stars, seed=i, quota=quota)


def seed_normal(db: Any, fake: FakeGitHub, networks: int, now: Any) -> None:
    """Networks already in normal mode, due now, whose stored ETag matches the fake's newest 10 stars."""
    db.users.insert_many([{"email": f"user{i}@bench.test", "name": f"User {i}"} for i in range(networks)])
    newest = GENERATED_NEWEST.replace(microsecond=0)
    db.networks.insert_many(
        [
            {
                "user": f"user{i}@bench.test",
                "service": "github",
                "accessToken": f"bench-token-{i}",
                "mode": "normal",
                "sinceLikedAt": newest,
                "etag": 'W/"0-1-10"',
                "scheduledTo": now - timedelta(seconds=1),
            }
            for i in range(networks)
        ]
    )
    for i in range(networks):
        fake.add_user(f"bench-token-{i}", generated=30, seed=i)
    assert generated_star(0, 0)["starred_at"].startswith(str(newest.year))


def history(opts: Options, dbs: Databases, latency: float, concurrency: int, networks: int, processes: int = 1) -> dict:
    """The history walk by one collector here, or by `processes` collectors in processes of their own sharing
    `concurrency` (scaleout.py: a database at a URI, not mongomock in this process)."""
    fake = FakeGitHub(latency=latency, latency_sigma=opts.latency_sigma, prerender_per_page=PER_PAGE)
    db = dbs.new()
    seed_history(db, fake, networks, opts.pages * PER_PAGE)
    with FakeProcess(fake) as url:
        if processes > 1:
            from . import scaleout

            settings = bench_settings(url, concurrency // processes)
            measured = scaleout.walk(dbs.uri, db.name, settings, processes, networks, lambda: dbs.relax(db), time_store)
        else:
            meter = Meter(networks, reached_normal)
            collector = Collector(db, bench_settings(url, concurrency), observers=[meter])
            dbs.relax(db)
            measured = {**serve_until(collector, "initial", meter), "pages": meter.pages}
            collector.close()
        stats = fetch_stats(url)
    items = db.items.estimated_document_count()
    if items != networks * opts.pages * PER_PAGE:
        raise RuntimeError(f"history stored {items} items, expected {networks * opts.pages * PER_PAGE}")
    tasks = stats["requests"]
    return {
        **measured,
        "tasks": tasks,
        "over_quota": stats["over_quota"],
        "server_ms": stats["busy_s"] / max(tasks, 1) * 1000,
    }


def polls(
    opts: Options,
    dbs: Databases,
    change_share: float,
    count: int,
    latency: float,
    concurrency: int,
    networks: int,
    interval: float = 0.0,
) -> dict:
    from ..sdk import utcnow

    fake = FakeGitHub(latency=latency, latency_sigma=opts.latency_sigma, change_share=change_share, seed=7)
    db = dbs.new()
    seed_normal(db, fake, networks, utcnow())
    with FakeProcess(fake) as url:
        meter = Meter(count)
        settings = bench_settings(url, concurrency, normal_interval=interval)
        if interval:  # the daemon's defaults except the concurrency
            defaults = load_settings()
            settings = settings.with_(loop_idle_pause=defaults.loop_idle_pause, pass_limit=defaults.pass_limit)
        collector = Collector(db, settings, observers=[meter])
        dbs.relax(db)
        measured = serve_until(collector, "normal", meter)
        collector.close()
        stats = fetch_stats(url)
    return {**measured, "polls": meter.runs, "not_modified": stats["not_modified"], "over_quota": stats["over_quota"]}


def quota_bound(opts: Options, dbs: Databases) -> dict:
    fake = FakeGitHub(latency=0.05, quota=opts.quota, window=opts.quota_window)
    db = dbs.new()
    seed_history(db, fake, opts.quota_networks, opts.quota_pages * PER_PAGE)
    with FakeProcess(fake) as url:
        collector = Collector(db, bench_settings(url, opts.concurrency), observers=[])
        dbs.relax(db)
        window = opts.quota_window
        first = (int(time.time()) // window + 1) * window  # start on a window boundary
        time.sleep(max(first - time.time(), 0) + 0.005)
        deadline = first + window * opts.quota_windows
        collector.serve("initial", should_stop=lambda: time.time() >= deadline, wait=time.sleep)
        collector.close()
        stats = fetch_stats(url)
    used = sum(stats["accepted_by_window"].get(str(first + k * window), 0) for k in range(opts.quota_windows))
    allowed = opts.quota_networks * opts.quota * opts.quota_windows
    if db.networks.count_documents({"mode": "normal"}):
        raise RuntimeError("quota run finished its work: raise --quota-pages so that work exceeds quota")
    return {"used": used, "allowed": allowed, "over_quota": stats["over_quota"]}


def soak(opts: Options, dbs: Databases) -> dict:
    from ..sdk import utcnow

    fake = FakeGitHub()
    db = dbs.new()
    seed_normal(db, fake, opts.soak_networks, utcnow())
    with FakeProcess(fake) as url:
        warm = Meter(opts.soak_runs // 10)
        meter = Meter(opts.soak_runs)
        collector = Collector(db, bench_settings(url, opts.concurrency, normal_interval=0), observers=[warm, meter])
        dbs.relax(db)
        start_mb: list[float] = []

        def stop() -> bool:
            if warm.done.is_set() and not start_mb:
                gc.collect()
                start_mb.append(rss_mb())
            return meter.done.is_set()

        collector.serve("normal", should_stop=stop, wait=meter.done.wait)
        if meter.errors:
            raise RuntimeError(f"soak: runs failed: {meter.errors}")
        gc.collect()
        end_mb = rss_mb()
        collector.close()
        stats = fetch_stats(url)
    return {"runs": meter.runs, "rss_mb_start": start_mb[0], "rss_mb_end": end_mb, "over_quota": stats["over_quota"]}


def run(opts: Options, out: Any = sys.stdout) -> int:
    from . import idlookup

    idlookup.install()  # mongomock answers `_id` queries from an index, as MongoDB does (idlookup.py)
    dbs = Databases(opts.mongodb_uri)
    try:
        result = measure(opts, dbs)
    finally:
        dbs.close()
    result.update(measure_apart(opts, result))
    print(json.dumps(result), file=out)
    return 0


def latencies_of(opts: Options) -> list[float]:
    return [float(x) / 1000 for x in opts.latencies.split(",") if x.strip()]


def series_per_task(opts: Options, dbs: Databases, latency: float) -> tuple[float, int]:
    """Wall time per task of the history walk in series (one network at a time), and requests over quota."""
    series = history(opts, dbs, latency, 1, opts.series_networks)
    return series["wall_s"] / series["tasks"], series["over_quota"]


def history_point(
    opts: Options, dbs: Databases, latency: float, concurrency: int, per_task: float, processes: int = 1
) -> dict:
    """The history walk at one latency and concurrency, against the series time per task: speedup, its bound
    (the concurrency's, or the CPU's: one core per interpreter, as many as the machine has), and the CPU split
    between the engine and the database calls."""
    run_ = history(opts, dbs, latency, concurrency, opts.networks, processes)
    cpu_per_task = run_["cpu_s"] / run_["tasks"]
    waited = latency + run_["server_ms"] / 1000  # what a task waits for, the server's own time included
    cores = min(processes, os.cpu_count() or 1)
    bound = min(concurrency * per_task / waited if waited else float("inf"), cores * per_task / cpu_per_task)
    speedup = per_task * run_["tasks"] / run_["wall_s"]
    return {
        "latency_ms": round(latency * 1000),
        "concurrency": concurrency,
        "tasks": run_["tasks"],
        "wall_s_series": round(per_task * run_["tasks"], 2),
        "wall_s_concurrent": round(run_["wall_s"], 2),
        "speedup": round(speedup, 2),
        "speedup_bound": round(bound, 2),
        "efficiency": round(speedup / bound, 3),
        "cpu_ms_per_task": round(cpu_per_task * 1000, 2),
        "db_ms_per_task": round(run_["db_s"] / run_["tasks"] * 1000, 2),
        "engine_cpu_ms_per_page": round((run_["cpu_s"] - run_["db_s"]) / max(run_["pages"], 1) * 1000, 2),
        "over_quota": run_["over_quota"],
    }


def engine_per_poll(quiet: dict) -> float:
    return round((quiet["cpu_s"] - quiet["db_s"]) / quiet["polls"] * 1000, 3)


RUNS_APART = 3  # runs of each workload measured with the database apart (their median is reported)
SPLIT = ("efficiency", "speedup", "speedup_bound", "engine_cpu_ms_per_page")  # of the walk shared by processes
APART = ("engine_cpu_ms_per_page", "engine_cpu_ms_per_poll", "efficiency", "speedup", "speedup_bound", "db_ms_per_task")


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
    return {
        **apart,
        **ground,
        "engine_vs_floor_page": round(apart["engine_cpu_ms_per_page_apart"] / ground["floor_ms_per_page"], 2),
        "engine_vs_floor_page_zlib_ng": round(
            apart["engine_cpu_ms_per_page_apart"] / ground["floor_ms_per_page_zlib_ng"], 2
        ),
        "engine_vs_floor_poll": round(apart["engine_cpu_ms_per_poll_apart"] / ground["floor_ms_per_poll"], 2),
        "engine_vs_floor_poll_threads": round(
            apart["engine_cpu_ms_per_poll_apart"] / ground["floor_ms_per_poll_threads"], 2
        ),
    }


def _child(conn: Any, call: Callable[..., dict], args: tuple) -> None:
    try:
        conn.send(("ok", call(*args)))
    except Exception as exc:  # the parent raises it: a bench that cannot measure says why
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def in_child(call: Callable[..., dict], *args: Any) -> dict:
    """`call(*args)` in a fresh interpreter (spawned), its result sent back."""
    process, pipe = spawn(_child, call, args)
    try:
        status, value = answer(pipe)
    except NoAnswer as exc:
        status, value = "error", f"the measuring process: {exc}"
    finally:
        process.join(timeout=60)
    if status != "ok":
        raise RuntimeError(f"bench: {value}")
    return value


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

    def median(field: str, runs: list[dict] = points) -> float:
        return statistics.median(point[field] for point in runs)

    if split:
        split_figures = {
            "split_processes": opts.split_processes,
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


def measure(opts: Options, dbs: Databases) -> dict:
    points, over_quota = [], 0
    for latency in latencies_of(opts):
        per_task, series_over = series_per_task(opts, dbs, latency)
        for concurrency in dict.fromkeys([opts.compare_concurrency, opts.concurrency]):
            point = history_point(opts, dbs, latency, concurrency, per_task)
            over_quota += point.pop("over_quota") + series_over
            points.append(point)
    head = points[-1]
    quiet = polls(opts, dbs, 0.0, opts.polls // 2, 0.0, opts.concurrency, opts.poll_networks)
    steady = polls(opts, dbs, opts.change_share, opts.polls, opts.poll_latency, opts.concurrency, opts.poll_networks)
    cycle = polls(
        opts,
        dbs,
        0.0,
        opts.cycle_networks,
        opts.cycle_latency,
        opts.concurrency,
        opts.cycle_networks,
        interval=load_settings().normal_interval,
    )
    quota = quota_bound(opts, dbs)
    memory = soak(opts, dbs)
    over_quota += quiet["over_quota"] + steady["over_quota"] + cycle["over_quota"] + quota["over_quota"]
    over_quota += memory["over_quota"]
    steady_cpu_ms = steady["cpu_s"] / steady["polls"] * 1000
    return {
        "networks": opts.networks,
        "pages": opts.pages,
        "database": "mongodb" if opts.mongodb_uri else "mongomock",
        "latency_ms": head["latency_ms"],
        "latency_sigma": opts.latency_sigma,
        "concurrency": head["concurrency"],
        **{
            k: head[k]
            for k in (
                "wall_s_series",
                "wall_s_concurrent",
                "speedup",
                "speedup_bound",
                "efficiency",
                "cpu_ms_per_task",
                "db_ms_per_task",
                "engine_cpu_ms_per_page",
            )
        },
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
