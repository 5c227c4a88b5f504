"""The leases one dispatcher holds on the networks it claimed (waiting for a worker, running, or waiting to be
saved): renewed every third of LEASE_SECONDS, given back when a stop leaves claimed networks unrun (a failed
give-back is retried while the dispatcher lasts; after that the leases simply lapse), and the time they lapse,
after which results that could not be saved are dropped (the networks run again; their items are stored once).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from .loglimit import Throttle
from .store import Store


def due_at(scheduled: Any, now: datetime) -> datetime:
    """When a network given back is due: as it was when claimed (the claim moved it to the lease's end)."""
    return scheduled if isinstance(scheduled, datetime) else now


class Leases:
    def __init__(
        self,
        store: Store,
        owner: str,
        lease: Callable[[], timedelta],
        clock: Callable[[], datetime],
        held: Callable[[], list],
        throttle: Throttle,
    ):
        self.store, self.owner, self.lease, self.clock, self.held = store, owner, lease, clock, held
        self.throttle = throttle
        self.last_renew = time.monotonic()
        self.until = clock() + lease()  # when the oldest lease held lapses
        self.unreleased: list[tuple[Any, Any, Any]] = []  # (id, epoch, due at) of networks to give back

    @property
    def renew_every(self) -> float:
        """Seconds between renewals: a third of LEASE_SECONDS as the settings now say (a reload may change it)."""
        return max(self.lease().total_seconds() / 3, 0.05)

    def restart(self) -> None:
        """A claim made while nothing else was held: the leases held now lapse one LEASE_SECONDS from now."""
        self.until = self.clock() + self.lease()

    def lapsed(self) -> bool:
        return self.clock() >= self.until

    def renew_in(self) -> float:
        """Seconds until the next renewal is due."""
        return self.renew_every - (time.monotonic() - self.last_renew)

    def renew(self) -> None:
        if time.monotonic() - self.last_renew < self.renew_every:
            return
        ids = self.held()
        if not ids:
            return
        until = self.clock() + self.lease()
        try:
            self.store.renew(ids, self.owner, until)
        except Exception as exc:  # keep going: the next try comes soon, and saves are fenced anyway
            self.throttle.trouble("renew", "renewing %d leases failed (%s); retrying", len(ids), exc)
            self.last_renew = time.monotonic() - self.renew_every + min(self.renew_every, 1.0)
            return
        self.until = until
        self.last_renew = time.monotonic()

    def give_back(self, networks: Iterable[Mapping[str, Any]]) -> None:
        """Networks claimed and not run (a stop): their leases are released now (or at the next try)."""
        now = self.clock()  # a network that was due with no date is due now
        self.unreleased += [(n["_id"], n.get("leaseEpoch"), due_at(n.get("scheduledTo"), now)) for n in networks]
        self.release()

    def release(self) -> None:
        """Give back leases of networks that will not run; a failure is logged and retried while the dispatcher
        lasts (after that the leases simply lapse)."""
        if not self.unreleased:
            return
        try:
            self.store.release(self.unreleased)
            self.unreleased = []
        except Exception as exc:
            self.throttle.trouble(
                "release",
                "giving back %d leases failed (%s); retrying, else they lapse in %gs",
                len(self.unreleased),
                exc,
                self.lease().total_seconds(),
            )
