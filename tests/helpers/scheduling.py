"""How `-n auto` hands the tests to its workers (tests/conftest.py): `--dist loadgroup`, kept working and ordered.

xdist's own loadgroup sends a marked test's group by a suffix it writes into the test's node id on the worker, and
pytest 9.2 no longer lets a plugin rewrite a node id: every marked module was spread over all the workers again,
its module-scoped server, browser or fleet set up on each (the browser module three times over). Here the
controller reads the group from where the suite declares it, the module's `pytest.mark.xdist_group("name")`, so a
module so marked runs whole on one worker whatever pytest version is installed.

Order: the work units go out in collection order, which the workers' conftest sorts costliest first (the grouped
modules, then the scenario tests of tests/system/, then every other system test, then the rest, each stable):
long units started last were what the run waited for at its end."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

from xdist.scheduler import LoadGroupScheduling

DECLARED = re.compile(r"""pytest\.mark\.xdist_group\(\s*(?:name\s*=\s*)?["']([^"']+)["']""")


@cache
def declared_group(module: Path) -> str | None:
    """The group a test module declares with `pytest.mark.xdist_group("name")`, or None."""
    try:
        found = DECLARED.search(module.read_text(encoding="utf-8"))
    except OSError:
        return None
    return found.group(1) if found else None


def group_of(nodeid: str, root: Path) -> str | None:
    """The group of a test: xdist's own node id suffix where the installed pytest kept it, else its module's."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    return declared_group(root / nodeid.split("::", 1)[0])


def rank(item) -> int:
    """Where a test is sent in the run: 0 a grouped module, 1 a scenario of tests/system/, 2 another system test,
    3 the rest (the quick ones, which fill the workers' last seconds)."""
    if item.get_closest_marker("xdist_group"):
        return 0
    if "/tests/system/" in item.path.as_posix():
        return 1
    return 2 if item.get_closest_marker("system") else 3


def sort_costliest_first(items: list) -> None:
    """On xdist's workers (PYTEST_XDIST_WORKER set), the costliest tests first (rank), stable; the same order on
    every worker, as xdist requires. A run without -n keeps pytest's order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=rank)


def make_scheduler(config, log):
    """`--dist loadgroup` kept as above (DeclaredGroups); any other --dist is xdist's own (None)."""
    return DeclaredGroups(config, log) if config.getvalue("dist") == "loadgroup" else None


class DeclaredGroups(LoadGroupScheduling):
    """loadgroup, with each test's group read by the controller from its module (group_of), and the work sent in
    collection order (the workers sorted it: rank)."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.root = Path(config.rootpath)
        config.option.loadscopereorder = False  # xdist's reordering (by number of tests) would undo the ranking

    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid, self.root)
        return f"group:{group}" if group else nodeid
