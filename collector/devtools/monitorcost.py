"""What the monitor costs, measured on a busy demo fleet (docs/monitor.md):

    python -m collector.devtools.monitorcost --minutes 60 --users 100

Starts `collector demo --serve --users N` (two collectors, the fake API, the MongoDB stand-in, the monitor as a
process of its own), then holds one page open for the first half of the time and ten for the second (each a real
event-stream client reading every event). Every 10 seconds it samples the monitor process's CPU time and resident
memory (/proc) and the monitor's own count of database commands (`monitor.commands` in /api/snapshot). Prints one
JSON document: per phase, database commands and refreshes per second, CPU %, bytes sent to the pages; memory at the
start, its lowest and highest, and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from .demo import free_port

SAMPLE_EVERY = 10.0
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def monitor_pid(port: int) -> int | None:
    """The process serving `collector monitor … --port PORT`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"monitor" in command and str(port).encode() in command:
            return int(entry.name)
    return None


def usage(pid: int) -> tuple[float, int]:
    """CPU seconds and resident bytes of `pid`."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    return cpu, rss


def snapshot(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=10) as reply:
        return json.loads(reply.read())


class Page:
    """One open page: an event stream read to the end, its bytes counted."""

    def __init__(self, port: int):
        self.bytes = 0
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            self.bytes += len(chunk)

    def close(self) -> None:
        self.sock.close()


def phase(port: int, pid: int, viewers: int, seconds: float, memory: list[int]) -> dict[str, Any]:
    pages = [Page(port) for _ in range(viewers)]
    time.sleep(5)  # the pages are open and fed
    cpu0, _ = usage(pid)
    snap0, t0 = snapshot(port), time.monotonic()
    sent0 = sum(p.bytes for p in pages)
    end = t0 + seconds
    while time.monotonic() < end:
        time.sleep(min(SAMPLE_EVERY, max(end - time.monotonic(), 0)))
        memory.append(usage(pid)[1])
    cpu1, _ = usage(pid)
    snap1, t1 = snapshot(port), time.monotonic()
    elapsed = t1 - t0
    result = {
        "viewers": viewers,
        "seconds": round(elapsed),
        "viewers_seen": snap1["monitor"]["viewers"],
        "db_commands_per_s": round((snap1["monitor"]["commands"] - snap0["monitor"]["commands"]) / elapsed, 2),
        "refreshes_per_s": round((snap1["monitor"]["refreshes"] - snap0["monitor"]["refreshes"]) / elapsed, 2),
        "cpu_percent": round(100 * (cpu1 - cpu0) / elapsed, 2),
        "sent_kib_per_s_per_page": round((sum(p.bytes for p in pages) - sent0) / elapsed / viewers / 1024, 1),
        "fleet_runs_per_s": snap1["rates"].get("runs"),
        "collectors_alive": sum(1 for c in snap1["fleet"] if c["alive"]),
    }
    for page in pages:
        page.close()
    return result


def measure(minutes: float, users: int) -> dict[str, Any]:
    port = free_port()
    demo = subprocess.Popen(
        [sys.executable, "-m", "collector", "demo", "--serve", "--users", str(users), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        pid = None
        while pid is None or not snapshot_ready(port):
            if time.monotonic() > deadline or demo.poll() is not None:
                raise SystemExit("the demo fleet did not start")
            time.sleep(0.5)
            pid = pid or monitor_pid(port)
        time.sleep(30)  # the initial walks under way
        memory = [usage(pid)[1]]
        half = minutes * 60 / 2
        phases = [phase(port, pid, 1, half, memory), phase(port, pid, 10, half, memory)]
        every = int(300 / SAMPLE_EVERY)  # one figure per five minutes of samples
        return {
            "minutes": minutes,
            "users": users,
            "phases": phases,
            "rss_mib": {
                "start": mib(memory[0]),
                "min": mib(min(memory)),
                "max": mib(max(memory)),
                "end": mib(memory[-1]),
                "samples": len(memory),
                "every_5_min": [mib(m) for m in memory[::every]],
            },
        }
    finally:
        demo.send_signal(signal.SIGTERM)
        demo.wait(60)


def snapshot_ready(port: int) -> bool:
    try:
        return bool(snapshot(port).get("fleet"))
    except OSError:
        return False


def mib(value: int) -> float:
    return round(value / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="the whole measurement (two halves), 60")
    parser.add_argument("--users", type=int, default=100, help="demo users: the fleet's work (100)")
    args = parser.parse_args()
    print(json.dumps(measure(args.minutes, args.users), indent=2))


if __name__ == "__main__":
    main()
