"""Housekeeping, a recurring job of every collector: the quota memory forgets facts that no longer block, quota
facts whose sharing failed are written again, and networks left with a lease that lapsed over LEASE_SECONDS ago
(their collector died) lose the stale lease fields, so `networks list` and `collector status` show them as free.
Waits no collector of ours would keep — a shared quota block or a rateLimit network's next run further than
RATE_LIMIT_MAX_WAIT away, written by an older collector or another program — are brought back within it.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from ..engine.rules import latest_wait

if TYPE_CHECKING:  # pragma: no cover
    from ..engine import Collector

log = logging.getLogger("collector.housekeeping")


def housekeeping(collector: Collector, now: datetime) -> dict[str, int]:
    """One round; returns what it did. Database errors propagate (the job is then counted as failed)."""
    forgotten = collector.quotas.prune(now)
    collector.sharing.share()
    latest = latest_wait(collector.settings, now)
    blocks, waits = collector.store.bound_quota_blocks(latest), collector.store.bound_rate_limit_waits(latest, now)
    if blocks or waits:
        log.warning(
            "housekeeping: %d shared quota blocks and %d rateLimit networks waited past RATE_LIMIT_MAX_WAIT (%gs): "
            "brought back to %s",
            blocks,
            waits,
            collector.settings.rate_limit_max_wait,
            latest.isoformat(timespec="seconds"),
        )
    cleared, owners = collector.store.clear_lapsed_leases(now - collector.lease)
    if cleared:
        log.info(
            "housekeeping: cleared %d leases that lapsed over %gs ago (held by %s)",
            cleared,
            collector.settings.lease_seconds,
            ", ".join(f"{owner}: {n}" for owner, n in sorted(owners.items())),
        )
    return {"quotaFactsForgotten": forgotten, "leasesCleared": cleared, "waitsBounded": blocks + waits}
