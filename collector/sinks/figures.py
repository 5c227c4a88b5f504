"""What the service tells about each sink: the stats it writes to the sink's document every STATS_EVERY seconds
(backlog, lag, the service that wrote them) and the figures `snapshot()` gives the metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from .lane import Lane
from .store import SinkStore

STATS_EVERY = 5.0  # seconds between two writes of the sinks' stats (and counts of the backlog)
FAILED_KINDS = {"refused": "refused", "tooLarge": "too_large", "rejected": "rejected", "auth": "auth"}


@dataclass(frozen=True)
class SinkFigures:
    """One sink as this service sees it: its counters since the process started (delivered, failed by kind —
    refused, too_large, rejected, auth — dead_lettered), the backlog and lag last counted, stopped, paused."""

    delivered: int = 0
    failed: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(FAILED_KINDS.values(), 0))
    dead_lettered: int = 0
    backlog: int = 0
    lag_seconds: float = 0.0
    stopped: bool = False
    paused: bool = False


class Stats:
    def __init__(self, store: SinkStore):
        self.store = store
        self.at: datetime | None = None
        self.backlog: dict[str, int] = {}
        self.lag: dict[str, float] = {}
        self.outbox_pending = 0

    def maybe_write(self, lanes: Mapping[str, Lane], now: datetime, owner: str) -> None:
        """Count each sink's backlog and lag, and write them, when STATS_EVERY has passed since the last time."""
        if self.at is not None and (now - self.at).total_seconds() < STATS_EVERY:
            return
        for name in lanes:
            backlog = self.store.queue_size(name)
            oldest = self.store.oldest_date(name)
            lag = max(0.0, (now - oldest).total_seconds()) if isinstance(oldest, datetime) else 0.0
            self.store.write_stats(name, {"at": now, "backlog": backlog, "lagSeconds": lag, "owner": owner})
            self.backlog[name], self.lag[name] = backlog, lag
        self.outbox_pending = self.store.outbox_pending()
        self.at = now

    def figures(self, lane: Lane, totals: Counter[str] | None) -> SinkFigures:
        totals = totals or Counter()
        return SinkFigures(
            delivered=totals["delivered"],
            failed={label: totals[f"failed.{kind}"] for kind, label in FAILED_KINDS.items()},
            dead_lettered=totals["deadLettered"],
            backlog=self.backlog.get(lane.name, 0),
            lag_seconds=self.lag.get(lane.name, 0.0),
            stopped=lane.stopped,
            paused=lane.paused,
        )
