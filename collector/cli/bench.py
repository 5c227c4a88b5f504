"""`collector bench`: throughput, quota use and memory against the fake API (devtools/bench.py, loaded only when
the command runs; its options are devtools/options.py's, light enough to build the parser with)."""

from __future__ import annotations

import argparse

from ..devtools.options import Options
from ..settings import Settings
from .common import Commands

BENCH_FLAGS = (
    ("networks", int, "networks in the history walk"),
    ("split-processes", int, "collector processes sharing the walk's concurrency, database apart (1: not run)"),
    ("pages", int, "pages of 100 stars per network"),
    ("series-networks", int, "networks walked in series (concurrency 1) for the series time per task"),
    ("latencies", str, "fake API latencies to measure, ms, comma-separated (the last is the headline)"),
    ("concurrency", int, "requests out at once (twice as many networks held)"),
    ("compare-concurrency", int, "a second concurrency, for comparison"),
    ("latency-sigma", float, "> 0: lognormal latency with this sigma and a 1%% tail ten times slower"),
    ("poll-networks", int, "networks in the steady-state polls"),
    ("polls", int, "polls in the steady-state workload"),
    ("poll-latency", float, "latency of the steady-state polls, seconds"),
    ("change-share", float, "share of polls that find a changed page (the rest are 304)"),
    ("cycle-networks", int, "normal-mode networks of the one-cycle measure (cycle_s_3000)"),
    ("cycle-latency", float, "latency of the one-cycle measure, seconds"),
    ("quota-networks", int, "networks in the quota-bound run"),
    ("quota", int, "requests per token per quota window in the quota-bound run"),
    ("quota-window", int, "quota window, seconds"),
    ("quota-windows", int, "quota windows the quota-bound run lasts"),
    ("quota-pages", int, "pages per network in the quota-bound run (work must exceed quota)"),
    ("soak-runs", int, "network runs in the memory soak"),
    ("soak-networks", int, "networks in the memory soak"),
    ("floor-pages", int, "pages per round of the floor measure (urllib3, gzip, orjson, dicts; again with zlib-ng)"),
    (
        "floor-polls",
        int,
        "304 polls per round of the floor measure (urllib3; a raw socket), and of the one beside each observed run",
    ),
    (
        "sink",
        str,
        "the sink workload: the walk with and without a sink service delivering to osmem-server (opensearch; a "
        "webhook receiver when osmem-server is not installed), to a webhook receiver (webhook), to a destination "
        "that never answers (stalled); off: not run",
    ),
    ("sink-networks", int, "networks (of --pages pages) whose items one sink service delivers, for its throughput"),
    ("claim-networks", str, "the claim's wall time with these many networks, comma-separated (empty: not run)"),
    ("run-lines", int, "run lines timed per round at each count of secrets held (0, 4096, 16384)"),
    ("goal-concurrency", int, "polls in flight in the goal's all-in polls (processes_for_10M)"),
    (
        "scale-networks",
        str,
        "networks of each scaling cycle, comma-separated (100000 too: ~5 more minutes); empty: not run",
    ),
    ("scale-latency", float, "latency of the scaling cycles, seconds"),
    ("mongodb-uri", str, "measure against this MongoDB (a scratch database is created and dropped)"),
)


def register(commands: Commands) -> None:
    bench = commands.add_parser(
        "bench",
        description="Measure throughput, quota use and memory against the fake API.",
        help="measure throughput, quota use and memory against the fake API; prints one line of JSON",
    )
    defaults = Options()
    for flag, kind, help_text in BENCH_FLAGS:
        # SUPPRESS: a flag not given here leaves the top-level value (`collector --concurrency 1 bench`) alone
        bench.add_argument(
            f"--{flag}",
            type=kind,
            default=argparse.SUPPRESS,
            help=f"{help_text} (default: {getattr(defaults, flag.replace('-', '_'))})",
        )
    bench.set_defaults(handler=run)


def options(args: argparse.Namespace) -> Options:
    """The bench's options from the flags given, before the command (`--concurrency`) or after it."""
    given = {flag.replace("-", "_") for flag, _, _ in BENCH_FLAGS} & {k for k, v in vars(args).items() if v is not None}
    return Options(**{name: getattr(args, name) for name in given})


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ..daemon.logs import setup_logging
    from ..devtools import bench

    setup_logging("ERROR")
    return bench.run(options(args))
