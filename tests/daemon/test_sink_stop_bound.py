"""A stop keeps its bound (the longest SINK_<NAME>_TIMEOUT + 5 s) however many requests one delivery is: a batch a
slow receiver answers 413 again and again (halved: up to 2n-1 requests, each bounded alone) sends nothing more once
the stop began, the requests still running near the end are cut, and what was cut stays queued untouched — both in
the service itself (real HTTP client, a receiver that never answers in time) and in a real `collector sink` process
sent SIGTERM. The bounds below are generous timeouts, not timings."""

from __future__ import annotations

import random
import signal
import subprocess
from pathlib import Path

import pytest
from bson import ObjectId

from collector.devtools.mongowire import WireServer
from collector.sdk.timeutil import utcnow
from collector.settings import load_settings
from collector.sinks.service import SinkService
from collector.sinks.store import DEAD, QUEUE

from helpers.fakesink import Clock, add_items
from helpers.proc import start, stop, wait_until, write_env
from helpers.sinkservers import WEBHOOK_SECRET, Reply, WebhookReceiver

pytestmark = pytest.mark.system


def untouched(entries: list[dict]) -> bool:
    return all(entry.get("tries", 0) == 0 and "lastError" not in entry for entry in entries)


def test_the_stop_cuts_a_request_still_running_and_leaves_its_entries_queued(db):
    ids = add_items(db, 3)
    with WebhookReceiver() as receiver:
        receiver.replies = [Reply(204, delay=60.0)]  # answers long after the stop's bound
        settings = load_settings(
            environ={
                "SINKS": "hooks",
                "SINK_HOOKS_KIND": "webhook",
                "SINK_HOOKS_URL": receiver.url,
                "SINK_HOOKS_SECRET": WEBHOOK_SECRET,
                "SINK_HOOKS_TIMEOUT": "60",
                "ALLOW_PRIVATE_HOSTS": "true",
            },
            env="test",
            read_dotenv=False,
        )
        svc = SinkService(db, settings, owner="one", clock=Clock(), rng=random.Random(3))
        lane = svc.lanes["hooks"]
        wait_until(lambda: svc.step() is not None and lane.flights, timeout=60, every=0.1)
        wait_until(lambda: receiver.batches, timeout=60, every=0.05)  # the request is at the receiver
        svc.stop(2.0)
        assert not lane.flights  # the request was cut: its thread ended within the stop
    entries = list(db[QUEUE].find())
    assert sorted(str(e["item"]) for e in entries) == sorted(ids) and untouched(entries)


def items(wire: WireServer, n: int) -> list[str]:
    db = wire.client.get_database("likeastore")
    ids = [ObjectId() for _ in range(n)]
    db.items.insert_many(
        [{"_id": i, "type": "github", "itemId": str(i), "date": utcnow(), "sinkPending": True} for i in ids]
    )
    return [str(i) for i in ids]


def test_sigterm_during_a_batch_halved_again_and_again_exits_within_the_bound(tmp_path: Path):
    with WireServer() as wire, WebhookReceiver() as receiver:
        ids = items(wire, 64)
        # each request answered 413 after a second: 127 requests (over two minutes) to halve 64 down to one each
        receiver.replies = [Reply(413, delay=1.0)] * 1000
        env_file = write_env(
            tmp_path / "collector.env",
            MONGODB_URI=wire.uri,
            LOG_LEVEL="INFO",
            SINKS="hooks",
            SINK_HOOKS_KIND="webhook",
            SINK_HOOKS_URL=receiver.url,
            SINK_HOOKS_SECRET=WEBHOOK_SECRET,
            SINK_HOOKS_BATCH=64,
            SINK_HOOKS_CONCURRENCY=1,
            SINK_HOOKS_TIMEOUT=3,  # the bound: 3 + 5 s
            ALLOW_PRIVATE_HOSTS="true",
        )
        process = start(["sink"], env_file, tmp_path / "sink.log")
        try:
            wait_until(lambda: len(receiver.batches) >= 2, timeout=60, every=0.05)  # halving has begun
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(timeout=30)  # generous: without the cut, over two minutes
            except subprocess.TimeoutExpired:
                pytest.fail(f"still running 30 s after SIGTERM, {len(receiver.batches)} requests sent")
        finally:
            stop(process)
        log = (tmp_path / "sink.log").read_text()
        assert code == 0 and "Traceback" not in log, log
        db = wire.client.get_database("likeastore")
        entries = list(db[QUEUE].find({"sink": "hooks"}))
        assert sorted(str(e["item"]) for e in entries) == sorted(ids) and untouched(entries)
        assert db[DEAD].count_documents({}) == 0
