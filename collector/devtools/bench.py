"""`collector bench`: throughput, quota use and memory of the real collector against the fake GitHub API.

Three workloads, each on a fresh in-memory database (mongomock) with the fake API in a separate process:
  throughput  N networks x P pages at the given latency, run to normal mode with --concurrency 1 and with the
              chosen concurrency: wall times, speedup, CPU per task.
  quota       networks with more history than their quota allows, for K quota windows: how much of the quota
              the collector used, and how many requests the fake rejected for quota.
  soak        many normal-mode runs (ETag/304 polls): resident memory before and after.
Prints one line of JSON.
"""

from __future__ import annotations

import gc
import json
import sys
import time

import mongomock

from ..engine import Collector
from ..settings import Settings, load_settings
from .fakeapi import FakeGitHub, FakeProcess, fetch_stats
from .options import Options

PER_PAGE = 100


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench_settings(url: str, concurrency: int) -> Settings:
    return load_settings().with_(
        github_api_url=url,
        initial_interval=0,
        initial_intervals={},
        normal_interval=0,
        concurrency=concurrency,
        service_concurrency=concurrency,
        pass_limit=100_000,
        loop_idle_pause=0.02,
        loop_busy_pause=0,
        rate_limit_min_wait=0.2,
    )


def seed(db, fake: FakeGitHub, networks: int, stars: int, quota: int | None = None) -> None:
    db.users.insert_many([{"email": f"user{i}@bench.test", "name": f"User {i}"} for i in range(networks)])
    db.networks.insert_many(
        [
            {"user": f"user{i}@bench.test", "service": "github", "accessToken": f"bench-token-{i}"}
            for i in range(networks)
        ]
    )
    for i in range(networks):
        fake.add_user(f"bench-token-{i}", generated=stars, seed=i, quota=quota)


def without_unique_index(db) -> None:
    """mongomock enforces a secondary unique index by scanning (quadratic inserts); on a fresh database the item
    `_id` (a hash of user, type and itemId) keeps items unique on its own, so the bench drops that index."""
    for name, info in db.items.index_information().items():
        if info.get("unique") and name != "_id_":
            db.items.drop_index(name)


def new_db():
    return mongomock.MongoClient(tz_aware=True)["likeastore_bench"]


def until_normal(collector: Collector, db, networks: int) -> tuple[int, float]:
    """Initial passes until every network is in normal mode; returns the network runs and the seconds spent
    saving to the database."""
    runs, db_seconds = 0, 0.0
    deadline = time.monotonic() + 3600
    while db.networks.count_documents({"mode": "normal"}) < networks:
        if time.monotonic() > deadline:
            raise RuntimeError("the workload did not reach normal mode within an hour")
        report = collector.run_pass("initial")
        runs += report.tasks
        db_seconds += report.db_seconds
        if report.tasks == 0:
            time.sleep(0.02)
    return runs, db_seconds


def throughput(opts: Options, concurrency: int) -> dict:
    fake = FakeGitHub(latency=opts.latency)
    db = new_db()
    seed(db, fake, opts.networks, opts.pages * PER_PAGE)
    with FakeProcess(fake) as url:
        collector = Collector(db, bench_settings(url, concurrency))
        without_unique_index(db)
        cpu, wall = time.process_time(), time.perf_counter()
        runs, db_seconds = until_normal(collector, db, opts.networks)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        collector.close()
        stats = fetch_stats(url)
    items = db.items.count_documents({})
    expected = opts.networks * opts.pages * PER_PAGE
    if items != expected:
        raise RuntimeError(f"throughput run stored {items} items, expected {expected}")
    return {
        "wall_s": wall,
        "cpu_ms_per_task": cpu / runs * 1000,
        "db_ms_per_task": db_seconds / runs * 1000,
        "tasks": runs,
        "requests": stats["requests"],
        "over_quota": stats["over_quota"],
    }


def quota_bound(opts: Options) -> dict:
    fake = FakeGitHub(latency=opts.latency, quota=opts.quota, window=opts.quota_window)
    db = new_db()
    seed(db, fake, opts.quota_networks, opts.quota_pages * PER_PAGE)
    with FakeProcess(fake) as url:
        collector = Collector(db, bench_settings(url, opts.concurrency))
        without_unique_index(db)
        window = opts.quota_window
        first = (int(time.time()) // window + 1) * window  # start on a window boundary
        time.sleep(max(first - time.time(), 0) + 0.005)
        deadline = first + window * opts.quota_windows
        while time.time() < deadline:
            if collector.run_pass("initial").tasks == 0:
                time.sleep(0.02)
        collector.close()
        stats = fetch_stats(url)
    used = sum(stats["accepted_by_window"].get(str(first + k * window), 0) for k in range(opts.quota_windows))
    allowed = opts.quota_networks * opts.quota * opts.quota_windows
    done = db.networks.count_documents({"mode": "normal"})
    if done:
        raise RuntimeError("quota run finished its work: raise --quota-pages so that work exceeds quota")
    return {"used": used, "allowed": allowed, "over_quota": stats["over_quota"]}


def soak(opts: Options) -> dict:
    fake = FakeGitHub()
    db = new_db()
    seed(db, fake, opts.soak_networks, PER_PAGE // 2)
    with FakeProcess(fake) as url:
        collector = Collector(db, bench_settings(url, opts.concurrency))
        without_unique_index(db)
        until_normal(collector, db, opts.soak_networks)
        runs, start_mb = 0, None
        while runs < opts.soak_runs:
            runs += collector.run_pass("normal").tasks
            if start_mb is None and runs >= opts.soak_runs // 10:  # after warm-up
                gc.collect()
                start_mb = rss_mb()
        gc.collect()
        end_mb = rss_mb()
        collector.close()
        stats = fetch_stats(url)
    return {
        "runs": runs,
        "rss_mb_start": start_mb,
        "rss_mb_end": end_mb,
        "not_modified": stats["not_modified"],
        "over_quota": stats["over_quota"],
    }


def run(opts: Options, out=sys.stdout) -> int:
    series = throughput(opts, 1)
    concurrent = throughput(opts, opts.concurrency)
    quota = quota_bound(opts)
    memory = soak(opts)
    result = {
        "networks": opts.networks,
        "pages": opts.pages,
        "latency_ms": round(opts.latency * 1000, 1),
        "concurrency": opts.concurrency,
        "requests": concurrent["requests"],
        "wall_s_series": round(series["wall_s"], 2),
        "wall_s_concurrent": round(concurrent["wall_s"], 2),
        "speedup": round(series["wall_s"] / concurrent["wall_s"], 2),
        "tasks_per_s": round(concurrent["tasks"] / concurrent["wall_s"], 1),
        "cpu_ms_per_task_series": round(series["cpu_ms_per_task"], 2),
        "cpu_ms_per_task_concurrent": round(concurrent["cpu_ms_per_task"], 2),
        "db_ms_per_task": round(series["db_ms_per_task"], 2),
        "speedup_bound": round((opts.latency * 1000 + series["cpu_ms_per_task"]) / series["cpu_ms_per_task"], 2),
        "requests_over_quota": series["over_quota"]
        + concurrent["over_quota"]
        + quota["over_quota"]
        + memory["over_quota"],
        "quota_utilization": round(quota["used"] / quota["allowed"], 3),
        "quota_requests_used": quota["used"],
        "quota_requests_allowed": quota["allowed"],
        "soak_runs": memory["runs"],
        "soak_not_modified": memory["not_modified"],
        "rss_mb_start": round(memory["rss_mb_start"], 1),
        "rss_mb_end": round(memory["rss_mb_end"], 1),
    }
    print(json.dumps(result), file=out)
    return 0
