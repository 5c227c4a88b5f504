"""The bench's figures for the goal of issue 45 — ten million networks polled every 15 minutes on at most 12
single-core processes — each workload in a fresh interpreter, the database apart (the mongowire stand-in in a
process of its own: its CPU is not the engine's):

- **the run line** (`run_line_us_*`): one run's log line as the daemon writes it (`RunLog`, the redaction, the text
  formatter, a stream) at 0, 4,096 and 16,384 secrets held, and at 4,096 held while each network's token is taken
  up and let go of around its line as claims do (`run_line_churn_us_4096`: what a new secret costs too);
- **polls as the daemon makes them** (`*_observed`): the 304 polls at `--poll-latency` with the daemon's own
  observers (the run line, the pass line, the metrics) and 4,096 secrets held, three runs, each followed by the
  floor's poll (urllib3 in series, floor.py) in a fresh interpreter: `engine_vs_floor_poll_observed` is the median
  of the three runs' ratios to the floor beside them (this machine's speed drifts by a third within minutes; over
  the bench's floor measured minutes before: `engine_vs_bench_floor_poll_observed`), next to the bench's
  `engine_vs_floor_poll`; then polls of which
  `--change-share` find a changed page, `--goal-concurrency` in flight, the same observers: the all-in CPU per poll
  (the database client's included) and the share of a core the process reached, whence `processes_for_10M`;
- **scaling** (`engine_cpu_ms_per_network_<N>`): one cycle of N normal-mode networks, each polled once (304s at
  `--scale-latency`), for each N of `--scale-networks`. The stand-in scans every document for a claim (2.5 s at
  30,000), so it holds the networks in a window of SCALE_WINDOW that is topped up before each claim, the networks
  polled taken out (in the claim's timed call: database time): the engine claims and polls N distinct networks
  with N distinct tokens; the claim on a database of N networks is measured on MongoDB (`explain()`), not here.
"""

from __future__ import annotations

import logging
import math
import os
import random
import statistics
import string
import time
from datetime import timedelta
from typing import Any

from .options import Options

GOAL_NETWORKS = 10_000_000
GOAL_PERIOD_S = 15 * 60
HELD = 4096  # secrets held in the observed polls and the churned run line
RUN_LINE_HELD = (0, 4096, 16384)
RUN_LINES = 5000  # per round (three rounds, the median): --run-lines
CLAIM_BATCH = 128  # networks whose tokens a claim takes up at once (the run line's churn)
SCALE_WINDOW = 512  # networks the stand-in holds at once in the scaling cycle (at least 4 x --concurrency)
# a scaling cycle this short (~3 s at 3,000) moved by ±10% alone, and the largest over the smallest divides by it:
# the median of five (of three, the 3,000 figure still spread 0.171-0.210 ms over three bench runs, 6 December)
SHORT, SHORT_REPEATS = 10_000, 5
INTERVAL_S = 86_400.0  # a network polled is not due again within the scaling cycle
WARM_SHARE = 5  # the observed polls' steady part starts at the 1/WARM_SHARE-th poll (meter.py)


def measure(opts: Options, floor_ms_per_poll: float) -> dict:
    """Every goal figure, each workload in a fresh interpreter; `floor_ms_per_poll` from the bench's floor."""
    from .spawned import in_child

    lines = in_child(run_line_costs, RUN_LINE_HELD, opts.run_lines)
    observed = in_child(observed_apart, opts)
    scaling = in_child(scaling_apart, opts) if sizes_of(opts) else {}
    return {**lines, **observed, **scaling, **goal_figures(observed, floor_ms_per_poll)}


def goal_figures(observed: dict, floor_ms_per_poll: float) -> dict:
    """The engine per 304 poll with the observers over the bench's floor, and the single-core processes ten
    million networks every 15 minutes need at the all-in CPU per poll and the share of a core a process reached."""
    per_process = observed["core_share_observed"] / observed["all_in_cpu_ms_per_poll_observed"] * 1000
    needed = GOAL_NETWORKS / GOAL_PERIOD_S
    engine = observed["engine_cpu_ms_per_poll_apart_observed"]
    return {
        # over the bench's own floor, measured minutes before (engine_vs_floor_poll_observed: beside each run)
        "engine_vs_bench_floor_poll_observed": round(engine / floor_ms_per_poll, 2),
        "goal_polls_per_s": round(needed, 1),
        "polls_per_s_per_process_goal": round(per_process, 1),
        "processes_for_10M": math.ceil(needed / per_process),
        "processes_for_10M_whole": math.ceil(needed / observed["polls_per_s_observed_whole"]),
        # the same with a whole core each, as deployed one per core (reasoned, not measured)
        "processes_for_10M_full_core": math.ceil(needed * observed["all_in_cpu_ms_per_poll_observed"] / 1000),
    }


def sizes_of(opts: Options) -> list[int]:
    return [int(size) for size in opts.scale_networks.split(",") if size.strip()]


def held_tokens(count: int, seed: int) -> list[str]:
    """Tokens of GitHub's shape (40 characters), different from every bench network's."""
    rnd = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    return ["gho_" + "".join(rnd.choices(alphabet, k=36)) for _ in range(count)]


def hold(count: int, seed: int) -> list[str]:
    """`count` secrets held, taken up a claim at a time with a line logged between, as a collector does."""
    from ..sdk.redaction import SECRETS, redact

    tokens = held_tokens(count, seed)
    for start in range(0, count, CLAIM_BATCH):
        SECRETS.add(tokens[start : start + CLAIM_BATCH])
        redact("a line between two claims")
    return tokens


def daemon_logging() -> None:
    """The daemon's logging (every record redacted, the text format), written to /dev/null."""
    from ..daemon.logs import setup_logging

    setup_logging("INFO")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - the child process's until it exits


def sample_run(token: str, number: int) -> tuple[Any, Any]:
    """A 304 poll's result and save, as the run line reads them (what it reads of a RunResult; only the engine
    makes one)."""
    from types import SimpleNamespace

    from bson import ObjectId

    from ..engine.events import Saved

    network = {"_id": ObjectId(), "service": "github", "user": f"user{number}@bench.test", "accessToken": token}
    fields = {"mode": "normal", "status": "ok", "error": None, "items": (), "skipped": 0, "skip_reason": None}
    result = SimpleNamespace(network=network, requests=1, duration=0.2, **fields)
    return result, Saved(new_items=0, state_saved=True)


def run_line_costs(held: tuple[int, ...], lines: int = RUN_LINES) -> dict:
    """µs per run line at each count of secrets held (median of three rounds), and per network at HELD held
    while each network's token is taken up before its line and let go of after, a claim of CLAIM_BATCH at a
    time (the automata built for the new ones included)."""
    from collections import Counter

    from ..engine.runlog import RunLog
    from ..sdk.redaction import SECRETS

    daemon_logging()
    log, out = RunLog(), {}
    for count in held:
        SECRETS.restore((Counter(), set()))
        hold(count, seed=count)
        result, saved = sample_run(held_tokens(1, seed=-1)[0], 1234)
        rounds = []
        for _ in range(3):
            started = time.process_time()
            for _ in range(lines):
                log.on_run(result, saved)
            rounds.append((time.process_time() - started) / lines * 1e6)
        out[f"run_line_us_{count}"] = round(statistics.median(rounds), 1)
    out["run_line_churn_us_4096"] = round(churned_run_lines(log), 1)
    out["secret_automata_4096"] = len(SECRETS.automata())
    return out


def churned_run_lines(log: Any, claims: int = 40) -> float:
    """µs per network: its token taken up with its claim's, its run line, its token let go of; HELD others held."""
    from collections import Counter

    from ..sdk.redaction import SECRETS

    SECRETS.restore((Counter(), set()))
    hold(HELD, seed=HELD)
    tokens = held_tokens(claims * CLAIM_BATCH, seed=7)
    runs = [sample_run(token, number) for number, token in enumerate(tokens)]
    started = time.process_time()
    for start in range(0, len(tokens), CLAIM_BATCH):
        claimed = range(start, start + CLAIM_BATCH)
        for number in claimed:
            SECRETS.add([tokens[number]])
        for number in claimed:
            log.on_run(*runs[number])
            SECRETS.remove([tokens[number]])
    return (time.process_time() - started) / len(tokens) * 1e6


def daemon_observers(meter: Any) -> list[Any]:
    """The meter, and the observers a daemon's collector has: the run and pass lines, the metrics."""
    from ..daemon.metrics import Metrics
    from ..engine.runlog import PassLog, RunLog

    return [meter, RunLog(), PassLog(), Metrics("normal", "bench", "bench", 60.0, services=["github"])]


def observed_polls(opts: Options, dbs: Any, change_share: float, count: int, concurrency: int) -> dict:
    """`count` normal-mode polls at --poll-latency, `change_share` of them finding a changed page, with the
    daemon's observers: wall time, process CPU, database CPU, polls."""
    from ..engine import Collector
    from ..sdk import utcnow
    from .fakeapi import FakeGitHub, FakeProcess, fetch_stats
    from .meter import Meter
    from .workloads import bench_settings, seed_normal, serve_until

    fake = FakeGitHub(latency=opts.poll_latency, latency_sigma=opts.latency_sigma, change_share=change_share, seed=7)
    db = dbs.new()
    seed_normal(db, fake, max(opts.poll_networks, 4 * concurrency), utcnow())
    with FakeProcess(fake) as url:
        meter = Meter(count, warm=max(count // WARM_SHARE, 1))
        settings = bench_settings(url, concurrency, normal_interval=0)
        collector = Collector(db, settings, observers=daemon_observers(meter))
        dbs.relax(db)
        measured = serve_until(collector, "normal", meter)
        collector.close()
        stats = fetch_stats(url)
    if stats["over_quota"]:
        raise RuntimeError("observed polls: requests over quota")
    return {**measured, "polls": meter.runs, **meter.steady()}


def observed_apart(opts: Options) -> dict:
    """The observed polls with the stand-in in a process of its own and HELD secrets held, RUNS_APART runs each:
    the 304s at --concurrency, then the changed share at --goal-concurrency."""
    from .figures import RUNS_APART, engine_per_poll
    from .floor import poll_floor
    from .mongowire import WireProcess
    from .spawned import in_child
    from .workloads import Databases

    daemon_logging()
    hold(HELD, seed=1)
    with WireProcess() as uri:
        dbs = Databases(uri, standin=True)
        try:
            quiets, floors = [], []
            for _ in range(RUNS_APART):  # each beside a floor of its own (the machine's speed drifts within minutes)
                quiets.append(observed_polls(opts, dbs, 0.0, opts.polls // 2, opts.concurrency))
                floors.append(in_child(poll_floor, opts.floor_polls)["floor_ms_per_poll"])
            steady = [
                observed_polls(opts, dbs, opts.change_share, opts.polls, opts.goal_concurrency)
                for _ in range(RUNS_APART)
            ]
        finally:
            dbs.close()

    def median(figure: Any, runs: list[dict] = steady) -> float:
        return statistics.median(figure(run) for run in runs)

    return {
        "secrets_held_observed": HELD,
        "engine_cpu_ms_per_poll_apart_observed": median(engine_per_poll, quiets),
        "floor_ms_per_poll_observed": statistics.median(floors),
        "engine_vs_floor_poll_observed": paired([engine_per_poll(run) for run in quiets], floors),
        # the steady part of each run (meter.py): a daemon starts once and runs for weeks
        "all_in_cpu_ms_per_poll_observed": round(median(lambda r: r["steady_cpu_s"] / r["steady_polls"] * 1000), 3),
        "core_share_observed": round(median(lambda r: r["steady_cpu_s"] / r["steady_wall_s"]), 3),
        "polls_per_s_observed": round(median(lambda r: r["steady_polls"] / r["steady_wall_s"]), 1),
        # the whole of each run, its start and stop included
        "all_in_cpu_ms_per_poll_observed_whole": round(median(lambda r: r["cpu_s"] / r["polls"] * 1000), 3),
        "polls_per_s_observed_whole": round(median(lambda r: r["polls"] / r["wall_s"]), 1),
        "goal_concurrency": opts.goal_concurrency,
    }


def paired(engines: list[float], floors: list[float]) -> float:
    """The median of each run's engine CPU per poll over the floor measured beside it (not the median engine over
    the median floor: a run on a slow minute is compared with that minute's floor)."""
    return round(statistics.median(engine / floor for engine, floor in zip(engines, floors, strict=True)), 2)


class Window:
    """The networks of a scaling cycle, fed to the stand-in SCALE_WINDOW at a time: before each claim, those polled
    (due again only in INTERVAL_S) are taken out and new ones put in, until `total` were."""

    def __init__(self, db: Any, total: int, now: Any, window: int = SCALE_WINDOW, first: int = 0):
        self.db, self.total, self.fed, self.now, self.window = db, total, 0, now, window
        self.first = first  # the number of the first network (and of its token)
        self.polled = {"scheduledTo": {"$gt": now + timedelta(seconds=INTERVAL_S / 2)}}

    def top_up(self) -> None:
        from .workloads import insert_due_normal

        self.db.networks.delete_many(self.polled)
        count = min(self.window - self.db.networks.count_documents({}), self.total - self.fed)
        if count <= 0:
            return
        start = self.first + self.fed
        insert_due_normal(self.db, range(start, start + count), self.now - timedelta(seconds=1))
        self.fed += count

    def feed(self, collector: Any) -> None:
        """Top the window up before each of the collector's claims (inside the claim's call: database time)."""
        store = collector.store  # wrapped as the bench's time_store wraps it
        claim = store.claim

        def fed_claim(*args: Any, **kwargs: Any) -> Any:
            self.top_up()
            return claim(*args, **kwargs)

        setattr(store, "claim", fed_claim)  # noqa: B010 - an attribute the store's class defines as a method


def scaling_cycle(opts: Options, dbs: Any, networks: int, first: int = 0) -> dict:
    """One cycle of `networks` normal-mode networks, each polled once (304s): the engine's CPU per network. Their
    numbers (and tokens) start at `first`: a cycle after another in the same process brings tokens new to it, as
    the claims of a fleet do, not tokens its secret set still masks from the cycle before."""
    from ..engine import Collector
    from ..sdk import utcnow
    from .fakeapi import FakeGitHub, FakeProcess, fetch_stats
    from .meter import Meter
    from .workloads import bench_settings, serve_until

    fake = FakeGitHub(latency=opts.scale_latency, seed=7)
    for i in range(first, first + networks):
        fake.add_user(f"bench-token-{i}", generated=30, seed=i)
    db = dbs.new()
    window = Window(db, networks, utcnow(), max(SCALE_WINDOW, 4 * opts.concurrency), first)
    window.top_up()
    with FakeProcess(fake) as url:
        meter = Meter(networks)
        collector = Collector(db, bench_settings(url, opts.concurrency, normal_interval=INTERVAL_S), observers=[meter])
        dbs.relax(db)
        window.feed(collector)
        measured = serve_until(collector, "normal", meter, limit_s=7200)
        collector.close()
        stats = fetch_stats(url)
    if stats["requests"] != networks or stats["not_modified"] != networks:
        raise RuntimeError(f"scaling: {stats['requests']} requests for {networks} networks polled once")
    return {
        f"engine_cpu_ms_per_network_{networks}": round((measured["cpu_s"] - measured["db_s"]) / networks * 1000, 3),
        f"scale_wall_s_{networks}": round(measured["wall_s"], 1),
    }


def scaling_apart(opts: Options) -> dict:
    """The scaling cycle at each of --scale-networks, the stand-in in a process of its own (a cycle of fewer than
    SHORT networks, a few seconds, run SHORT_REPEATS times: the median of each figure), and the engine's CPU per
    network at the largest over that at the smallest."""
    from .mongowire import WireProcess
    from .workloads import Databases

    sizes = sizes_of(opts)
    out: dict = {"scale_networks": sizes, "scale_latency_ms": round(opts.scale_latency * 1000)}
    with WireProcess() as uri:
        dbs = Databases(uri, standin=True)
        try:
            first = 0  # every cycle's networks and tokens new to the process (scaling_cycle)
            for size in sizes:
                cycles = []
                for _ in range(SHORT_REPEATS if size < SHORT else 1):
                    cycles.append(scaling_cycle(opts, dbs, size, first))
                    first += size
                out.update({name: statistics.median(cycle[name] for cycle in cycles) for name in cycles[0]})
        finally:
            dbs.close()
    low, high = (out[f"engine_cpu_ms_per_network_{size}"] for size in (min(sizes), max(sizes)))
    out["engine_cpu_per_network_largest_vs_smallest"] = round(high / low, 3)
    return out
