"""The conformance bar (collector.testing, shipped with the package) run on every built-in connector with the
project's fixtures (tests/helpers/services.py). A new built-in connector adds a Spec there; the first test fails until
it does. Third-party connectors installed beside the project are not this suite's business."""

from __future__ import annotations

import pytest

from collector.engine.registry import Registry
from collector.testing import conformance_tests

from helpers.services import SPECS

# system: the whole engine on mongomock for every spec and every case, half the inner loop's time if it stayed there
TestBuiltinConnectors = pytest.mark.system(conformance_tests(SPECS))


def test_every_builtin_connector_has_a_conformance_spec():
    registry = Registry()
    assert {name for name in registry.names() if registry.is_builtin(name)} == {spec.service for spec in SPECS}
