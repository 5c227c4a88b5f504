"""The daemon room: the long-running process around the engine — signals, reload, recurring jobs, heartbeats,
metrics, systemd, the inactive sweep and logging (docs/ARCHITECTURE.md, "Rooms")."""

from .process import Daemon

__all__ = ["Daemon"]
