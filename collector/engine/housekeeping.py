"""Housekeeping, a recurring job of every collector (the daemon's, through Collector.housekeep): the quota memory
forgets facts that no longer block, quota facts whose sharing failed are written again, and networks left with a
lease that lapsed over LEASE_SECONDS ago (their collector died), or one that ends further ahead than a lease
reaches (no holder renews it), lose the stale lease fields, so `networks list` and `collector status` show them as
free. Waits no collector of ours would keep — a shared quota block or a rateLimit
network's next run further than RATE_LIMIT_MAX_WAIT away, written by an older collector or another program — are
brought back within it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from ..settings import Settings
from ..textout import printable
from .quota import QuotaMemory, QuotaSharing
from .rules import latest_wait
from .store import Store, lease_horizon

log = logging.getLogger("collector.housekeeping")


def housekeeping(
    store: Store, quotas: QuotaMemory, sharing: QuotaSharing, settings: Settings, now: datetime
) -> dict[str, int]:
    """One round; returns what it did. Database errors propagate (the job is then counted as failed)."""
    forgotten = quotas.prune(now)
    sharing.share()
    latest = latest_wait(settings, now)
    blocks, waits = store.bound_quota_blocks(latest), store.bound_rate_limit_waits(latest, now, settings.lease_seconds)
    if blocks or waits:
        log.warning(
            "housekeeping: %d shared quota blocks and %d rateLimit networks waited past RATE_LIMIT_MAX_WAIT (%gs): "
            "brought back to %s",
            blocks,
            waits,
            settings.rate_limit_max_wait,
            latest.isoformat(timespec="seconds"),
        )
    beyond = lease_horizon(now, settings.lease_seconds)
    cleared, owners = store.clear_lapsed_leases(now - timedelta(seconds=settings.lease_seconds), beyond=beyond)
    if cleared:
        log.info(
            "housekeeping: cleared %d leases that lapsed over %gs ago or end further ahead than a lease reaches "
            "(held by %s)",
            cleared,
            settings.lease_seconds,
            printable(", ".join(f"{owner}: {n}" for owner, n in sorted(owners.items()))),
        )
    return {"quotaFactsForgotten": forgotten, "leasesCleared": cleared, "waitsBounded": blocks + waits}
