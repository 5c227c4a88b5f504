"""Backfill and replay: a sink's walk over the stored items in `_id` order (those dated `since` or later, for a
replay), enqueueing at most SINK_<NAME>_PACE items a second, and only while the sink's queue is below QUEUE_CAP,
so a walk over millions of items never floods the queue nor the database. The cursor in the sink's document
advances after each enqueue succeeded: a walk interrupted anywhere goes on from there (an item enqueued twice is
the same entry)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .mover import queue_entry
from .sdk import SinkConfig
from .store import SinkStore

WALK_MAX = 1000  # items one sink's walk enqueues per round at most
QUEUE_CAP = 10_000  # a walk waits while its sink's queue holds this many entries


def active(doc: Mapping[str, Any] | None) -> dict | None:
    """The walk under way in a sink's document, if any."""
    walk = (doc or {}).get("backfill")
    return walk if isinstance(walk, dict) and not walk.get("doneAt") else None


class Walks:
    """The walks of the configured sinks, paced by a token bucket per sink (one second's worth at most)."""

    def __init__(self, store: SinkStore, queue_cap: int = QUEUE_CAP):
        self.store = store
        self.queue_cap = queue_cap
        self.tokens: dict[str, float] = {}
        self.at: dict[str, datetime] = {}

    def round(self, configs: Iterable[SinkConfig], docs: Mapping[str, Any], now: datetime) -> int:
        """One step of every walk under way; the items enqueued."""
        total = 0
        for config in configs:
            walk = active(docs.get(config.name))
            if walk is None:
                self.tokens.pop(config.name, None)
                self.at.pop(config.name, None)
                continue
            total += self.step(config, walk, now)
        return total

    def step(self, config: SinkConfig, walk: Mapping[str, Any], now: datetime) -> int:
        allowance = int(min(self._refill(config, now), WALK_MAX))
        if allowance < 1 or self.store.queue_size(config.name, limit=self.queue_cap) >= self.queue_cap:
            return 0
        since = walk.get("since") if isinstance(walk.get("since"), datetime) else None
        items = self.store.walk(walk.get("cursor"), since, config.services, allowance)
        self.store.enqueue([queue_entry(config.name, item, now, walked=True) for item in items])
        cursor = items[-1]["_id"] if items else walk.get("cursor")
        done_at = now if len(items) < allowance else None
        self.store.advance(config.name, cursor, len(items), done_at, walk_id=walk.get("id"))
        self.tokens[config.name] -= len(items)
        return len(items)

    def _refill(self, config: SinkConfig, now: datetime) -> float:
        """Tokens of the sink's bucket at `now`: `pace` a second, one second's worth at most (and at first)."""
        full = max(config.pace, 1.0)
        last = self.at.get(config.name)
        if last is None:
            tokens = full
        else:
            elapsed = max(0.0, (now - last).total_seconds())
            tokens = min(full, self.tokens.get(config.name, 0.0) + config.pace * elapsed)
        self.tokens[config.name], self.at[config.name] = tokens, now
        return tokens
