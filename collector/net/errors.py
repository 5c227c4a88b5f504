"""The errors the wire raises. Each room maps them to its own: the collectors' SDK to `Transient`, `Interrupted`
or `BadResponse` (sdk/http.py), the sinks to their batch failures (sinks/http.py)."""

from __future__ import annotations


class AddressRefused(Exception):
    """A connection to a non-public address from a host the collector does not trust."""


class Stopping(Exception):
    """The owner's stop cutoff has passed: the request was not started (deadline.py)."""
