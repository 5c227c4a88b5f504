""".ci/newcomer.py's judgement of the demo's output against the README's transcript (`.ci/run` runs the whole
newcomer check in a fresh venv; here its comparison runs on a real `collector demo`): a real run matches, and each
kind of drift is caught — a fixed figure changed, a line missing or added, a status the README never shows, passes
out of order."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def newcomer():
    spec = importlib.util.spec_from_file_location("newcomer", ROOT / ".ci" / "newcomer.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shown(newcomer) -> list[str]:
    return next(code for info, code in newcomer.blocks() if code.startswith("demo: ")).splitlines()


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> list[str]:
    work = tmp_path_factory.mktemp("demo")
    done = subprocess.run(
        [sys.executable, "-m", "collector", "demo"], cwd=work, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return ["some pip line before it", *done.stdout.splitlines()]


def test_a_real_demo_matches_the_readmes_transcript(newcomer, shown, printed):
    assert newcomer.compare(shown, printed) == []
    readme, _ = newcomer.shape(shown)
    assert ["initial passes", 585, "6/6 in normal mode at their end"] in readme  # the invariants it holds
    assert ["normal pass", "6", "6"] in readme


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("6 networks, 585 stars", "6 networks, 584 stars"),
        ("6/6 in normal mode", "5/6 in normal mode"),
        ('"items": 591', '"items": 590'),
        ("591 of 591 items", "590 of 591 items"),
        ("'ok': ", "'transient': "),
        ("initial pass 1:", "initial pass 2:"),
        ("normal pass: 6 networks run", "normal pass: 5 networks run"),
    ],
)
def test_a_changed_figure_or_status_is_caught(newcomer, shown, printed, old, new):
    changed = [line.replace(old, new) for line in printed]
    assert changed != printed
    assert newcomer.compare(shown, changed) != []


@pytest.mark.parametrize("kind", ["normal pass", "sink:", "{", "demo: "])
def test_a_missing_line_is_caught(newcomer, shown, printed, kind):
    assert newcomer.compare(shown, [line for line in printed if not line.startswith(kind)]) != []


def test_an_added_line_is_caught(newcomer, shown, printed):
    assert newcomer.compare(shown, [*printed[:-1], "warning: something new", printed[-1]]) != []


def test_the_readmes_tour_names_each_command_once_and_the_two_commands_first(newcomer):
    commands = newcomer.tour_commands()
    assert len(commands) == len(set(commands)) and all(c.startswith("collector ") for c in commands)
    assert commands[0] == "collector demo"  # the first command's second half
    assert {"collector --check-config", "collector monitor", "collector connectors"} <= set(commands)
    assert set(newcomer.NOT_RUN) <= set(commands)  # nothing is left out that the README does not name


def without_second_round(lines: list[str]) -> list[str]:
    """The transcript of a run whose normal pass did not meet the rate limit: no initial passes after it."""
    at = next(k for k, line in enumerate(lines) if line.startswith("normal pass:"))
    after = [line for line in lines[at + 1 :] if not line.startswith(("initial pass", "  waiting"))]
    normal = lines[at].split(" {")[0] + " {'ok': 6}"
    return [*lines[:at], normal, *after]


def test_whether_the_normal_pass_meets_the_rate_limit_is_the_machines_speed_not_a_drift(newcomer, shown, printed):
    """The fake API's window is two seconds of real time: a normal pass may or may not meet its limit, and then a
    second run of initial passes follows, storing nothing. Both shapes match; a second run that stores items or
    leaves a network behind does not."""
    assert newcomer.compare(shown, without_second_round(printed)) == []
    assert newcomer.compare(without_second_round(shown), printed) == []
    second = [k for k, line in enumerate(shown) if line.startswith("initial pass") and k > 6]
    assert second, "the README shows the second run (it is the longer transcript)"
    stored = [line.replace("1 networks run, 0 new items", "1 networks run, 5 new items") for line in shown]
    assert stored != shown and newcomer.compare(shown, stored) != []
    behind = [*shown[: second[-1]], shown[second[-1]].replace("6/6 in normal mode", "5/6 in normal mode")]
    assert newcomer.compare(shown, [*behind, *shown[second[-1] + 1 :]]) != []
