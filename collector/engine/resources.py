"""What the dispatcher uses of the Collector that drives it: the Collector's resources as a protocol, so that
dispatch.py and collector.py do not import each other (the Collector satisfies it; tests/test_architecture.py
fails on any import cycle)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import random
    from datetime import timedelta

    from ..sdk.http import Http
    from ..settings import Settings
    from .dbhealth import DatabaseHealth
    from .events import Observers
    from .loglimit import Throttle
    from .quota import QuotaMemory
    from .registry import Registry
    from .run import RunResult
    from .saving import Saver
    from .store import Store
    from .workers import Workers


class Resources(Protocol):
    """The Collector, as the dispatcher sees it."""

    settings: Settings
    concurrency: int
    instance_id: str
    store: Store
    saver: Saver
    registry: Registry
    http: Http
    pool: Workers
    rng: random.Random
    quotas: QuotaMemory
    observers: Observers
    throttle: Throttle
    database: DatabaseHealth
    running: dict[int, tuple[Any, Any, Any, datetime]]

    @property
    def lease(self) -> timedelta: ...

    def claim_batch(self, mode: str, limit: int, now: datetime, skip_services: Any = ()) -> list[dict]: ...

    def learn(self, result: RunResult) -> None: ...

    def forget(self, network: Mapping[str, Any], tokens: Mapping[str, Any]) -> None: ...

    def service_cap(self, service: object) -> int: ...

    def out_of_descriptors(self) -> None: ...

    def paused(self, mode: str, now: datetime) -> tuple[bool, set[str]]: ...
