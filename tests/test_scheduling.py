"""How `-n auto` hands out the tests (helpers/scheduling.py), checked with the pytest and xdist installed: a module
marked `xdist_group` runs whole on one worker, the others' tests spread, and the costliest are sent first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.scheduling import declared_group, group_of

CONFTEST = """
import sys
sys.path.insert(0, {helpers!r})
from helpers import scheduling

def pytest_xdist_make_scheduler(config, log):
    return scheduling.make_scheduler(config, log)

def pytest_collection_modifyitems(config, items):
    scheduling.sort_costliest_first(items)
"""
GROUPED = """
import os, pytest
pytestmark = [pytest.mark.system, pytest.mark.xdist_group("shared")]

@pytest.mark.parametrize("k", range(8))
def test_grouped(k, record):
    record("grouped", k)
"""
SPREAD = """
import os, time, pytest

@pytest.mark.parametrize("k", range(8))
def test_spread(k, record):
    record("spread", k)
    time.sleep(0.2)  # long enough for every worker to ask for work
"""
RECORD = """
import os, pytest

@pytest.fixture
def record():
    def write(kind, k):
        with open(os.environ["RAN_TO"], "a") as f:
            f.write(f"{kind} {k} {os.environ['PYTEST_XDIST_WORKER']}\\n")
    return write
"""


def test_a_declared_group_is_read_from_its_module_and_a_suffix_wins(tmp_path):
    marked, plain = tmp_path / "test_a.py", tmp_path / "test_b.py"
    marked.write_text('pytestmark = [pytest.mark.xdist_group( "browser" )]\n')
    plain.write_text("def test_x():\n    pass\n")
    assert declared_group(marked) == "browser" and declared_group(plain) is None
    assert declared_group(tmp_path / "gone.py") is None
    assert group_of("test_a.py::test_x[1]", tmp_path) == "browser"
    assert group_of("test_b.py::test_x[a@b]", tmp_path) is None  # an @ inside the parameters is no group
    assert group_of("test_b.py::test_x[1]@other", tmp_path) == "other"


def test_a_grouped_module_runs_on_one_worker_and_is_sent_first(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    helpers = str(Path(__file__).resolve().parent)
    (suite / "conftest.py").write_text(CONFTEST.format(helpers=helpers) + RECORD)
    (suite / "test_a_spread.py").write_text(SPREAD)  # collected first, sent after the grouped module
    (suite / "test_b_grouped.py").write_text(GROUPED)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    system: real processes\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q"],
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "RAN_TO": str(tmp_path / "ran.txt")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [line.split() for line in (tmp_path / "ran.txt").read_text().splitlines()]
    assert len(ran) == 16
    grouped = {worker for kind, _, worker in ran if kind == "grouped"}
    assert len(grouped) == 1, ran  # one worker set the module up, once
    assert {worker for kind, _, worker in ran if kind == "spread"} - grouped  # the rest went to the others
    (worker,) = grouped
    assert [kind for kind, _, by in ran if by == worker][0] == "grouped", ran  # sent first, though collected last
