"""The shipped unit's sandbox: `ProcSubset=pid` hides /proc/stat (and every other non-process file of /proc).
Reproduced as systemd does it, with a new mount and PID namespace and a `subset=pid,hidepid=invisible` proc mount,
the real collector process must still serve the standard process metrics the memory alert and panels read."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from collector.devtools.mongowire import WireServer

from helpers import free_port
from helpers.proc import collector_cmd, scrape, wait_until, write_env

PROCESS_SERIES = (
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
)
MOUNT = "mount -t proc -o subset=pid,hidepid=invisible proc /proc"


def stop_inside(unshare: subprocess.Popen) -> None:
    """SIGTERM to the collector itself (PID 1 of the new namespace); unshare then exits with its status."""
    children = open(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read().split()
    for pid in children:
        os.kill(int(pid), signal.SIGTERM)
    if not children:
        unshare.terminate()


def sandbox(command: list[str]) -> list[str]:
    return ["unshare", "--mount", "--pid", "--fork", "sh", "-c", f'{MOUNT} && exec "$@"', "sandbox", *command]


@pytest.fixture
def can_sandbox():
    probe = None
    if shutil.which("unshare"):
        probe = subprocess.run(sandbox(["test", "!", "-e", "/proc/stat"]), capture_output=True, text=True)
    if probe is None or probe.returncode != 0:
        reason = "unshare with a subset=pid proc mount is not permitted here (needs root or user namespaces)"
        if os.environ.get("REQUIRE_UNSHARE"):
            pytest.fail(f"{reason}: {probe.stderr if probe else 'no unshare'}")
        pytest.skip(reason)


def test_the_library_collector_alone_would_export_nothing_there(can_sandbox):
    """Why the collector carries its own: prometheus_client's ProcessCollector needs /proc/stat."""
    script = (
        "from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest\n"
        "r = CollectorRegistry(); ProcessCollector(registry=r); print(generate_latest(r).decode())"
    )
    out = subprocess.run(sandbox(["python3", "-c", script]), capture_output=True, text=True, check=True).stdout
    assert "process_resident_memory_bytes" not in out
    registry = CollectorRegistry()  # outside the sandbox it works: the difference is the mount
    ProcessCollector(registry=registry)
    assert "process_resident_memory_bytes" in generate_latest(registry).decode()


def test_the_collector_serves_process_metrics_under_proc_subset_pid(can_sandbox, tmp_path):
    port = free_port()
    with WireServer() as wire:
        env_file = write_env(
            tmp_path / "collector.env",
            MONGODB_URI=wire.uri,
            METRICS_PORT=port,
            HEARTBEAT_SECONDS=1,
            LOOP_IDLE_PAUSE=1,
        )
        environ = {k: v for k, v in os.environ.items() if not k.startswith("COLLECTOR_")} | {"COLLECTOR_ENV": "test"}
        daemon = subprocess.Popen(
            sandbox(collector_cmd("--env-file", str(env_file), "--mode", "normal")),
            env=environ,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            got = wait_until(lambda: (lambda s: s if ("process_open_fds", ()) in s else None)(scrape(port)))
        finally:
            stop_inside(daemon)
            _, err = daemon.communicate(timeout=60)
    for name in PROCESS_SERIES:
        assert (name, ()) in got, (name, err)
    assert got[("process_resident_memory_bytes", ())] > 10e6
    assert got[("process_open_fds", ())] >= 3 and got[("process_max_fds", ())] >= got[("process_open_fds", ())]
    assert got[("process_start_time_seconds", ())] > 1.7e9
    assert daemon.returncode == 0, err
