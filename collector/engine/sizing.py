"""Claim sizing: how many networks the dispatcher asks for, and which services it leaves out. Pure functions of
what the dispatcher holds (networks claimed and waiting, runs in flight per service) and the concurrencies.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Mapping
from operator import attrgetter
from typing import Any, Protocol


class Waiting(Protocol):
    """A claimed network waiting to start, as sizing sees it (engine/run.py's Claimed)."""

    @property
    def service(self) -> str | None: ...


HOLD_LIMIT = 4  # at most this many concurrencies' worth of claimed networks wait to start
SEATS_PER_SLOT = 2  # runs held per request slot: one with its request out, one turning its answer into items


def seats(slots: int) -> int:
    """How many runs one collector (or one service) holds at once for `slots` requests out at once (sdk/slots.py):
    twice as many, so that a run turning its answer into items and being saved has given its slot to the next
    network's request. One slot stays one run: `--concurrency 1` runs networks strictly in series."""
    return slots if slots <= 1 else SEATS_PER_SLOT * slots


def service_key(network: Mapping[str, Any]) -> str | None:
    """The service a network counts against for the per-service cap (None for a garbage value)."""
    service = network.get("service")
    return service if isinstance(service, str) else None


def claim_size(pending: Collection[Waiting], inflight: int, concurrency: int, saturated: set[str]) -> int:
    """How many networks to claim now: none while more than a quarter of a concurrency's worth is claimed and
    waiting to start; else enough for the free slots plus two concurrencies more. So workers find the next
    network waiting when they finish, even while a claim is under way, and claims (three round trips) stay
    few; waiting networks keep their leases, renewed with the others. Networks of a service at its cap
    (SERVICE_CONCURRENCY) that has a cap's worth waiting do not count as ready: the next claim skips that
    service and brings the others' networks, so one busy service never leaves the other slots idle.
    Sized by request slots, not by seats, and runs in a slot's second seat count as waiting: they are work held
    here that another collector of the fleet cannot take. (Counted as running, two collectors sharing the
    bench's walk split it 151/233 pages and reached 0.71-0.78 of their bound, against 0.82-0.83 now.)"""
    c = concurrency
    if len(pending) >= HOLD_LIMIT * c:
        return 0
    ready = sum(1 for n in pending if n.service not in saturated) if saturated else len(pending)
    ready += max(inflight - c, 0)  # runs in a slot's second seat: work held here that no slot is doing yet
    if ready > max(c // 4, 1):
        return 0
    return max(c - inflight, 0) + 2 * c - ready


def saturated_services(
    per_service: Mapping[str | None, int],
    pending: Collection[Waiting],
    concurrency: int,
    cap: Callable[[object], int],
) -> set[str]:
    """Services held back by their own cap (below the concurrency: a cap as large as the concurrency never
    holds a network that a free slot could take) that have a cap's worth of networks already waiting. Counts are
    of runs, against the seats of each cap."""
    full = {s for s, n in per_service.items() if s is not None and n >= seats(cap(s)) and cap(s) < concurrency}
    if not full:
        return set()
    waiting = Counter(n.service for n in pending)
    return {s for s in full if waiting[s] >= cap(s)}


class Blocked:
    """The services that can start nothing more in one dispatch (at their cap, or their polls' request slots
    taken), and whether that is every service still waiting: the dispatch then stops at once rather than move each
    waiting network aside one by one (with one service, the whole hold of up to HOLD_LIMIT concurrencies at every
    dispatch)."""

    def __init__(self, pending: Iterable[Waiting]):
        self.held = pending
        self.services: set[str | None] = set()
        self.waiting: set[str | None] | None = None  # the services of what waited when the first was blocked

    def add(self, service: str | None) -> bool:
        """`service` is blocked; True when every service of the networks waiting is (`Pending.services` when the
        networks are held in one: no look at each of them)."""
        self.services.add(service)
        if self.waiting is None:
            held = self.held
            self.waiting = held.services if isinstance(held, Pending) else set(map(attrgetter("service"), held))
        return self.waiting <= self.services


class Pending(deque):
    """Claimed networks waiting to start (a deque), and `services`: every service among them, and perhaps some no
    longer (a network that joins adds its own; one that leaves takes none away until the deque is empty). As
    many as there are or more, never fewer: a dispatch that stops when all of them are blocked (`Blocked`) stops
    no sooner than it should, without looking at each network waiting (up to HOLD_LIMIT concurrencies of them)
    at every dispatch."""

    def __init__(self, claimed: Iterable[Waiting] = ()):
        super().__init__(claimed)
        self.services: set[str | None] = {one.service for one in self}

    def extend(self, claimed: Iterable[Waiting]) -> None:
        super().extend(self._joining(claimed))

    def extendleft(self, claimed: Iterable[Waiting]) -> None:
        super().extendleft(self._joining(claimed))

    def _joining(self, claimed: Iterable[Waiting]) -> list[Waiting]:
        """`claimed` as a list, their services added (the set starts over when the deque is empty)."""
        if not self:
            self.services = set()
        joining = list(claimed)
        self.services.update(one.service for one in joining)
        return joining

    def append(self, one: Waiting) -> None:
        self.extend((one,))

    def appendleft(self, one: Waiting) -> None:
        self.extendleft((one,))
