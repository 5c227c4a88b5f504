"""`collector bench` options: a plain dataclass, importable by the CLI without loading the bench's machinery
(mongomock, multiprocessing, the fake API)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    networks: int = 100
    pages: int = 3
    latency: float = 0.05
    concurrency: int = 16
    quota_networks: int = 5
    quota: int = 20
    quota_window: int = 4
    quota_windows: int = 2
    quota_pages: int = 100
    soak_runs: int = 5000
    soak_networks: int = 200
