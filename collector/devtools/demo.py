"""`collector demo`: the whole system on one machine with no MongoDB and no tokens.

A fake GitHub starred API on 127.0.0.1, an in-memory database (mongomock), demo users and networks; the real
initial passes walk every history (one user has a tiny quota, so the rateLimit mode shows), new stars arrive,
and a real normal pass collects them. Ends with one line of JSON.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

import mongomock

from ..daemon.process import Daemon
from ..engine import Collector
from ..settings import Settings, load_settings
from .fakeapi import FakeGitHub, FakeServer, make_star, make_stars

# (name, stars, own quota per 2-second window or None): dora runs out of quota mid-history
DEMO_USERS = (
    ("ada", 150, None),
    ("bob", 95, None),
    ("cy", 60, None),
    ("dora", 250, 3),
    ("eve", 30, None),
    ("fay", 0, None),
)
MAX_PASSES = 100


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed(db, fake: FakeGitHub, people=DEMO_USERS) -> None:
    """Each demo user: an account on the fake API, a `users` document and a GitHub network."""
    for i, (name, count, quota) in enumerate(people):
        email = f"{name}@demo.likeastore"
        fake.add_user(f"demo-token-{name}", make_stars(count, seed=i, id_pool=2_000), quota=quota)
        db.users.insert_one({"email": email, "name": name.title(), "username": name, "password": "not-copied"})
        db.networks.insert_one(
            {"user": email, "service": "github", "accessToken": f"demo-token-{name}", "username": name}
        )


def demo_settings(api_url: str) -> Settings:
    base = load_settings()
    return base.with_(
        github_api_url=api_url,
        initial_interval=0,
        initial_intervals={},
        normal_interval=0,
        rate_limit_interval=1,
        rate_limit_min_wait=0.2,
    )


def wait_for_next_due(db) -> float:
    """Sleep until the earliest scheduled network is due (rate-limited ones wait for their reset)."""
    upcoming = db.networks.find_one(
        {"scheduledTo": {"$type": "date"}, "mode": {"$ne": "normal"}}, sort=[("scheduledTo", 1)]
    )
    if upcoming is None:
        return 0.0
    delay = (upcoming["scheduledTo"] - datetime.now(UTC)).total_seconds()
    delay = min(max(delay, 0.0), 5.0)
    time.sleep(delay)
    return delay


def settle(collector: Collector, db, networks: int, out) -> int:
    """Initial passes (they serve rateLimit networks too) until every network is in normal mode.
    Returns how many runs hit a rate limit."""
    rate_limited = 0
    for number in range(1, MAX_PASSES + 1):
        in_normal = db.networks.count_documents({"mode": "normal"})
        if in_normal == networks:
            break
        report = collector.run_pass("initial")
        rate_limited += report.by_status.get("rateLimit", 0)
        in_normal = db.networks.count_documents({"mode": "normal"})
        print(
            f"initial pass {number}: {report.tasks} networks run, {report.new_items} new items, "
            f"{in_normal}/{networks} in normal mode {dict(report.by_status)}",
            file=out,
        )
        if report.tasks == 0:
            print(f"  waiting {wait_for_next_due(db):.1f}s for a rate limit to reset", file=out)
    return rate_limited


def keep_polling(daemon: Daemon, db, fake: FakeGitHub, out) -> None:
    """The normal-mode daemon, wired as the CLI's is (Daemon.run: heartbeat, jobs, metrics, signals), polling the
    demo users every 5 s (a new star now and then) until Ctrl-C or SIGTERM; then what `collector status` shows."""
    from ..ops.status import gather, render

    collector = daemon.collector
    collector.apply_settings(collector.settings.with_(normal_interval=5, heartbeat_seconds=5, loop_idle_pause=1))
    names = [name for name, _, _ in DEMO_USERS]
    starred = {"n": 0}

    def star() -> None:  # before each idle wait: a user stars something, then the loop looks again
        starred["n"] += 1
        name = names[starred["n"] % len(names)]
        fake.star(f"demo-token-{name}", make_star(9_000 + starred["n"], datetime.now(UTC)))

    daemon.on_idle = star
    daemon.before_exit = lambda: print(render(gather(db, datetime.now(UTC), 5)), file=out)
    daemon.install_signal_handlers()
    print("demo: polling the demo users every 5 s; Ctrl-C to stop", file=out, flush=True)
    daemon.run()


def run(out=sys.stdout, metrics_port: int | None = None, sinks: tuple[str, ...] = ("webhook",)) -> int:
    """The demo; then, unless `sinks` is empty, a sink service delivers the items to each kind of sink in `sinks`
    (sinkdemo.py). Exit code 0 only when every network reached normal mode, every star was stored and every sink
    delivered every item."""
    started = time.perf_counter()
    fake = FakeGitHub(window=2)
    db: Any = mongomock.MongoClient(tz_aware=True)["likeastore_demo"]
    seed(db, fake)
    networks = db.networks.count_documents({})
    with FakeServer(fake) as url:
        settings = demo_settings(url)
        if metrics_port is not None:  # the daemon serves them (port 0: a free one, picked here)
            settings = settings.with_(metrics_port=metrics_port or free_port(), metrics_addr="127.0.0.1")
            print(f"demo: metrics at http://127.0.0.1:{settings.metrics_port}/metrics, /healthz and /readyz", file=out)
        collector = Collector(db, settings, instance_id="demo-normal")
        daemon = Daemon(collector, "normal")
        if metrics_port is not None:
            from .. import __version__

            daemon.metrics_server = daemon.start_metrics(__version__)
        print(f"demo: fake GitHub API at {url}, {networks} networks, {fake.total_stars()} stars", file=out)
        rate_limited = settle(collector, db, networks, out)
        for name in ("ada", "eve"):  # users keep starring while the collector runs
            for k in range(3):
                fake.star(f"demo-token-{name}", make_star(5_000 + k + (10 if name == "eve" else 0), datetime.now(UTC)))
        report = collector.run_pass("normal")
        rate_limited += report.by_status.get("rateLimit", 0)
        print(
            f"normal pass: {report.tasks} networks run, {report.new_items} new items {dict(report.by_status)}", file=out
        )
        rate_limited += settle(collector, db, networks, out)
        delivered = deliver_to_sinks(db, sinks, out)
        summary = {
            "networks": networks,
            "networks_normal": db.networks.count_documents({"mode": "normal"}),
            "items": db.items.count_documents({}),
            "items_expected": fake.total_stars(),
            "requests": fake.requests,
            "rate_limited_runs": rate_limited,
            "elapsed_s": round(time.perf_counter() - started, 2),
            **({"sinks": delivered} if delivered else {}),
        }
        print(json.dumps(summary), file=out, flush=True)
        if metrics_port is not None:
            keep_polling(daemon, db, fake, out)
        collector.close()
    ok = summary["networks_normal"] == networks and summary["items"] == summary["items_expected"]
    return 0 if ok and (not delivered or delivered["ok"]) else 1


def deliver_to_sinks(db, sinks: tuple[str, ...], out) -> dict:
    """After the collection: the items delivered by a sink service to each kind in `sinks` (sinkdemo.py)."""
    if not sinks:
        return {}
    from . import sinkdemo

    return sinkdemo.deliver(db, sinks, out)
