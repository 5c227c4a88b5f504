"""Test helpers a connector package can use: the conformance kit (see collector.testing.conformance)."""

from .conformance import T0, Fake, Kit, Spec, conformance_tests

__all__ = ["Fake", "Kit", "Spec", "T0", "conformance_tests"]
