"""Fleet control through the real CLI against several real collector processes sharing one database: a pause
stops their claims within HEARTBEAT_SECONDS and drains what runs, status says so, resume starts them again."""

from __future__ import annotations

import time

from pymongo import MongoClient

from collector.devtools.fakeapi import FakeGitHub, FakeServer, make_stars
from collector.devtools.mongowire import WireServer

from proc import free_port, run, scrape, start, stop, wait_until, write_env


def test_pause_stops_every_collectors_claims_drains_and_resume_restarts_them(tmp_path):
    fake = FakeGitHub(latency=0.3)  # runs take a while: some are in flight when the pause comes
    with WireServer() as wire, FakeServer(fake) as api:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        for k in range(8):
            fake.add_user(f"token-{k}", make_stars(5, seed=k))
            db.networks.insert_one(
                {"user": f"u{k}@x.test", "service": "github", "accessToken": f"token-{k}", "mode": "normal"}
            )
        common = {"MONGODB_URI": wire.uri, "GITHUB_API_URL": api, "HEARTBEAT_SECONDS": 1, "LOOP_IDLE_PAUSE": 1,
                  "NORMAL_INTERVAL": 1, "LOG_LEVEL": "INFO"}
        ports = [free_port(), free_port()]
        daemons = []
        for n, port in enumerate(ports):
            env_file = write_env(tmp_path / f"c{n}.env", **common, METRICS_PORT=port)
            daemons.append(start(["--mode", "normal", "--instance-id", f"box-{n}"], env_file, tmp_path / f"c{n}.log"))
        ops = write_env(tmp_path / "ops.env", MONGODB_URI=wire.uri, HEARTBEAT_SECONDS=1)
        try:
            wait_until(lambda: fake.requests > 16)  # both collectors poll
            paused = run(["pause", "--mode", "normal", "--reason", "deploying"], ops)
            assert paused.returncode == 0 and paused.stdout.startswith("paused mode normal, service every service")
            # within a few heartbeats no collector claims, and what ran was saved (no lease left)
            wait_until(lambda: db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0, timeout=30)
            before = fake.requests
            time.sleep(3)
            assert fake.requests == before
            for port in ports:
                assert scrape(port)[("collector_paused", (("mode", "normal"), ("service", "*")))] == 1
            check = run(["status", "--check"], ops)
            assert check.returncode == 1 and check.stdout.startswith("WARNING: mode normal paused")
            assert "deploying" in check.stdout
            assert "paused: mode normal, service *" in run(["status"], ops).stdout
            resumed = run(["resume", "--mode", "normal"], ops)
            assert resumed.returncode == 0 and resumed.stdout.startswith("resumed mode normal")
            wait_until(lambda: fake.requests > before + 8, timeout=30)  # every collector claims again
            assert run(["resume", "--mode", "normal"], ops).returncode == 1  # nothing left to resume
        finally:
            codes = [stop(d) for d in daemons]
        assert codes == [0, 0]
        logs = [(tmp_path / f"c{n}.log").read_text() for n in range(2)]
        for text in logs:
            assert "paused by" in text and "deploying" in text and "lifted" in text
