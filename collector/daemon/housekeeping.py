"""Housekeeping, a recurring job of every collector: the quota memory forgets facts that no longer block, quota
facts whose sharing failed are written again, and networks left with a lease that lapsed over LEASE_SECONDS ago
(their collector died) lose the stale lease fields, so `networks list` and `collector status` show them as free.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..engine import Collector

log = logging.getLogger("collector.housekeeping")


def housekeeping(collector: Collector, now: datetime) -> dict[str, int]:
    """One round; returns what it did. Database errors propagate (the job is then counted as failed)."""
    forgotten = collector.quotas.prune(now)
    collector.sharing.share()
    cleared, owners = collector.store.clear_lapsed_leases(now - collector.lease)
    if cleared:
        log.info(
            "housekeeping: cleared %d leases that lapsed over %gs ago (held by %s)",
            cleared,
            collector.settings.lease_seconds,
            ", ".join(f"{owner}: {n}" for owner, n in sorted(owners.items())),
        )
    return {"quotaFactsForgotten": forgotten, "leasesCleared": cleared}
