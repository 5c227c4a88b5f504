"""Claims: which networks this collector takes, and taking them. The services it serves (SERVICES or --services,
SERVICES_EXCLUDE), the operator's pauses as last read (engine/store/control.py), and the claim itself: lease a
batch of due networks, read each once (`admit`: its fields, mode and connector), take in the quota facts other
collectors shared for their tokens, and hide their secrets from the logs from then on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from ..sdk.redaction import SECRETS
from ..settings import Settings
from ..textout import printable
from .decide import failure
from .events import Observers
from .leases import Leases
from .loglimit import Throttle
from .quota import QuotaSharing
from .registry import Registry
from .rules import latest_wait, schedule_lag
from .run import Attempt, Claimed, admit
from .store import Store, lease_held, runnable
from .store.control import Pause, holding
from .store.control import read as read_pause

log = logging.getLogger("collector.engine")
REPAIR_EVERY = 5.0  # seconds between two reports of networks with an unknown mode (a claim's, at most)


class Claims:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        sharing: QuotaSharing,
        observers: Observers,
        throttle: Throttle,
        settings: Settings,
        instance_id: str,
        services: Iterable[str] | None = None,
    ):
        self.store, self.registry, self.sharing = store, registry, sharing
        self.observers, self.throttle = observers, throttle
        self.settings = settings  # replaced by a reload (Collector.apply_settings)
        self.instance_id = instance_id
        self.services_given = frozenset(services) if services else None  # --services wins over SERVICES
        self.pauses: list[Pause] = []  # the operator's pauses as last read
        self.pauses_read_at = 0.0  # monotonic time of the next read
        self.repair_at = 0.0  # monotonic time of the next repair of what other programs wrote (`repair`)

    @property
    def lease_length(self) -> timedelta:
        return timedelta(seconds=self.settings.lease_seconds)

    def leases(self, clock: Callable[[], datetime], held: Callable[[], list]) -> Leases:
        """The leases of what a loop holds: renewed while held, given back when not run."""
        return Leases(self.store, self.instance_id, lambda: self.lease_length, clock, held, self.throttle)

    def served(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        """The services this collector claims (None: every one) and those it leaves to others: SERVICES (or
        --services) and SERVICES_EXCLUDE, as the settings now say (a reload may change them)."""
        only = self.services_given if self.services_given is not None else self.settings.services
        return (frozenset(only) if only else None), frozenset(self.settings.services_exclude)

    def claim(
        self, mode: str, limit: int, now: datetime, skip_services: Iterable[str] = (), repair: bool = False
    ) -> list[Claimed]:
        """Lease up to `limit` due networks of `mode`, none of `skip_services`, each read once (`lease`, then
        `admitted`)."""
        return self.admitted(mode, self.lease(mode, limit, now, skip_services, repair), now)

    @property
    def ahead_ok(self) -> bool:
        """Whether a claim's database work may run on a thread of its own (claimahead.py): a database client that
        is thread-safe (pymongo's), not mongomock in this process."""
        return not self.store.mongomock

    def lease(
        self, mode: str, limit: int, now: datetime, skip_services: Iterable[str] = (), repair: bool = False
    ) -> list[dict]:
        """The claim's database work: lease up to `limit` due networks of `mode`, none of `skip_services`, as
        documents. While services are left out, the claim names the ones it takes (points of the (mode, service,
        scheduledTo) index): a network of a service no connector is registered for waits for a claim that leaves
        none out. What other programs wrote is repaired first (`repair`): with `repair` (a pass), else every
        REPAIR_EVERY seconds. Database calls and pure reads only: it may run on the claim-ahead thread."""
        only, excluded = self.served()
        skip = {*skip_services, *excluded}
        if skip and only is None:
            only = frozenset(self.registry.names())
        if repair or time.monotonic() >= self.repair_at:
            self.repair_at = time.monotonic() + REPAIR_EVERY
            self.repair(mode, now)
        return self.store.claim(mode, now, limit, self.instance_id, now + self.lease_length, skip, only)

    def admitted(self, mode: str, networks: list[dict], now: datetime) -> list[Claimed]:
        """Leased networks taken in, on the loop's thread: the observers told, each read once (`admit`), the quota
        facts other collectors shared for their tokens taken in."""
        self.observers.notify("on_claim", str(mode), len(networks))
        self.observers.notify("on_lag", str(mode), schedule_lag(networks, now))
        claimed = self.admit(networks)
        # (quota scope, token) of each: an unknown service is reported when its network is prepared
        tokens = [
            (c.connector.quota_group or c.connector.name, c.network.get("accessToken")) for c in claimed if c.connector
        ]
        self.sharing.adopt(tokens, now, latest_wait(self.settings, now))
        return claimed

    def repair(self, mode: str, now: datetime) -> None:
        """What another program left out of the due range comes in (engine/store `repair_schedules`), apart from
        the claim's filter: a missing or non-date `scheduledTo` becomes `now`; the initial collector reports a
        network whose mode is none of the known ones, due, as its run would (a malformed error; disabled after
        MAX_ERRORS), without running it."""
        repaired = self.store.repair_schedules(mode, now)
        if repaired:
            log.info("%d networks of mode %s had no usable scheduledTo: due now", repaired, mode)
        if mode == "normal":
            return
        reported = 0
        found = self.store.odd_modes(now)
        held = [n["_id"] for n in found if not runnable(n)]
        if held:  # disabled, skipped, unauthorized: parked, as a claim parks them
            self.store.park(held, now)
        for network in (n for n in found if runnable(n)):
            claimed = admit(network, self.registry)
            if claimed.problem is None or lease_held(network.get("leaseUntil"), now, self.settings.lease_seconds):
                continue
            result = failure(Attempt(network, None, now, 0.0), claimed.problem, self.settings)
            update = result.update
            reported += self.store.save_state(
                network["_id"], dict(update.values), update.unset, network.get("leaseEpoch")
            )
        if reported:
            log.warning(
                "%d networks have a mode that is none of initial, normal, rateLimit: reported malformed", reported
            )

    def claim_one(self, network_id: object, now: datetime) -> Claimed | None:
        """Lease one network now, due or not (`collector networks run`); None when absent or leased by another."""
        network = self.store.claim_one(network_id, now, self.instance_id, now + self.lease_length)
        return None if network is None else self.admit([network])[0]

    def admit(self, networks: list[dict]) -> list[Claimed]:
        """Read each network once (its sealed tokens opened) and hide its secrets from the logs until it is let go
        of."""
        claimed = [admit(network, self.registry, self.store.keys) for network in networks]
        SECRETS.add([value for one in claimed for value in one.held])  # one update of the set
        return claimed

    def paused(self, mode: str, now: datetime) -> tuple[bool, set[str]]:
        """What the operator's pauses hold back for `mode` now (the whole mode, services), read from the store at
        most every HEARTBEAT_SECONDS; a failed read keeps what was known."""
        if time.monotonic() >= self.pauses_read_at:
            self.pauses_read_at = time.monotonic() + self.settings.heartbeat_seconds
            try:
                found = [p for p in (read_pause(d) for d in self.store.pauses()) if p is not None]
            except Exception as exc:
                self.throttle.trouble(
                    "pauses", "reading the operator's pauses failed (%s); keeping %d known", exc, len(self.pauses)
                )
            else:
                self.note_pauses(found, mode, now)
        return holding(self.pauses, mode, now)

    def note_pauses(self, found: list[Pause], mode: str, now: datetime) -> None:
        """Log a pause that starts or stops holding this mode (once), and tell the observers (metrics)."""
        before = {p.scope for p in self.pauses if not p.expired(now) and p.covers(mode)}
        after = {p.scope: p for p in found if not p.expired(now) and p.covers(mode)}
        for scope in after.keys() - before:
            p = after[scope]
            log.warning(
                "paused by %s since %s: %s%s — no claims for mode %s, service %s; runs in flight finish",
                printable(p.by),
                p.at,
                printable(p.reason) or "no reason given",
                f" (until {p.until})" if p.until else "",
                p.mode,
                p.service,
            )
        for scope in before - after.keys():
            log.warning("pause %s lifted (resumed or expired): claims go on", scope)
        self.pauses = found
        self.observers.notify("on_pauses", mode, list(after.values()))
