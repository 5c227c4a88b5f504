"""Quota memory: per access token blocked now, the last rate-limit facts a service gave, so that a network whose
token is known to be out of quota is moved to the reset time without spending an API call. A token with quota left
is not kept: the memory holds as many facts as tokens are blocked (a fact per token polled grew with the fleet, and
every full garbage collection walked them all).

Keys are hashes of (quota scope, token): the tokens themselves are never kept here. Facts that block a token
are shared through MongoDB's `quotas` collection (written after each save, read once per claim batch), so every
collector of every mode, and one that restarts, skips a spent token until its reset.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..sdk.errors import Quota

if TYPE_CHECKING:  # pragma: no cover
    from .loglimit import Throttle
    from .store import Store

log = logging.getLogger("collector.engine")


@dataclass(frozen=True)
class Facts:
    remaining: int | None
    limit: int | None
    blocked_until: datetime | None  # no calls before this (reset, Retry-After, backoff)


class QuotaMemory:
    def __init__(self) -> None:
        self._facts: dict[str, Facts] = {}
        self._unshared: dict[str, Facts] = {}  # blocking facts learnt here, not yet written to the database

    @staticmethod
    @functools.lru_cache(maxsize=16384)  # asked two or three times per run for the same token
    def key(scope: str, token: str) -> str:
        return hashlib.sha256(f"{scope}\x00{token}".encode()).hexdigest()[:24]

    def blocked_until(self, scope: str, token: str, now: datetime) -> datetime | None:
        """`scope` is the quota's owner: a service, or a group of services sharing one quota."""
        facts = self._facts.get(self.key(scope, token))
        if facts is None or facts.blocked_until is None or facts.blocked_until <= now:
            return None
        return facts.blocked_until

    def remember(
        self, scope: str, token: str, quota: Quota | None, wait_until: datetime | None, latest: datetime | None = None
    ) -> None:
        """Record what a run learned: the last quota headers, and a time before which no call may be made
        (a quota reset when the quota is spent, a Retry-After or backoff), never later than `latest` (what a
        server says is clamped here as it is for the network that heard it: rules.clamp_wait)."""
        if quota is None and wait_until is None:
            return
        if wait_until is None and quota is not None and quota.exhausted():
            wait_until = quota.reset
        wait_until = bounded(wait_until, latest)
        key = self.key(scope, token)
        if wait_until is None:  # not blocked: an older block of it is over; nothing else is kept (`prune`'s rule)
            self._facts.pop(key, None)
            return
        self._facts[key] = Facts(quota.remaining if quota else None, quota.limit if quota else None, wait_until)
        self._unshared[key] = self._facts[key]

    def unshared(self) -> dict[str, Facts]:
        """Blocking facts to write to the database (and forget as unshared)."""
        facts, self._unshared = self._unshared, {}
        return facts

    def share_again(self, facts: dict[str, Facts]) -> None:
        """Writing them failed: keep them for the next save."""
        self._unshared = {**facts, **self._unshared}

    def adopt(self, facts: dict[str, Facts], latest: datetime | None = None) -> None:
        """Facts other collectors learnt (read from the database); a later block wins, none later than `latest`
        (a fact written by an older collector or another program may say anything)."""
        for key, fact in facts.items():
            fact = Facts(fact.remaining, fact.limit, bounded(fact.blocked_until, latest))
            mine = self._facts.get(key)
            if (
                mine is None
                or (mine.blocked_until or fact.blocked_until)
                and (mine.blocked_until is None or (fact.blocked_until and fact.blocked_until > mine.blocked_until))
            ):
                self._facts[key] = fact

    def prune(self, now: datetime) -> int:
        """Forget facts that no longer block anything, so the memory stays as small as the set of blocked
        tokens; returns how many were forgotten."""
        before = len(self._facts)
        self._facts = {k: f for k, f in self._facts.items() if f.blocked_until and f.blocked_until > now}
        return before - len(self._facts)

    def blocked(self, now: datetime) -> int:
        """How many tokens are blocked at `now` (what the quota-memory gauge shows)."""
        return sum(1 for f in self._facts.values() if f.blocked_until is not None and f.blocked_until > now)

    def __len__(self) -> int:
        return len(self._facts)


def bounded(until: datetime | None, latest: datetime | None) -> datetime | None:
    return until if until is None or latest is None else min(until, latest)


class QuotaSharing:
    """The one place quota facts cross between collectors: `share()` writes the blocking facts this collector
    learnt (after each save, and again from housekeeping when that failed), `adopt(networks, now)` reads, in one
    query, what others shared for the tokens of the networks just claimed."""

    def __init__(self, store: Store, memory: QuotaMemory, throttle: Throttle):
        self.store, self.memory, self.throttle = store, memory, throttle

    def share(self) -> None:
        """Write the blocking quota facts learnt since the last share (a failure keeps them for the next)."""
        facts = self.memory.unshared()
        if not facts:
            return
        try:
            self.store.save_quotas(facts)
        except Exception as exc:
            self.memory.share_again(facts)
            self.throttle.trouble(
                "quotas", "sharing %d quota facts failed (%s); kept for the next save", len(facts), exc
            )

    def adopt(self, tokens: Iterable[tuple[str, object]], now: datetime, latest: datetime | None = None) -> None:
        """Take in what others shared for these (quota scope, token) pairs, no block later than `latest`."""
        keys = {QuotaMemory.key(scope, token): True for scope, token in tokens if isinstance(token, str)}
        if not keys:
            return
        try:
            shared = self.store.load_quotas(keys, now)
        except Exception as exc:
            self.throttle.trouble(
                "adopt", "reading shared quota facts failed (%s); going on with this collector's own", exc
            )
            return
        facts = {k: Facts(remaining, limit, until) for k, (remaining, limit, until) in shared.items()}
        self.memory.adopt(facts, latest)
