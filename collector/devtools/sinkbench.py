"""`collector bench`'s sink workload (`--sink`, on by default), in a fresh interpreter, the database apart (the
mongowire stand-in in a process of its own, or the MongoDB given), the destination in a process of its own:
osmem-server (OpenSearch-compatible, the test extra), or, when it is not installed, a webhook receiver checking
signatures (`--sink webhook` asks for it); `--sink stalled`: a destination that never answers (collection beside a
stuck sink: no throughput measured).

- **Collection with and without a sink**: the headline history walk, three runs without a sink interleaved with
  three while a sink service (`collector sink`, a process of its own, as deployed) delivers the items the walk
  stores as it stores them; the medians of each and their ratio (`*_sink_on_vs_off`). Collection never waits for
  a sink by construction (another process); what the ratios show is what the two share on one machine: its
  cores and the database. The stand-in is one mongomock under one lock, so its CPU is reported apart
  (`standin_cpu_ms_per_task_sink_off` and `_on`), with the sink's and the destination's.
- **A sink's own throughput**: the items of a walk of `--sink-networks` networks without a sink (stored with
  their marker, never moved), delivered by one sink service: items per second from the first delivered to the
  last (the mover and the delivery), the CPU per item of the sink process, of the stand-in and of the
  destination, and the check that every item arrived (`sink_delivered`, `sink_held`: what the destination holds).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any

from .destinations import Search, new_secret, receive_in_child, receiver_stats, stall_in_child
from .figures import RUNS_APART, point_figures, sink_figures, sink_rate
from .options import Options
from .sinkprocess import ServiceProcess, cpu_s, delivered, service_how, sink_env, with_database
from .spawned import answer, spawn
from .workloads import Databases, history, latencies_of, series_per_task

NAME = "bench"  # the sink's name (SINK_BENCH_*)
DRAIN_LIMIT_S = 900.0
SINK_CHOICES = ("opensearch", "webhook", "stalled", "off")
STALLED_TIMEOUT_S = 2  # a stalled destination's deliveries end in this timeout (and are retried, with back-off)


class SearchPlace:
    """osmem-server: each run's items go to an index of its own."""

    kind = "opensearch"

    def __init__(self, search: Search):
        self.search = search
        self.pid = search.pid
        self.label = f"osmem-server {search.version}"

    def env(self, tag: str) -> dict[str, str]:
        return {"SINK_BENCH_KIND": "opensearch", "SINK_BENCH_URL": self.search.url, "SINK_BENCH_INDEX": f"bench_{tag}"}

    def held(self, tag: str) -> int:
        return self.search.count(f"bench_{tag}")


class HookPlace:
    """A webhook receiver in a process of its own: each run's items go to a path of their own."""

    kind = "webhook"

    def __init__(self, stack: ExitStack, why: str):
        self.secret = new_secret()
        process, pipe = spawn(receive_in_child, self.secret, daemon=True)
        stack.callback(process.join, 10)
        stack.callback(pipe.close)
        self.url = str(answer(pipe, timeout=60))
        self.pid = int(process.pid)
        self.label = f"a local webhook receiver checking signatures ({why})"

    def env(self, tag: str) -> dict[str, str]:
        return {"SINK_BENCH_KIND": "webhook", "SINK_BENCH_URL": f"{self.url}/{tag}", "SINK_BENCH_SECRET": self.secret}

    def held(self, tag: str) -> int:
        return receiver_stats(f"{self.url}/{tag}")["received"]


class StalledPlace:
    """A destination that takes connections and never answers (a process of its own): the sink service moves the
    items and waits on every delivery until its timeout; nothing arrives. Collection beside a stuck sink."""

    kind = "stalled"

    def __init__(self, stack: ExitStack):
        process, pipe = spawn(stall_in_child, daemon=True)
        stack.callback(process.join, 10)
        stack.callback(pipe.close)
        self.url = str(answer(pipe, timeout=60))
        self.pid = int(process.pid)
        self.label = f"a destination that never answers (deliveries time out after {STALLED_TIMEOUT_S} s)"

    def env(self, tag: str) -> dict[str, str]:
        return {
            "SINK_BENCH_KIND": "opensearch",
            "SINK_BENCH_URL": self.url,
            "SINK_BENCH_TIMEOUT": str(STALLED_TIMEOUT_S),
        }

    def held(self, tag: str) -> int:
        return 0


def destination(opts: Options, stack: ExitStack) -> SearchPlace | HookPlace | StalledPlace:
    if opts.sink == "stalled":
        return StalledPlace(stack)
    if opts.sink == "opensearch":
        search = Search.start()
        if search is not None:
            return SearchPlace(stack.enter_context(search))
        return HookPlace(stack, "osmem-server is not installed")
    return HookPlace(stack, "--sink webhook")


def measure(opts: Options) -> dict:
    """The sink workload with its database and destination apart (run by bench.py in a fresh interpreter)."""
    from .mongowire import WireProcess

    if opts.sink not in SINK_CHOICES:
        raise RuntimeError(f"--sink is one of {', '.join(SINK_CHOICES)}, not {opts.sink!r}")
    with ExitStack() as stack:
        pids: dict[str, int] = {}
        uri = opts.mongodb_uri
        if not uri:
            wire = WireProcess()
            uri = stack.enter_context(wire)
            pids["standin"] = int(wire.process.pid)
        place = destination(opts, stack)
        pids["destination"] = place.pid
        dbs = Databases(uri, standin=not opts.mongodb_uri)
        stack.callback(dbs.close)
        return {
            "sink": place.kind,
            "sink_destination": place.label,
            "sink_process": service_how(),
            **compare(opts, dbs, uri, place, pids),
        }


def compare(opts: Options, dbs: Databases, uri: str, place: Any, pids: dict[str, int]) -> dict:
    """The walk without and with a sink, interleaved, then the sink's own throughput on the items of a walk of its
    own (not for a stalled destination: nothing arrives)."""
    latency = latencies_of(opts)[-1]
    per_task, over_quota = series_per_task(opts, dbs, latency)
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for number in range(RUNS_APART):
        for side in ("on", "off"):
            seen: dict[str, Any] = {}
            env = sink_env(uri, NAME, place.env(f"walk{number}")) if side == "on" else None
            around = partial(beside, uri=uri, env=env, pids=pids, seen=seen)
            walked = history(opts, dbs, latency, opts.concurrency, opts.networks, beside=around)
            over_quota += walked["over_quota"]
            runs[side].append({**point_figures(walked, latency, opts.concurrency, per_task), **seen})
    if over_quota:
        raise RuntimeError("requests over quota in the sink workload")
    figures = sink_figures(runs["off"], runs["on"])
    if place.kind == "stalled":  # nothing arrives: no throughput to measure
        return figures
    stored: dict[str, Any] = {}  # a walk of its own stores the items the sink's throughput is measured on
    around = partial(beside, uri=uri, env=None, pids=pids, seen=stored)
    if history(opts, dbs, latency, opts.concurrency, opts.sink_networks, beside=around)["over_quota"]:
        raise RuntimeError("requests over quota in the sink workload")
    return {**figures, **throughput(stored["db"], uri, place, pids)}


@contextmanager
def beside(db: Any, uri: str, env: dict[str, str] | None, pids: dict[str, int], seen: dict) -> Iterator[None]:
    """Around one walk: a sink service on the walk's database when `env` is given (ready before the walk starts,
    stopped after it), and the CPU the other processes spent during the walk."""
    seen["db"] = db
    with ExitStack() as stack:
        watched = dict(pids)
        if env is not None:
            env = {**env, "MONGODB_URI": with_database(uri, db.name)}
            sink = stack.enter_context(ServiceProcess(env))
            sink.wait_ready(db, NAME)
            watched["sink"] = sink.pid
        before = {name: cpu_s(pid) for name, pid in watched.items()}
        yield
        seen.update({f"{name}_cpu_s": cpu_s(pid) - before[name] for name, pid in watched.items()})
        seen["items"] = db.items.estimated_document_count()
        if env is not None:
            seen["delivered"] = delivered(db, NAME)


def throughput(db: Any, uri: str, place: Any, pids: dict[str, int]) -> dict:
    """The items already stored in `db` (marked, never moved) delivered by one sink service: from the first
    delivered to the last, items per second and the CPU per item of each process."""
    items = db.items.estimated_document_count()
    env = {**sink_env(uri, NAME, place.env("rate")), "MONGODB_URI": with_database(uri, db.name)}
    with ServiceProcess(env) as sink:
        watched = {**pids, "sink": sink.pid}
        first = wait_for(db, sink, lambda n: n > 0)
        cpu_first = {name: cpu_s(pid) for name, pid in watched.items()}
        last = wait_for(db, sink, lambda n: n >= items)
        cpu_last = {name: cpu_s(pid) for name, pid in watched.items()}
    spent = {name: cpu_last[name] - cpu_first[name] for name in watched}
    left = {
        "queued": db.sinkQueue.count_documents({}),
        "marked": db.items.count_documents({"sinkPending": True}),
        "dead_letters": db.sinkDeadLetters.count_documents({}),
    }
    return sink_rate(items, first, last, spent, place.held("rate"), left)


def wait_for(db: Any, sink: ServiceProcess, reached: Any, limit_s: float = DRAIN_LIMIT_S) -> tuple[float, int]:
    """When (perf_counter) the sink's delivered count first satisfied `reached`, and the count then."""
    deadline = time.monotonic() + limit_s
    while True:
        count = delivered(db, NAME)
        if reached(count):
            return time.perf_counter(), count
        if not sink.alive():
            raise RuntimeError(f"the sink service ({sink.how}) ended: {sink.last_words()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sink delivered {count} items in {limit_s:g} s, not all")
        time.sleep(0.02)
