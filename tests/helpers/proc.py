"""Running the collector the way it is deployed: a real process (`python -m collector`-equivalent console entry),
its settings in an --env-file, its /metrics, /healthz and /readyz over a real socket, and systemd's notify
datagrams caught on a real AF_UNIX socket."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]


def get(port: int, path: str, timeout: float = 10) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(get(port, "/metrics")[1])
        for s in family.samples
    }


def wait_until(condition: Callable[[], Any], timeout: float = 60, every: float = 0.1) -> Any:
    """Poll `condition` until it returns something true (returned) or `timeout` seconds pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (OSError, urllib.error.URLError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {getattr(condition, '__name__', condition)}")
        time.sleep(every)


def write_env(path: Path, **settings: Any) -> Path:
    path.write_text("".join(f"{name}={value}\n" for name, value in settings.items()))
    return path


class NotifySocket:
    """A systemd NOTIFY_SOCKET stand-in: every datagram the collector sends, in order. A thread keeps the socket's
    queue short (a full queue would block the sender); `messages` also takes in, at once, what is queued when it is
    read, so that what a process sent before it exited is there when the test looks (no race with the thread)."""

    def __init__(self, path: Path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        self._messages: list[str] = []
        self._lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _drain(self) -> None:
        with self._lock:
            while not self.closed:
                try:
                    self._messages.append(self.sock.recv(65536).decode())
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    return

    def _read(self) -> None:
        while not self.closed:
            try:
                select.select([self.sock], [], [], 0.2)
            except (OSError, ValueError):
                return
            self._drain()

    @property
    def messages(self) -> list[str]:
        self._drain()
        with self._lock:
            return list(self._messages)

    def statuses(self) -> list[str]:
        return [line for m in self.messages for line in m.splitlines() if line.startswith("STATUS=")]

    def close(self) -> None:
        self._drain()
        self.closed = True
        with self._lock:
            self.sock.close()


def collector_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from collector.cli import main; sys.exit(main())", *args]


def start(args: list[str], env_file: Path, log: Path, **env: str) -> subprocess.Popen:
    """`collector --env-file ENV_FILE ARGS...` as its own process, standard error to `log`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("COLLECTOR_", "NOTIFY_SOCKET"))}
    environ.update({"COLLECTOR_ENV": "test", **env})
    with open(log, "wb") as err:
        return subprocess.Popen(
            collector_cmd("--env-file", str(env_file), *args),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=environ,
            cwd=log.parent,
        )


def run(args: list[str], env_file: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COLLECTOR_")}
    environ["COLLECTOR_ENV"] = "test"
    return subprocess.run(
        collector_cmd("--env-file", str(env_file), *args),
        capture_output=True,
        text=True,
        env=environ,
        cwd=env_file.parent,
        timeout=timeout,
    )


def stop(process: subprocess.Popen, timeout: float = 60) -> int:
    if process.poll() is None:
        process.terminate()
    return process.wait(timeout)


def fresh_tmpdir(base: Path) -> tuple[Path, Path, dict[str, str]]:
    """A fresh empty TMPDIR under `base`, a working folder apart from it, and the environment naming that TMPDIR
    (no COLLECTOR_ or MONITOR_ setting of the test run's own): for a command that must leave TMPDIR empty."""
    temp, work = base / "tmp", base / "work"
    temp.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLLECTOR_", "MONITOR_"))}
    return temp, work, {**env, "TMPDIR": str(temp)}


def left_in(temp: Path) -> list[str]:
    """Whatever is in `temp`, each path relative to it."""
    return sorted(str(path.relative_to(temp)) for path in temp.rglob("*"))
