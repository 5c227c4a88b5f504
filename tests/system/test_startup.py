"""Signals at any moment of the start, and library callers with pymongo's defaults (a client that is not
tz_aware), against a database on a real loopback socket."""

from __future__ import annotations

import signal
import socket
import threading
from datetime import timedelta

from pymongo import MongoClient

from collector import run_once
from collector.devtools.fakeapi import make_stars
from collector.devtools.mongowire import WireServer
from collector.engine.quota import QuotaMemory
from collector.sdk.timeutil import utcnow

from helpers import TOKEN, GitHubStub
from helpers.proc import start, wait_until, write_env


def black_hole() -> tuple[socket.socket, int]:
    """A port that accepts TCP connections and never answers: MongoDB slow to answer at start-up."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return listener, listener.getsockname()[1]


def signalled_during_start_up(tmp_path, signum: int, selection_ms: int) -> tuple[int, str]:
    """A collector started against a MongoDB that accepts and never answers, sent `signum` once it says it waits for
    MongoDB: in its first blocking call (server selection); its exit code and log."""
    listener, port = black_hole()
    try:
        env_file = write_env(
            tmp_path / "collector.env",
            MONGODB_URI=f"mongodb://127.0.0.1:{port}/x?serverSelectionTimeoutMS={selection_ms}&connectTimeoutMS=1000",
            LOG_LEVEL="INFO",
        )
        log = tmp_path / "collector.log"
        daemon = start(["--mode", "normal"], env_file, log)
        # into its first blocking call: its signal handlers are installed before it says it waits (process.py)
        wait_until(lambda: "waiting for MongoDB at" in log.read_text(), timeout=120)
        daemon.send_signal(signum)
        code = daemon.wait(60)
    finally:
        listener.close()
    return code, log.read_text()


def test_a_sighup_while_mongodb_is_slow_to_answer_does_not_kill_the_collector(tmp_path):
    code, text = signalled_during_start_up(tmp_path, signal.SIGHUP, 4000)
    # not killed by the signal (-1): it waited for MongoDB and gave up with its own exit code and one line
    assert code == 3, text
    assert "cannot reach MongoDB" in text and "Traceback" not in text


def test_a_sigterm_during_start_up_ends_it_cleanly(tmp_path):
    code, text = signalled_during_start_up(tmp_path, signal.SIGTERM, 20000)
    assert code == 0 and "SIGTERM during start-up" in text and "Traceback" not in text


def test_run_once_with_a_client_that_is_not_tz_aware(http_mock, settings):
    """pymongo's default client returns naive datetimes: normal-mode GitHub runs and shared quota blocks must not
    end `internal` (naive compared with aware); the store reads through a tz-aware view."""
    now = utcnow()
    GitHubStub(http_mock, stars=make_stars(30, seed=3, newest=now - timedelta(hours=1)), clock=now)
    with WireServer() as wire:
        client = MongoClient(wire.uri)  # pymongo's defaults: tz_aware=False
        db = client.get_default_database()
        db.networks.insert_many(
            [
                {
                    "user": "a@x.test",
                    "service": "github",
                    "accessToken": TOKEN,
                    "mode": "normal",
                    "sinceLikedAt": now - timedelta(days=3),
                    "scheduledTo": now - timedelta(seconds=5),
                },
                {
                    "user": "b@x.test",
                    "service": "github",
                    "accessToken": "ghp_blockedTOKEN000000000",
                    "mode": "normal",
                    "scheduledTo": now - timedelta(seconds=5),
                },
            ]
        )
        key = QuotaMemory.key("github", "ghp_blockedTOKEN000000000")
        until = now + timedelta(minutes=10)
        db.quotas.insert_one({"_id": key, "blockedUntil": until, "expiresAt": until, "remaining": 0, "limit": 5000})
        report = run_once(db, "normal", settings)
        client.close()
    assert report.by_status == {"ok": 1, "rateLimit": 1}, report.by_status
