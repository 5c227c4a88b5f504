"""`collector demo --serve`: the demo kept running as a small fleet with the monitor open.

In this process: the fake GitHub API and the MongoDB stand-in (mongowire: mongomock behind a loopback socket),
the demo users, and a user starring something new every second. Beside it, as deployed, real processes: an
`initial` and a `normal` collector (`collector --mode …`) and the monitor (`collector monitor`), all on the
stand-in. Ctrl-C (or SIGTERM) stops them all. Everything binds 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .demo import seed
from .fakeapi import FakeGitHub, FakeServer, make_star
from .mongowire import WireServer

STAR_EVERY = 1.0  # seconds between two new stars
EXTRA_STARS = 40  # stars of each user beyond the demo's six


def users(count: int) -> list[tuple[str, int, int | None]]:
    """The demo's six users, then generated ones up to `count` (a busier fleet)."""
    from .demo import DEMO_USERS

    extra = [(f"user{n}", EXTRA_STARS, None) for n in range(len(DEMO_USERS), count)]
    return list(DEMO_USERS)[:count] + extra


def environment(uri: str, api: str) -> dict[str, str]:
    """The settings of the demo's processes (the operator's own environment underneath: MONITOR_TOKEN, say)."""
    return {
        **os.environ,
        "MONGODB_URI": uri,
        "GITHUB_API_URL": api,
        "INITIAL_INTERVAL": "0",
        "NORMAL_INTERVAL": "5",
        "RATE_LIMIT_INTERVAL": "1",
        "RATE_LIMIT_MIN_WAIT": "0.2",
        "HEARTBEAT_SECONDS": "5",
        "LOOP_IDLE_PAUSE": "1",
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
    }


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        # a session of its own: a Ctrl-C reaches the demo alone, which then stops each process once, cleanly
        return subprocess.Popen(
            [sys.executable, "-m", "collector", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def keep_starring(fake: FakeGitHub, names: list[str], stop: threading.Event) -> None:
    n = 0
    while not stop.wait(STAR_EVERY):
        n += 1
        fake.star(f"demo-token-{names[n % len(names)]}", make_star(9_000 + n, datetime.now(UTC)))


def serve(port: int, count: int, out: Any = sys.stdout) -> int:
    """Run the fleet until Ctrl-C or SIGTERM; the monitor on 127.0.0.1:`port` (0: a free one)."""
    from .demo import free_port

    port = port or free_port()
    people = users(count)
    fake = FakeGitHub(window=2)
    logs = Path(tempfile.mkdtemp(prefix="collector-demo-"))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with WireServer(quick_inserts=True) as wire, FakeServer(fake) as api:
        from pymongo import MongoClient

        seed(MongoClient(wire.uri, tz_aware=True).get_default_database(), fake, tuple(people))
        env = environment(wire.uri, api)
        children = [
            start(["--mode", "initial", "--instance-id", "demo-initial"], env, logs / "initial.log"),
            start(["--mode", "normal", "--instance-id", "demo-normal"], env, logs / "normal.log"),
            start(["monitor", "--host", "127.0.0.1", "--port", str(port)], env, logs / "monitor.log"),
        ]
        threading.Thread(target=keep_starring, args=(fake, [p[0] for p in people], stop), daemon=True).start()
        token = "set: actions enabled" if env.get("MONITOR_TOKEN") else "not set: the page is read-only"
        print(
            f"demo: {len(people)} users on a fake GitHub API at {api}, MongoDB stand-in at {wire.uri}\n"
            f"demo: an initial and a normal collector are running; a user stars something every second\n"
            f"demo: monitor at http://127.0.0.1:{port}/ (MONITOR_TOKEN {token})\n"
            f"demo: logs in {logs} (removed when the fleet stops cleanly); Ctrl-C to stop",
            file=out,
            flush=True,
        )
        names = ("initial.log", "normal.log", "monitor.log")
        ended: list[str] = []
        while not stop.wait(0.5):
            ended = [name for child, name in zip(children, names, strict=True) if child.poll() is not None]
            if ended:
                said = last_line(logs / ended[0])
                print(f"demo: a process of the fleet ended ({ended[0]}: {said}); logs in {logs}", file=out, flush=True)
                break
        stop.set()
        codes = end(children)
    clean = not ended and all(code in (0, -signal.SIGTERM) for code in codes)  # -15: stopped while still starting
    if clean:
        shutil.rmtree(logs, ignore_errors=True)  # nothing left behind in the temporary folder
    kept = "" if clean else f"; logs kept in {logs}"
    print(f"demo: stopped (exit codes {codes}){kept}", file=out, flush=True)
    return 0 if clean else 1


def last_line(log: Path) -> str:
    """The last line a process wrote (the one that says why it ended), made printable."""
    from ..textout import printable

    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return printable(lines[-1][-300:]) if lines else "no output"


def end(children: list[subprocess.Popen]) -> list[int]:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    codes = []
    for child in children:
        try:
            codes.append(child.wait(timeout=30))
        except subprocess.TimeoutExpired:
            child.kill()
            codes.append(child.wait())
    return codes
