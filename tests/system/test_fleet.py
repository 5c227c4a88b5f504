"""Fleet control through the real CLI against several real collector processes sharing one database: a pause
stops their claims within HEARTBEAT_SECONDS and drains what runs, status says so, resume starts them again."""

from __future__ import annotations

import time

from pymongo import MongoClient

from collector.devtools.fakeapi import FakeGitHub, FakeServer, make_stars
from collector.devtools.mongowire import WireServer

from helpers import free_port
from helpers.proc import get, run, scrape, start, stop, wait_until, write_env


def test_pause_stops_every_collectors_claims_drains_and_resume_restarts_them(tmp_path):
    fake = FakeGitHub(latency=0.3)  # runs take a while: some are in flight when the pause comes
    with WireServer() as wire, FakeServer(fake) as api:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        for k in range(8):
            fake.add_user(f"token-{k}", make_stars(5, seed=k))
            db.networks.insert_one(
                {"user": f"u{k}@x.test", "service": "github", "accessToken": f"token-{k}", "mode": "normal"}
            )
        common = {
            "MONGODB_URI": wire.uri,
            "GITHUB_API_URL": api,
            "HEARTBEAT_SECONDS": 1,
            "LOOP_IDLE_PAUSE": 1,
            "NORMAL_INTERVAL": 1,
            "LOG_LEVEL": "INFO",
        }
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
            wait_until(lambda: db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0, timeout=60)
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
            wait_until(lambda: fake.requests > before + 8, timeout=60)  # every collector claims again
            assert run(["resume", "--mode", "normal"], ops).returncode == 1  # nothing left to resume
        finally:
            codes = [stop(d) for d in daemons]
        assert codes == [0, 0]
        logs = [(tmp_path / f"c{n}.log").read_text() for n in range(2)]
        for text in logs:
            assert "paused by" in text and "deploying" in text and "lifted" in text


def test_collectors_that_serve_chosen_services_split_the_work_and_status_names_an_unserved_service(tmp_path):
    fake = FakeGitHub()
    with WireServer() as wire, FakeServer(fake) as api:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        for k in range(6):
            fake.add_user(f"token-{k}", make_stars(30, seed=k))
            db.networks.insert_one({"user": f"u{k}@x.test", "service": "github", "accessToken": f"token-{k}"})
        common = {
            "MONGODB_URI": wire.uri,
            "GITHUB_API_URL": api,
            "HEARTBEAT_SECONDS": 1,
            "LOOP_IDLE_PAUSE": 1,
            "INITIAL_INTERVAL": 0,
            "LOG_LEVEL": "INFO",
        }
        ports = {"github": free_port(), "others": free_port()}
        mine = start(
            ["--mode", "initial", "--instance-id", "box-github", "--services", "github"],
            write_env(tmp_path / "a.env", **common, METRICS_PORT=ports["github"]),
            tmp_path / "a.log",
        )
        others = start(
            ["--mode", "initial", "--instance-id", "box-others"],
            write_env(tmp_path / "b.env", **common, SERVICES_EXCLUDE="github", METRICS_PORT=ports["others"]),
            tmp_path / "b.log",
        )
        ops = write_env(tmp_path / "ops.env", MONGODB_URI=wire.uri, HEARTBEAT_SECONDS=1)
        try:
            wait_until(lambda: db.networks.count_documents({"mode": "normal"}) == 6, timeout=60)
            assert db.items.count_documents({}) == 180  # every star, each once
            for port in ports.values():  # a collector slow to start may not serve /metrics yet (loaded machine)
                wait_until(lambda port=port: get(port, "/metrics")[0] == 200, timeout=60)
            runs = {
                name: sum(
                    v
                    for (n, labels), v in scrape(port).items()
                    if n == "collector_runs_total" and ("service", "github") in labels
                )
                for name, port in ports.items()
            }
            assert runs["github"] >= 6 and runs["others"] == 0, runs
            beats = {d["_id"]: d["services"] for d in db.collectors.find()}
            assert beats == {
                "box-github": {"only": ["github"], "exclude": []},
                "box-others": {"only": [], "exclude": ["github"]},
            }
            assert stop(mine) == 0
            db.networks.update_many({}, {"$set": {"mode": "initial", "scheduledTo": None}})  # due again
            check = run(["status", "--check"], ops)
            assert check.returncode == 2, check.stdout
            assert "6 github networks due and no live collector serves github" in check.stdout
        finally:
            for process in (mine, others):
                if process.poll() is None:
                    stop(process)


def test_status_instances_shows_what_each_collector_runs_now_and_watch_repeats_the_report(tmp_path):
    import signal
    import subprocess

    from helpers.proc import collector_cmd

    # a slow host: the runs stay in flight while we look, long enough for a few `status` processes on a loaded
    # machine (each one's start alone can take seconds there); released before the graceful stop, which waits for them
    fake = FakeGitHub(latency=120.0)
    with WireServer() as wire, FakeServer(fake) as api:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        for k in range(3):
            fake.add_user(f"token-{k}", make_stars(5, seed=k))
            db.networks.insert_one({"user": f"u{k}@x.test", "service": "github", "accessToken": f"token-{k}"})
        env_file = write_env(
            tmp_path / "c.env",
            MONGODB_URI=wire.uri,
            GITHUB_API_URL=api,
            HEARTBEAT_SECONDS=1,
            LOOP_IDLE_PAUSE=1,
            HTTP_TIMEOUT=180,
            LOG_LEVEL="INFO",
        )
        daemon = start(["--mode", "initial", "--instance-id", "box-slow"], env_file, tmp_path / "c.log")
        ops = write_env(tmp_path / "ops.env", MONGODB_URI=wire.uri, HEARTBEAT_SECONDS=1, HTTP_TIMEOUT=1)
        try:

            def three_running():
                out = run(["status", "--instances"], ops).stdout
                return out if "box-slow (initial, every service): 3 running" in out and "stuck host" in out else None

            shown = wait_until(three_running, timeout=60)
            assert shown.count("u") >= 3 and "github" in shown
            shown_path = tmp_path / "watch.out"
            with open(shown_path, "w") as shown_file:
                watch = subprocess.Popen(
                    collector_cmd("--env-file", str(ops), "status", "--watch", "--interval", "1"),
                    stdout=shown_file,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=tmp_path,
                    env={**__import__("os").environ, "COLLECTOR_ENV": "test"},
                )
                wait_until(lambda: shown_path.read_text().count("collector status at") >= 2, timeout=120)
                watch.send_signal(signal.SIGINT)
                _, err = watch.communicate(timeout=30)
            out = shown_path.read_text()
            assert watch.returncode == 0, err
            assert out.count("collector status at") >= 2 and "\x1b[" not in out  # not a terminal: report after report
        finally:
            fake.released.set()
            stop(daemon)


def test_jobs_are_listed_per_collector_and_the_sweep_runs_on_demand_under_the_daily_lease(tmp_path):
    from datetime import UTC, datetime, timedelta

    with WireServer() as wire:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        now = datetime.now(UTC)
        db.users.insert_many(
            [
                {"email": "gone@x.test", "loginLastDate": now - timedelta(days=400)},
                {"email": "here@x.test", "loginLastDate": now - timedelta(days=1)},
            ]
        )
        for who in ("gone", "here"):
            db.networks.insert_one({"user": f"{who}@x.test", "service": "github", "accessToken": "t", "mode": "normal"})
        env_file = write_env(
            tmp_path / "c.env", MONGODB_URI=wire.uri, HEARTBEAT_SECONDS=1, LOOP_IDLE_PAUSE=1, LOG_LEVEL="INFO"
        )
        daemon = start(["--mode", "initial", "--instance-id", "box-jobs"], env_file, tmp_path / "c.log")
        ops = write_env(tmp_path / "ops.env", MONGODB_URI=wire.uri, HEARTBEAT_SECONDS=1)
        try:
            listed = wait_until(
                lambda: (
                    lambda r: (
                        r.stdout
                        if "heartbeat" in r.stdout
                        and "every 1s" in r.stdout
                        and r.stdout.count("-") < 200
                        and "20" in r.stdout.split("heartbeat")[1][:80]
                        else None
                    )
                )(run(["jobs", "list"], ops))
            )
            assert "box-jobs (initial)" in listed and "inactive-sweep" in listed and "at '0 4 * * *' UTC" in listed
            dry = run(["jobs", "run", "inactive-sweep", "--dry-run"], ops)
            assert dry.returncode == 0 and "would skip: gone@x.test" in dry.stdout and "here@x.test" not in dry.stdout
            assert db.networks.count_documents({"skip": True}) == 0  # a dry run writes nothing
            done = run(["jobs", "run", "inactive-sweep"], ops)
            assert done.returncode == 0 and "1 networks skipped as inactive" in done.stdout
            again = run(["jobs", "run", "inactive-sweep"], ops)
            assert again.returncode == 1 and "already run today" in again.stdout
            assert run(["jobs", "run", "inactive-sweep", "--force"], ops).returncode == 0
        finally:
            stop(daemon)


def test_status_watch_redraws_in_place_on_a_terminal(tmp_path):
    """Under a real pseudo-terminal (util-linux `script`), each report is drawn from the top of the screen with
    every line cleared to its end — no full-screen clear, so no flicker."""
    import shlex
    import shutil
    import signal
    import subprocess

    from helpers.proc import collector_cmd

    assert shutil.which("script"), "util-linux's script is part of these machines"
    with WireServer() as wire:
        ops = write_env(tmp_path / "ops.env", MONGODB_URI=wire.uri, HEARTBEAT_SECONDS=1)
        command = " ".join(
            shlex.quote(a) for a in collector_cmd("--env-file", str(ops), "status", "--watch", "--interval", "1")
        )
        shown_path = tmp_path / "watch.out"
        with open(shown_path, "w") as shown_file:
            watch = subprocess.Popen(
                ["script", "-qfec", command, "/dev/null"],
                stdout=shown_file,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
                env={**__import__("os").environ, "COLLECTOR_ENV": "test"},
                start_new_session=True,
            )
            # two reports drawn (script -f flushes as it goes), then the Ctrl-C
            wait_until(lambda: shown_path.read_text(errors="replace").count("collector status at") >= 2, timeout=120)
            __import__("os").killpg(watch.pid, signal.SIGINT)
            watch.communicate(timeout=30)
        out = shown_path.read_text(errors="replace")
    assert out.count("\x1b[H") >= 2 and "\x1b[K" in out and "\x1b[2J" not in out
    assert out.count("collector status at") >= 2
