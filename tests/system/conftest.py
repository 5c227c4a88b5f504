"""System tests: real processes, real sockets, the unit's sandbox — slower, so behind the `system` marker that
the inner loop deselects (`python3 -m pytest -m "not system"`); `.ci/run` and the README's test command run them."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.system)
