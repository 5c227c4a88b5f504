"""The sink service's status, as its process (daemon/sinkprocess.py) reads it after each round: one typed value,
never attributes looked up from outside."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .service import SinkService


@dataclass(frozen=True)
class ServiceStatus:
    """`holds_lease`: this process works (the others stand by); `database_up`: MongoDB answered the last round;
    `measured`: when the backlog and lag were last counted; `busy`: a sink is being prepared or has deliveries in
    flight; `lease_seconds`: the service lease's length."""

    holds_lease: bool
    database_up: bool
    measured: datetime | None
    busy: bool
    lease_seconds: float


def status_of(service: SinkService) -> ServiceStatus:
    """The service's status now (on the thread that calls its step(), between rounds)."""
    return ServiceStatus(
        holds_lease=service.holds_lease,
        database_up=service.database_up,
        measured=service.stats.at,
        busy=any(lane.preparing is not None or lane.flights for lane in service.lanes.values()),
        lease_seconds=service.lease_seconds,
    )
