"""Connectors: one module per service. See connectors.base for the interface and README "Writing a connector"."""
from .base import Connector, Job, Result

__all__ = ["Connector", "Job", "Result"]
