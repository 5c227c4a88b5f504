"""Nothing is left behind in the temporary folder: `collector demo` and `collector demo --serve` stopped by Ctrl-C
or SIGTERM once it is up, each a real process with TMPDIR a fresh empty folder that is empty again when it ends (a
small `collector bench` likewise: test_bench.py, whose one run serves its figures too). A fleet that failed keeps
its logs there, and says where."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import free_port
from helpers.proc import fresh_tmpdir, get, left_in, wait_until


@pytest.mark.parametrize(
    "args",
    [["demo"], ["demo", "--sink", "all"]],
    ids=["demo", "demo-every-sink"],
)
def test_a_command_that_ends_leaves_the_temporary_folder_empty(tmp_path, args):
    temp, work, env = fresh_tmpdir(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "collector", *args], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert left_in(temp) == []


def serve(port: int, work: Path, env: dict[str, str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "collector", "demo", "--serve", "--port", str(port)]
    return subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def fleet_up(port: int) -> bool:
    """The monitor serves and both collectors of the fleet beat."""
    status, body = get(port, "/api/snapshot")
    return status == 200 and sum(c["alive"] for c in json.loads(body).get("fleet", [])) == 2


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_demo_fleet_stopped_once_it_is_up_leaves_the_temporary_folder_empty(tmp_path, signum):
    temp, work, env = fresh_tmpdir(tmp_path)
    port = free_port()
    demo = serve(port, work, env)
    during: list[str] = []
    try:
        wait_until(lambda: fleet_up(port), timeout=90)
        during = left_in(temp)
    except AssertionError:
        during = [f"not up: {left_in(temp)}"]  # what the demo said, below
    finally:
        demo.send_signal(signum)
        out, _ = demo.communicate(timeout=90)
    assert not during[0].startswith("not up"), f"{during[0]}; the demo said: {out[-3000:]}"
    assert {name.split("/")[0] for name in during} == {during[0].split("/")[0]}  # one folder of logs, meanwhile
    assert {"initial.log", "normal.log", "monitor.log"} <= {Path(name).name for name in during}
    assert demo.returncode == 0, out
    assert "stopped (exit codes [0, 0, 0])" in out and "logs kept" not in out
    assert left_in(temp) == []


def test_the_demo_fleet_stopped_while_it_starts_leaves_the_temporary_folder_empty(tmp_path):
    """Ctrl-C as soon as the demo says where things are: its processes may still be starting (a SIGTERM then ends
    one before its handler is in place), and that is a clean stop too."""
    temp, work, env = fresh_tmpdir(tmp_path)
    demo = serve(free_port(), work, env)
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            if "Ctrl-C to stop" in line:
                break
    finally:
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=90)
    assert demo.returncode == 0, out
    assert "demo: stopped (exit codes [" in out and "logs kept" not in out
    assert left_in(temp) == []


def test_a_fleet_that_failed_keeps_its_logs_and_says_where(tmp_path):
    temp, work, env = fresh_tmpdir(tmp_path)
    with socket.socket() as taken:  # the monitor's port held by someone else: the monitor cannot start
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        demo = serve(taken.getsockname()[1], work, env)
        out, _ = demo.communicate(timeout=120)
    assert demo.returncode == 1, out
    kept = [line for line in out.splitlines() if "logs kept in " in line]
    assert len(kept) == 1, out
    folder = Path(kept[0].rsplit("logs kept in ", 1)[1])
    assert folder.parent == temp and (folder / "monitor.log").stat().st_size > 0
