"""`collector demo --serve`, as a newcomer runs it: a fleet of real processes with the monitor, live within
seconds, and one Ctrl-C stops every process of it cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from helpers import free_port
from helpers.proc import wait_until

pytestmark = pytest.mark.system


def snapshot(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=10) as reply:
        return json.loads(reply.read())


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def test_the_demo_fleet_goes_live_with_the_monitor_and_one_ctrl_c_stops_it_all(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLLECTOR_", "MONITOR_"))}
    demo = subprocess.Popen(
        [sys.executable, "-m", "collector", "demo", "--serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        live = wait_until(
            lambda: (
                (s := snapshot(port)).get("database", {}).get("ok")  # {} before the first refresh
                and sum(c["alive"] for c in s["fleet"]) == 2
                and s["work"]["items"]["total"] > 0
                and s
            ),
            timeout=90,
        )
        assert {c["id"] for c in live["fleet"]} == {"demo-initial", "demo-normal"}
        assert live["monitor"]["actions"] is False  # read-only without a MONITOR_TOKEN
        wait_until(lambda: snapshot(port)["work"]["modes"]["normal"]["networks"] == 6, timeout=90)
        children = children_of(demo.pid)
        assert len(children) == 3
    finally:
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=60)
    assert demo.returncode == 0, out
    assert f"monitor at http://127.0.0.1:{port}/" in out and "stopped (exit codes [0, 0, 0])" in out
    assert [pid for pid in children if os.path.exists(f"/proc/{pid}")] == []  # each one stopped and reaped
