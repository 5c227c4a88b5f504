"""The engine room: one network from claim to save. It imports only the connector SDK, the settings and the
shared text helpers; the daemon and the operator's tools import it, never the other way round
(docs/ARCHITECTURE.md, "Rooms")."""

from .collector import Collector, Report, default_instance_id, run_once
from .registry import Registry

__all__ = ["Collector", "Registry", "Report", "default_instance_id", "run_once"]
