"""The claiming half of the dispatcher (dispatch.py): claim the next batch when few claimed networks still wait — on
the dispatcher's thread, or ahead on a thread of its own while runs are in flight (claimahead.py) — take a batch in,
give back what a pause or a stop keeps from running. A mix-in of `Dispatcher`, whose state it reads and moves (the
claims in hand, the leases, the next look for due networks)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any

from ..settings import Settings
from .capacity import Capacity
from .claimahead import ClaimAhead, Leased
from .claims import Claims
from .events import Report
from .leases import Leases
from .loglimit import Throttle
from .outbox import Outbox
from .run import Claimed, Run, forget
from .sizing import Pending
from .workers import Finished

CLAIM_FAILED = "claiming %s networks failed (%s); next try in %.0fs"


class Intake:
    claims: Claims
    ahead: ClaimAhead
    capacity: Capacity
    leases: Leases
    outbox: Outbox
    throttle: Throttle
    settings: Settings
    report: Report
    pending: Pending
    inflight: dict[int, Run]
    mode: str
    clock: Callable[[], datetime]
    claims_open: bool
    stop_seen: float | None
    next_claim: float
    claim_failures: int

    def saturated(self) -> set[str]:
        raise NotImplementedError

    def wanted(self, saturated: set[str]) -> int:
        raise NotImplementedError

    def held_networks(self) -> list[Mapping[str, Any]]:
        raise NotImplementedError

    def claim(self) -> None:
        """Continuous mode: claim the next batch when few claimed networks still wait (`wanted`; and not before
        the next look after an empty claim or a failed one)."""
        if not self.claims_open or self.stop_seen is not None or time.monotonic() < self.next_claim:
            return
        whole, services = self.claims.paused(self.mode, self.clock())
        if whole or services:
            self.give_back(whole, services)
        if whole:  # the operator paused this mode: no claim; runs in flight finish and are saved (a drain)
            look_again = min(self.settings.heartbeat_seconds, self.settings.loop_idle_pause or 1)
            self.next_claim = time.monotonic() + look_again
            return
        saturated = self.saturated() | services
        wanted = self.wanted(saturated)
        if not wanted:
            return
        if self.ahead.busy:
            return
        if self.inflight and self.claims.ahead_ok:  # runs go on while the claim's round trips are out
            self.ahead.start(self.mode, wanted, self.clock(), saturated)
            return
        try:
            claimed = self.claims.claim(self.mode, wanted, self.clock(), saturated)
        except Exception as exc:  # the database is away: try again soon, the held runs go on
            self.claim_failed(exc)
            return
        self.took(claimed)

    def leased(self, finished: Finished) -> None:
        """A claim made ahead came back: taken in here, or given back when a stop came meanwhile."""
        self.ahead.taken()
        leased = finished.result
        assert isinstance(leased, Leased)
        self.claims.store.replay(leased.reports)
        if finished.error is not None:
            self.claim_failed(finished.error)  # type: ignore[arg-type]  # an Exception (claimahead.py)
            return
        claimed = self.claims.admitted(leased.mode, leased.documents, leased.now)
        if self.stop_seen is not None:
            self.pending.extend(claimed)
            self.report.released += self.give_back(True)
            return
        self.took(claimed)
        whole, services = self.claims.paused(self.mode, self.clock())  # a pause read while it was out holds it too
        if whole or services:
            self.give_back(whole, services)

    def took(self, claimed: list[Claimed]) -> None:
        """Networks just claimed join those waiting to start."""
        self.claim_failures = 0
        self.throttle.forget("claim")
        if not claimed:
            self.next_claim = time.monotonic() + self.settings.loop_idle_pause
            return
        if len(self.outbox.users) > 8 * self.capacity.concurrency:  # keep the user look-ups of held networks only
            self.outbox.keep_users({n.get("user") for n in self.held_networks()})
        if not (self.pending or self.inflight):
            self.leases.restart()
        self.pending.extend(claimed)

    def claim_failed(self, exc: Exception) -> None:
        self.claim_failures += 1
        self.next_claim = time.monotonic() + min(2.0**self.claim_failures, self.settings.loop_idle_pause)
        wait = max(self.next_claim - time.monotonic(), 0.0)
        self.throttle.trouble("claim", CLAIM_FAILED, self.mode, exc, wait, level=logging.ERROR)

    def give_back(self, whole: bool, services: Collection[str] = ()) -> int:
        """Claimed networks of a paused scope (all of them: a stop) that have not started are given back, not
        run; returns how many."""
        held = [c for c in self.pending if whole or c.service in services]
        if held:
            self.leases.give_back(c.network for c in held)
            self.pending = Pending(c for c in self.pending if not (whole or c.service in services))
            for one in held:
                forget(one.network, {}, one.held)
        return len(held)
