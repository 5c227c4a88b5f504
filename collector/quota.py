"""Quota memory: per access token, the last rate-limit facts a service gave, so that a network whose token is
known to be out of quota is moved to the reset time without spending an API call.

Keys are hashes of (service, token): the tokens themselves are never kept here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from .sdk.errors import Quota


@dataclass(frozen=True)
class Facts:
    remaining: int | None
    limit: int | None
    blocked_until: datetime | None  # no calls before this (reset, Retry-After, backoff)


class QuotaMemory:
    def __init__(self) -> None:
        self._facts: dict[str, Facts] = {}

    @staticmethod
    def key(scope: str, token: str) -> str:
        return hashlib.sha256(f"{scope}\x00{token}".encode()).hexdigest()[:24]

    def blocked_until(self, scope: str, token: str, now: datetime) -> datetime | None:
        """`scope` is the quota's owner: a service, or a group of services sharing one quota."""
        facts = self._facts.get(self.key(scope, token))
        if facts is None or facts.blocked_until is None or facts.blocked_until <= now:
            return None
        return facts.blocked_until

    def remember(self, scope: str, token: str, quota: Quota | None, wait_until: datetime | None) -> None:
        """Record what a run learned: the last quota headers, and a time before which no call may be made
        (a quota reset when the quota is spent, a Retry-After or backoff)."""
        if quota is None and wait_until is None:
            return
        if wait_until is None and quota is not None and quota.exhausted():
            wait_until = quota.reset
        self._facts[self.key(scope, token)] = Facts(
            quota.remaining if quota else None, quota.limit if quota else None, wait_until
        )

    def prune(self, now: datetime) -> None:
        """Forget facts that no longer block anything, so the memory stays as small as the set of tokens."""
        self._facts = {k: f for k, f in self._facts.items() if f.blocked_until and f.blocked_until > now}

    def __len__(self) -> int:
        return len(self._facts)
