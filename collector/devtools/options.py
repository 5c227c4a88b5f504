"""`collector bench` options: a plain dataclass, importable by the CLI without loading the bench's machinery
(mongomock, multiprocessing, the fake API)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    networks: int = 128  # history walk: networks of `pages` full pages each
    pages: int = 3
    series_networks: int = 4  # the same walk in series (--concurrency 1), on this many networks
    latencies: str = "200,600"  # ms, comma-separated; the last one is the headline point
    concurrency: int = 64
    compare_concurrency: int = 16
    latency_sigma: float = 0.0  # > 0: lognormal latency with a 1% tail ten times slower
    poll_networks: int = 512  # steady-state polls (normal mode)
    polls: int = 3072
    poll_latency: float = 0.2
    change_share: float = 0.05  # share of polls that find a changed page (the rest: 304)
    cycle_networks: int = 3000  # one cycle of normal-mode networks at cycle_latency, daemon defaults
    cycle_latency: float = 0.6
    quota_networks: int = 5
    quota: int = 20
    quota_window: int = 4
    quota_windows: int = 2
    quota_pages: int = 100
    soak_runs: int = 5000
    soak_networks: int = 200
    floor_pages: int = 150  # the floor (floor.py): three rounds of this many pages, and of floor_polls 304s
    floor_polls: int = 1500
    split_processes: int = 2  # the database-apart walk again, shared by this many collector processes (1: not run)
    sink: str = "opensearch"  # the sink workload's destination: opensearch (else a webhook receiver), webhook, off
    sink_networks: int = 32  # networks of `pages` pages whose items a sink delivers for its own throughput
    claim_networks: str = "3000"  # the claim's wall time at these sizes (claimbench.py; "3000,30000,100000" for the
    # scaling figures); "": not run
    run_lines: int = 5000  # run lines timed per round at each count of secrets held (goal.py)
    goal_concurrency: int = 256  # the goal's polls (goal.py): in flight at once, enough to fill a core at 200 ms
    scale_networks: str = "3000,30000"  # the scaling cycles (goal.py), comma-separated; empty: not run
    scale_latency: float = 0.05  # latency of the scaling cycles, seconds
    mongodb_uri: str = ""  # a real MongoDB (a scratch database is created and dropped); empty: mongomock
