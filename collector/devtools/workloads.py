"""The bench's workloads, each on a fresh database against the fake API in a process of its own: the history walk,
normal-mode polls, the quota bound and the memory soak; the databases they run on, the settings they run with,
and the database CPU counted apart from the engine's (`time_store`). `bench.py` runs them and reports."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from typing import Any

from ..engine import Collector
from ..settings import Settings, load_settings
from .fakeapi import GENERATED_NEWEST, FakeGitHub, FakeProcess, fetch_stats, generated_star
from .meter import Meter, reached_normal
from .options import Options

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
    """Wrap the store's calls to add up the CPU spent in them by the thread that made them (the scheduler's, and
    the claim-ahead thread's: each its own depth). A store call made inside another (mongomock's `save_states` goes
    through `save_state`) is counted once, in the outer one."""
    spent = {"db": 0.0}
    local = threading.local()
    lock = threading.Lock()
    for name in STORE_CALLS:
        original = getattr(collector.store, name)

        def timed(*args: Any, _original: Callable = original, **kwargs: Any) -> Any:
            local.depth = getattr(local, "depth", 0) + 1
            started = time.thread_time()
            try:
                return _original(*args, **kwargs)
            finally:
                local.depth -= 1
                if not local.depth:
                    with lock:
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


def insert_due_normal(db: Any, numbers: range, due: Any) -> None:
    """Users and their networks `numbers`, in normal mode, due at `due`, their stored ETag the one the fake gives
    its generated histories' newest 10 stars (their polls are 304s)."""
    newest = GENERATED_NEWEST.replace(microsecond=0)
    db.users.insert_many([{"email": f"user{i}@bench.test", "name": f"User {i}"} for i in numbers])
    db.networks.insert_many(
        [
            {
                "user": f"user{i}@bench.test",
                "service": "github",
                "accessToken": f"bench-token-{i}",
                "mode": "normal",
                "sinceLikedAt": newest,
                "etag": 'W/"0-1-10"',
                "scheduledTo": due,
            }
            for i in numbers
        ]
    )


def seed_normal(db: Any, fake: FakeGitHub, networks: int, now: Any) -> None:
    """Networks already in normal mode, due now, whose stored ETag matches the fake's newest 10 stars."""
    insert_due_normal(db, range(networks), now - timedelta(seconds=1))
    newest = GENERATED_NEWEST.replace(microsecond=0)
    for i in range(networks):
        fake.add_user(f"bench-token-{i}", generated=30, seed=i)
    assert generated_star(0, 0)["starred_at"].startswith(str(newest.year))


def history(
    opts: Options,
    dbs: Databases,
    latency: float,
    concurrency: int,
    networks: int,
    processes: int = 1,
    beside: Callable[[Any], AbstractContextManager[Any]] | None = None,
) -> dict:
    """The history walk by one collector here, or by `processes` collectors in processes of their own sharing
    `concurrency` (scaleout.py: a database at a URI, not mongomock in this process). `beside(db)`, entered once the
    database is seeded and the fake API is up and left when the walk is done: what runs or is measured beside the
    walk (sinkbench.py: a sink service, the CPU of the other processes)."""
    fake = FakeGitHub(latency=latency, latency_sigma=opts.latency_sigma, prerender_per_page=PER_PAGE)
    db = dbs.new()
    seed_history(db, fake, networks, opts.pages * PER_PAGE)
    with FakeProcess(fake) as url, (beside or nullcontext)(db):
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


def latencies_of(opts: Options) -> list[float]:
    return [float(x) / 1000 for x in opts.latencies.split(",") if x.strip()]


def series_per_task(opts: Options, dbs: Databases, latency: float) -> tuple[float, int]:
    """Wall time per task of the history walk in series (one network at a time), and requests over quota."""
    series = history(opts, dbs, latency, 1, opts.series_networks)
    return series["wall_s"] / series["tasks"], series["over_quota"]


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
