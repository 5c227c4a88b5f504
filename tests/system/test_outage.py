"""A database outage under a running collector, end to end: a real collector process, its settings in an
--env-file, a MongoDB stand-in on a loopback socket (mongomock behind the wire protocol) that goes away and comes
back, a fake GitHub on loopback, /metrics, /healthz and /readyz scraped over the socket, systemd's notify
datagrams caught on a real socket, and the log read as written."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

import pytest
from pymongo import MongoClient

from collector.devtools.fakeapi import FakeGitHub, FakeServer, make_star, make_stars
from collector.devtools.mongowire import WireServer

from helpers import free_port
from helpers.proc import NotifySocket, get, run, scrape, start, stop, wait_until, write_env

USERS = ("ann", "bob", "cy")


@pytest.fixture
def world(tmp_path):
    """The database stand-in, the fake GitHub, three users walking their stars, and the collector's settings."""
    fake = FakeGitHub()
    wire = WireServer().start()
    client = MongoClient(wire.uri, tz_aware=True, serverSelectionTimeoutMS=2000)
    db = client.get_default_database()
    for k, name in enumerate(USERS):
        fake.add_user(f"token-{name}", make_stars(50, seed=k, id_pool=5_000))
        db.users.insert_one({"email": f"{name}@x.test", "name": name})
        db.networks.insert_one(
            {"user": f"{name}@x.test", "service": "github", "accessToken": f"token-{name}", "mode": "normal"}
        )
    with FakeServer(fake) as api:
        metrics_port = free_port()
        env_file = write_env(
            tmp_path / "collector.env",
            MONGODB_URI=f"{wire.uri}?serverSelectionTimeoutMS=1000",
            GITHUB_API_URL=api,
            METRICS_PORT=metrics_port,
            HEARTBEAT_SECONDS=1,
            LOOP_IDLE_PAUSE=1,
            NORMAL_INTERVAL=1,
            HTTP_TIMEOUT=20,  # the liveness bound, 3 heartbeats + this: a loaded machine's pauses are no stall
            LOG_LEVEL="INFO",
        )
        yield {"fake": fake, "wire": wire, "db": db, "env": env_file, "port": metrics_port, "dir": tmp_path}
    client.close()
    wire.stop()


def value(port: int, name: str, labels: tuple = ()) -> float:
    return scrape(port).get((name, labels), math.nan)


def test_an_outage_is_visible_in_every_window_and_costs_no_item(world):
    port, wire, db, fake = world["port"], world["wire"], world["db"], world["fake"]
    notify = NotifySocket(world["dir"] / "notify.sock")
    log = world["dir"] / "collector.log"
    daemon = start(["--mode", "normal"], world["env"], log, NOTIFY_SOCKET=notify.path)
    try:
        wait_until(lambda: get(port, "/readyz")[0] == 200)
        wait_until(lambda: db.networks.count_documents({"lastSuccess": {"$exists": True}}) == 3)  # polled each second
        before = db.items.count_documents({})
        assert before >= 3
        assert value(port, "collector_database_up") == 1

        wire.stop()  # MongoDB goes away under the running collector
        outage_started = log.stat().st_size
        code, body = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(get(port, "/readyz")))
        assert body.startswith("database not answering for") and "unreachable since" in body
        assert value(port, "collector_database_up") == 0
        # liveness: the loop is alive and says so, naming the outage
        code, body = get(port, "/healthz")
        assert code == 200 and "database unreachable since" in body
        # progress means work: it stops moving while the database is away
        frozen = value(port, "collector_last_progress_timestamp_seconds")
        wait_until(lambda: value(port, "collector_jobs_total", (("name", "heartbeat"), ("outcome", "error"))) >= 3)
        assert value(port, "collector_last_progress_timestamp_seconds") == frozen
        errors = scrape(port)
        assert sum(v for (n, _), v in errors.items() if n == "collector_database_errors_total") >= 3
        assert math.isnan(errors[("collector_networks_due", (("mode", "normal"),))])  # unknown, not frozen
        # systemd: the watchdog is still fed (the loop lives) and STATUS= says what is wrong
        wait_until(lambda: any("database unreachable since" in s for s in notify.statuses()))
        # the operator's tools say so too, in one line each
        health = run(["healthcheck", "--ready"], world["env"])
        assert health.returncode == 1 and health.stdout.startswith("unhealthy: database not answering")
        assert run(["healthcheck"], world["env"]).returncode == 0
        check = run(["status", "--check"], world["env"])
        assert check.returncode == 3 and check.stdout.startswith(
            "UNKNOWN: cannot reach MongoDB at mongodb://127.0.0.1:"
        )
        for name in USERS:  # users keep starring while the database is away
            fake.star(f"token-{name}", make_star(90_000 + len(name), datetime.now(UTC)))
        outage_log = log.read_bytes()[outage_started:].decode()

        wire.start()  # it comes back on the same port, with the same data
        wait_until(lambda: get(port, "/readyz")[0] == 200)
        wait_until(lambda: value(port, "collector_last_progress_timestamp_seconds") > frozen)
        assert value(port, "collector_database_up") == 1
        wait_until(lambda: db.items.count_documents({}) == before + 3)  # the new stars, each stored once
        wait_until(lambda: any(s.startswith("STATUS=normal: ") and "database" not in s for s in notify.statuses()[-3:]))
    finally:
        assert stop(daemon) == 0
        notify.close()
    assert "WATCHDOG=1" in "".join(notify.messages) and any("STOPPING=1" in m for m in notify.messages)
    assert db.items.count_documents({}) == before + 3 == len({(d["user"], d["itemId"]) for d in db.items.find()})
    # the outage's log: one transition line, rate-limited failures, at most one traceback per distinct error
    lines = outage_log.splitlines()
    assert sum("database unreachable since" in line for line in lines) == 1
    assert sum(line.startswith("Traceback") for line in lines) <= 2
    failing = [line for line in lines if re.search(r" (ERROR|WARNING) ", line)]
    assert len(failing) <= 12, "\n".join(failing)
    assert "database reachable again after" in log.read_text()
