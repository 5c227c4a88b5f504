"""A sink service in a process of its own, for `collector bench`: `collector sink` (the service as deployed) when
this collector has the command, else SinkService stepping in a spawned interpreter; and the CPU a process spent
(/proc), so that the bench can tell the collector's, the sink's, the stand-in's and the destination's apart."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .spawned import NoAnswer, answer, spawn

READY_LIMIT_S = 60.0
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User and system CPU seconds process `pid` spent so far (its threads included, its children not)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of proc(5))


def with_database(uri: str, name: str) -> str:
    """`uri` naming database `name` (its options kept)."""
    parts = urlsplit(uri)
    return urlunsplit(parts._replace(path=f"/{name}"))


def sink_env(uri: str, name: str, place: dict[str, str]) -> dict[str, str]:
    """The settings of a sink service with one sink `name` delivering to `place` (SINK_<NAME>_* settings): the
    environment without any sink of the operator's, no metrics port, backfill off (the collector marks the items
    it stores: the mover hands them over, the path measured)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SINK")}
    return {
        **base,
        "MONGODB_URI": uri,
        "SINKS": name,
        f"SINK_{name.upper()}_BACKFILL": "false",
        "ALLOW_PRIVATE_HOSTS": "true",  # the destinations are on 127.0.0.1, plain http
        "METRICS_PORT": "",
        "LOG_LEVEL": "WARNING",
        **place,
    }


def ended_with_us() -> None:
    """In the child, before it runs: a SIGTERM when its parent (the bench) ends, however it ends (Linux)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def real_command() -> bool:
    return importlib.util.find_spec("collector.cli.sink") is not None


def service_how() -> str:
    """How the bench runs a sink service: `collector sink` when this collector has the command."""
    return "collector sink" if real_command() else "SinkService (spawned)"


def _service_in_child(conn: Any, env: dict[str, str]) -> None:
    """SinkService stepping on this thread until the parent says stop (or its end closes)."""
    from pymongo import MongoClient

    from ..settings import load_settings
    from ..sinks.service import SinkService

    settings = load_settings(env, read_dotenv=False)
    client: Any = MongoClient(settings.mongodb_uri, tz_aware=True)
    service = SinkService(client.get_default_database(), settings, owner=f"bench-{os.getpid()}")
    conn.send("started")
    while not conn.poll(min(max(service.step(), 0.0), 0.05)):
        pass
    service.stop(10)
    client.close()


class ServiceProcess:
    """`with ServiceProcess(env) as sink:` — `sink.pid`, `sink.how` ("collector sink" or "SinkService (spawned)");
    stopped at the end (SIGTERM, or the pipe's word), killed after 30 s."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.how = service_how()
        self.popen: subprocess.Popen | None = None
        self.process: Any = None
        self.pipe: Any = None
        self.log = tempfile.TemporaryFile()

    @property
    def pid(self) -> int:
        return int(self.popen.pid if self.popen is not None else self.process.pid)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return bool(self.process.is_alive())

    def last_words(self) -> str:
        from ..textout import printable

        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").strip().splitlines()
        return printable(lines[-1][-300:]) if lines else "no output"

    def __enter__(self) -> ServiceProcess:
        if self.how == "collector sink":
            command = [sys.executable, "-m", "collector", "sink"]
            self.popen = subprocess.Popen(
                command, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=ended_with_us
            )
            return self
        self.process, self.pipe = spawn(_service_in_child, self.env, daemon=True)
        try:
            answer(self.pipe, timeout=READY_LIMIT_S)
        except NoAnswer as exc:
            self.__exit__()
            raise RuntimeError(f"the sink service did not start: {exc}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.popen is not None:
            if self.popen.poll() is None:
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        elif self.process is not None:
            try:
                self.pipe.send("stop")
            except OSError:
                pass
            self.process.join(timeout=30)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.log.close()

    def wait_ready(self, db: Any, name: str, limit_s: float = READY_LIMIT_S) -> None:
        """Until the service holds its lease and knows sink `name` (it made its document)."""
        deadline = time.monotonic() + limit_s
        while db.sinks.count_documents({"_id": {"$in": ["~service", name]}}) < 2:
            if not self.alive():
                raise RuntimeError(f"the sink service ({self.how}) ended: {self.last_words()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sink service ({self.how}) was not ready within {limit_s:g} s")
            time.sleep(0.05)


def delivered(db: Any, name: str) -> int:
    """What the service counted delivered for sink `name` (its document's `counts.delivered`, across restarts)."""
    doc = db.sinks.find_one({"_id": name}, {"counts": 1}) or {}
    return int((doc.get("counts") or {}).get("delivered", 0))
