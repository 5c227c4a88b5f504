"""The stats beat of a real collector process: its `collectors` document gets fresh `statsAt` and counters every
STATS_SECONDS (the heartbeat, far apart here, does not), the HTTP requests its runs make and the 304s among them
add up since start, a SIGHUP moves the interval, and a clean exit takes the document away."""

from __future__ import annotations

import signal

from pymongo import MongoClient

from collector.devtools.fakeapi import FakeGitHub, FakeServer, make_stars
from collector.devtools.mongowire import WireServer

from helpers.proc import start, stop, wait_until, write_env


def test_a_working_collector_writes_its_stats_every_second_and_its_counters_grow(tmp_path):
    fake = FakeGitHub()
    with WireServer() as wire, FakeServer(fake) as api:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        for k in range(3):
            fake.add_user(f"token-{k}", make_stars(5, seed=k))
            db.networks.insert_one(
                {"user": f"u{k}@x.test", "service": "github", "accessToken": f"token-{k}", "mode": "normal"}
            )
        settings = {
            "MONGODB_URI": wire.uri,
            "GITHUB_API_URL": api,
            "HEARTBEAT_SECONDS": 600,  # the full heartbeat once, at the start: what moves is the stats beat
            "LOOP_IDLE_PAUSE": 1,
            "NORMAL_INTERVAL": 1,
            "LOG_LEVEL": "INFO",
        }
        env_file = write_env(tmp_path / "c.env", **settings)  # STATS_SECONDS: its default, 1
        daemon = start(["--mode", "normal", "--instance-id", "box-s"], env_file, tmp_path / "c.log")
        try:
            first = wait_until(lambda: db.collectors.find_one({"_id": "box-s", "statsAt": {"$exists": True}}))
            assert first["statsSeconds"] == 1.0
            seen = [first["statsAt"]]

            def advanced() -> bool:
                doc = db.collectors.find_one({"_id": "box-s"})
                if doc["statsAt"] > seen[-1]:
                    seen.append(doc["statsAt"])
                return len(seen) >= 4

            wait_until(advanced, timeout=60, every=0.2)
            requests = first["sinceStart"]["requests"]

            def grown() -> dict | None:
                doc = db.collectors.find_one({"_id": "box-s"})
                counters = doc["sinceStart"]
                return doc if counters["requests"] > requests + 3 and counters["notModified"] > 0 else None

            doc = wait_until(grown, timeout=60)
            assert doc["heartbeatAt"] == first["heartbeatAt"]  # no full heartbeat since the first
            assert doc["statsAt"] > first["statsAt"] and doc["sinceStart"]["runs"]["ok"] >= 3
            assert doc["sinceStart"]["notModified"] <= doc["sinceStart"]["requests"]
            assert doc["sinceStart"]["requests"] <= fake.requests  # every request counted was made
            assert doc["process"]["rssBytes"] > 1_000_000 and doc["process"]["cpuSeconds"] > 0
            assert doc["process"]["cpuSeconds"] >= first["process"]["cpuSeconds"]
            assert isinstance(doc["inflight"], int) and isinstance(doc["running"], list)

            write_env(env_file, **settings, STATS_SECONDS=2)
            daemon.send_signal(signal.SIGHUP)
            wait_until(lambda: db.collectors.find_one({"_id": "box-s"})["statsSeconds"] == 2.0, timeout=60)
        finally:
            code = stop(daemon)
        assert code == 0
        assert db.collectors.count_documents({}) == 0  # a clean exit takes the document away
        assert "job stats failed" not in (tmp_path / "c.log").read_text()
