"""The mover: every round, the items marked `sinkPending` become queue entries, one per configured sink whose
service filter takes them, and only once those are in, the marker is unset. A failure between the two leaves the
marker: the next round does it again, and the entries already there stay as they are (idempotent by `_id`). No
order, no clock, no sequence: nothing can be skipped. New sinks are registered at the start of the same round
(with their backfill, which walks every item, so an item the round unmarks before a new sink was known is still
found by that sink's walk)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..settings.parsers import SINK_NAME
from ..textout import printable
from .sdk import SinkConfig
from .store import SinkStore

MOVE_BATCH = 1000  # marked items moved per round at most
log = logging.getLogger("collector.sinks")


def entry_id(sink: str, item: Any) -> dict[str, Any]:
    """A queue entry's `_id`: the sink and the item (one entry per sink and item: queued twice, kept once)."""
    return {"s": sink, "i": item}


def queue_entry(sink: str, item: Mapping[str, Any], now: datetime, walked: bool = False) -> dict[str, Any]:
    """The queue entry of `item` for `sink`, due now, dated from when it became due, which the lag counts from: a
    new item's date (when it was stored; now if it has none a client can read), a backfill's or replay's (`walked`)
    now — an old item walked is not late, and months of "lag" would hide the lag of new items."""
    date = item.get("date")
    return {
        "_id": entry_id(sink, item["_id"]),
        "sink": sink,
        "item": item["_id"],
        "date": date if isinstance(date, datetime) and not walked else now,
        "at": now,
        "nextAt": now,
        "tries": 0,
        "rejects": 0,
    }


def wants(config: SinkConfig, item: Mapping[str, Any]) -> bool:
    """Whether the sink's service filter (SINK_<NAME>_SERVICES) takes the item."""
    return not config.services or item.get("type") in config.services


def register_new(
    store: SinkStore, configs: Iterable[SinkConfig], known: Mapping[str, Any], owner: str, now: datetime
) -> list[str]:
    """Create the document of each configured sink not seen before; the names registered."""
    added = []
    for config in configs:
        if config.name not in known:
            store.register(config.name, config.kind, config.backfill, owner, now)
            added.append(config.name)
    return added


def unserved(registered: Iterable[Any], configs: Iterable[SinkConfig]) -> list[str]:
    """The registered sinks (names of the sinks' documents) the settings do not configure, by name. Only sink
    names count: a document a shell gave another id is no sink."""
    configured = {c.name for c in configs}
    return sorted(n for n in registered if isinstance(n, str) and SINK_NAME.fullmatch(n) and n not in configured)


def move(store: SinkStore, configs: list[SinkConfig], now: datetime, limit: int = MOVE_BATCH) -> int:
    """One round: up to `limit` marked items queued for every sink that wants them, then unmarked. The number of
    items moved (`limit` means more may wait). With no sink configured nothing moves: the first sink gets them.
    An item is unmarked only when queued for every registered sink: while the database knows a sink these settings
    do not configure (another service's, or one removed from SINKS), the items stay marked (nothing is lost; the
    service says so). That is looked at after the enqueue: a sink registered before it is found here, and one
    registered after it starts its backfill after these items were stored, so its walk finds them."""
    if not configs:
        return 0
    items = store.pending_items(limit)
    if not items:
        return 0
    store.enqueue([queue_entry(c.name, item, now) for item in items for c in configs if wants(c, item)])
    if unserved(store.sink_names(), configs):
        return 0
    store.unmark([item["_id"] for item in items])
    return len(items)


class Unserved:
    """The registered sinks the service's settings do not configure: while there are any, the mover waits (the
    items stay marked). Said once in the log and in the lease document, and again when the set changes."""

    def __init__(self, store: SinkStore, owner: str):
        self.store, self.owner = store, owner
        self.said: list[str] | None = None  # as last said (None: not yet, since the lease was taken)

    def check(self, registered: Iterable[Any], configs: Iterable[SinkConfig], now: datetime) -> bool:
        unknown = unserved(registered, configs)
        if unknown != self.said:
            self.store.set_blocked(self.owner, unknown, now)
            if unknown:
                log.warning(
                    "sinks: new items are not queued for any sink (kept marked, nothing lost): sink(s) %s registered "
                    "in MongoDB, not configured here (SINKS); configure them, or `collector sinks forget NAME` one "
                    "removed on purpose",
                    printable(", ".join(unknown)),
                )
            elif self.said:
                log.info("sinks: every registered sink is configured: new items are queued again")
            self.said = unknown
        return bool(unknown)
