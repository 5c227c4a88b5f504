"""Sinks end to end, as deployed: collectors collect through the fake API into the MongoDB stand-in while the sink
service (`collector sink`, a real process) delivers to real servers — osmem-server (OpenSearch-compatible) behind
a fault proxy, the real Typesense 0.24.1, a Standard Webhooks receiver. On the way a collector is killed between
storing and delivering, the destination goes down, refuses whole requests (429, 503, 413) and single documents
(429: a read-only index; 400: the mapping), the sink service is killed mid-delivery, MongoDB goes away. At the end
every item stored is in the index exactly once by its id, nothing is lost, and the dead letters hold exactly the
documents the server refused for themselves."""

from __future__ import annotations

import json
import time

import pytest
from pymongo import MongoClient

from collector.devtools.fakeapi import FakeGitHub, FakeServer, make_stars
from collector.devtools.mongowire import WireServer

from helpers import free_port
from helpers.proc import run, scrape, start, stop, wait_until, write_env
from helpers.sinkservers import WEBHOOK_SECRET, Fault, FaultProxy, Reply, WebhookReceiver, osmem, typesense

pytestmark = pytest.mark.system

USERS = 5
STARS = 120
REFUSED_EVERY = 7  # repositories whose id is a multiple of this keep a text description the mapping refuses
TEMPLATE = {"index_patterns": ["items"], "template": {"mappings": {"properties": {"description": {"type": "integer"}}}}}


def user_stars(k: int) -> list[dict]:
    """A user's stars: most descriptions are numbers (the template maps `description` as an integer), every
    REFUSED_EVERY-th repository keeps its text, which the server refuses for that document alone (a 400)."""
    stars = make_stars(STARS, seed=k, id_pool=5_000)
    for star in stars:
        repo_id = star["repo"]["id"]
        if repo_id % REFUSED_EVERY:
            star["repo"]["description"] = str(repo_id)
    return stars


def seed(db, fake: FakeGitHub, users: int = USERS, stars=user_stars) -> None:
    for k in range(users):
        fake.add_user(f"token-{k}", stars(k))
        db.users.insert_one({"email": f"u{k}@x.test", "name": f"U{k}"})
        db.networks.insert_one({"user": f"u{k}@x.test", "service": "github", "accessToken": f"token-{k}"})


def walked(db, users: int = USERS) -> bool:
    return db.networks.count_documents({"mode": "normal"}) == users


def settled(db) -> bool:
    """Every item moved out of the outbox and every queue entry delivered or dead-lettered."""
    return db.items.count_documents({"sinkPending": True}) == 0 and db.sinkQueue.count_documents({}) == 0


def hex_ids(db, query: dict | None = None) -> set[str]:
    return {str(doc["_id"]) for doc in db.items.find(query or {}, {"_id": 1})}


def indexed_ids(search) -> dict[str, int]:
    """Every document id in the index, with how many times it is there (an id is the document's key: once)."""
    status, body = search.call("POST", "/items/_refresh")
    status, body = search.call("POST", "/items/_search", {"size": 10_000, "_source": False, "query": {"match_all": {}}})
    assert status == 200, body
    counts: dict[str, int] = {}
    for hit in body["hits"]["hits"]:
        counts[hit["_id"]] = counts.get(hit["_id"], 0) + 1
    return counts


def common_env(wire, api: str, **more) -> dict:
    return {
        "MONGODB_URI": wire.uri,
        "GITHUB_API_URL": api,
        "INITIAL_INTERVAL": 0,
        "LOOP_IDLE_PAUSE": 1,
        "HEARTBEAT_SECONDS": 1,
        "LEASE_SECONDS": 3,  # a killed collector's networks, and a killed sink service's lease, lapse soon
        "LOG_LEVEL": "INFO",
        "SINK_RETRY_MAX": 1,  # back-off waits stay short
        "SINK_MAX_TRIES": 2,
        **more,
    }


def test_every_stored_item_is_indexed_once_through_kills_outages_and_refusals(tmp_path):
    fake = FakeGitHub(latency=0.02)
    template = tmp_path / "template.json"
    template.write_text(json.dumps(TEMPLATE))
    with WireServer() as wire, FakeServer(fake) as api, osmem() as search, FaultProxy(search.url) as proxy:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        seed(db, fake)
        sink_env = {
            "SINKS": "search",
            "SINK_SEARCH_KIND": "opensearch",
            "SINK_SEARCH_URL": proxy.url,
            "SINK_SEARCH_BATCH": 40,
            "SINK_SEARCH_TEMPLATE": template,
        }
        env = write_env(tmp_path / "all.env", **common_env(wire, api, **sink_env))
        proxy.down()  # the destination is down from the start
        processes = []
        try:
            # 1. a collector stores items, and is killed before any of them was delivered
            first = start(["--mode", "initial", "--instance-id", "c1"], env, tmp_path / "c1.log")
            processes.append(first)
            wait_until(lambda: db.items.count_documents({}) >= 150, timeout=60)
            first.kill()
            first.wait(60)
            killed_with = db.items.count_documents({})
            assert db.items.count_documents({"sinkPending": True}) == killed_with  # all of them waiting, marked

            # 2. the sink service starts while the destination is down: the backlog waits in MongoDB
            sink = start(["sink"], env, tmp_path / "s1.log")
            processes.append(sink)
            second = start(["--mode", "initial", "--instance-id", "c2"], env, tmp_path / "c2.log")
            processes.append(second)
            wait_until(lambda: db.sinkQueue.count_documents({}) >= killed_with, timeout=60)
            assert indexed_count(search) == 0

            # 3. it comes back refusing whole requests for a while: 429 (with Retry-After), 503, 413
            proxy.faults += [
                Fault(status=429, headers={"Retry-After": "1"}, body=b'{"error": "too many requests"}'),
                Fault(status=503, body=b'{"error": "unavailable"}'),
                Fault(status=413, body=b""),
            ]
            proxy.up()
            wait_until(lambda: indexed_count(search) > 0, timeout=60)

            # 4. single documents refused for now: the index read-only (per-item 429s) for two seconds
            search.call("PUT", "/items/_settings", {"index.blocks.read_only_allow_delete": True})
            time.sleep(2)
            search.call("PUT", "/items/_settings", {"index.blocks.read_only_allow_delete": False})

            # 5. MongoDB goes away under the sink service for a while, and comes back with the same data
            wire.stop()
            time.sleep(2)
            wire.start()

            # 6. the sink service is killed mid-way; another one takes over once the lease lapses
            sink.kill()
            sink.wait(60)
            sink = start(["sink"], env, tmp_path / "s2.log")
            processes.append(sink)

            wait_until(lambda: walked(db), timeout=120)
            wait_until(lambda: settled(db), timeout=120)
        finally:
            codes = [stop(p) for p in processes]
        assert codes[-1] == 0  # the last sink service stops cleanly on SIGTERM

        stored = hex_ids(db)
        assert len(stored) == fake.total_stars()  # the collectors lost nothing either
        refused = {str(d["_id"]) for d in db.items.find({}, {"itemId": 1}) if int(d["itemId"]) % REFUSED_EVERY == 0}
        assert refused and len(refused) < len(stored)
        dead = {str(d["item"]): d for d in db.sinkDeadLetters.find({"sink": "search"})}
        assert set(dead) == refused  # the dead letters hold exactly what the server refused for itself
        for letter in dead.values():
            assert "mapper_parsing_exception" in letter["reason"]
        in_index = indexed_ids(search)
        assert set(in_index) == stored - refused  # every other item is searchable
        assert set(in_index.values()) == {1}  # once each
        sample = next(iter(stored - refused))
        status, doc = search.call("GET", f"/items/_doc/{sample}")
        assert status == 200 and "_id" not in doc["_source"] and doc["_source"]["type"] == "github"

        # the operator's view agrees
        ops = write_env(tmp_path / "ops.env", MONGODB_URI=wire.uri, **sink_env)
        status_out = run(["sinks", "status", "--json"], ops)
        assert status_out.returncode == 0, status_out.stderr
        figures = {s["name"]: s for s in json.loads(status_out.stdout)["sinks"]}
        assert figures["search"]["backlog"] == 0
        assert figures["search"]["deadLetters"] == len(refused)
        assert figures["search"]["counts"]["deadLettered"] == len(refused)
        logs = "".join((tmp_path / f).read_text() for f in ("s1.log", "s2.log"))
        assert "Traceback" not in logs


def indexed_count(search) -> int:
    search.call("POST", "/items/_refresh")
    status, body = search.call("GET", "/items/_count")
    return body.get("count", 0) if status == 200 else 0


def test_an_auth_failure_stops_one_sink_loudly_while_the_others_deliver_and_resume_catches_up(tmp_path):
    """Two sinks: a webhook receiver and a Typesense whose key is wrong. The webhook gets every item; Typesense
    stops (status --check WARNING, the metric), its backlog kept; with the key fixed and the sink resumed it gets
    every item too."""
    fake = FakeGitHub()
    with WireServer() as wire, FakeServer(fake) as api, WebhookReceiver() as hook:
        with typesense(tmp_path / "ts") as ts:
            db = MongoClient(wire.uri, tz_aware=True).get_default_database()
            seed(db, fake, users=3, stars=lambda k: make_stars(60, seed=k))
            hook.replies += [Reply(503), Reply(429, headers={"Retry-After": "1"})]  # refused twice at first
            port = free_port()
            settings = common_env(
                wire,
                api,
                ALLOW_PRIVATE_HOSTS="true",  # the receiver listens on 127.0.0.1
                SINKS="hooks,ts",
                SINK_HOOKS_KIND="webhook",
                SINK_HOOKS_URL=hook.url,
                SINK_HOOKS_SECRET=WEBHOOK_SECRET,
                SINK_TS_KIND="typesense",
                SINK_TS_URL=ts.url,
                SINK_TS_API_KEY="not-the-key-0000",
            )
            env = write_env(tmp_path / "all.env", **settings)
            collector = start(["--mode", "initial"], env, tmp_path / "c.log")
            sink = start(["sink", "--metrics-port", str(port)], env, tmp_path / "s.log")
            try:
                wait_until(lambda: walked(db, 3), timeout=90)
                stored = hex_ids(db)
                # refused twice, then acknowledged: every item received, nothing of the webhook's left waiting
                # (neither marked nor queued)
                wait_until(
                    lambda: (
                        hook.ids() == stored
                        and db.items.count_documents({"sinkPending": True}) == 0
                        and db.sinkQueue.count_documents({"sink": "hooks"}) == 0
                    ),
                    timeout=60,
                )
                wait_until(lambda: scrape(port).get(("collector_sink_stopped", (("sink", "ts"),))) == 1, timeout=60)
                check = run(["status", "--check"], env)
                assert check.returncode == 1 and "ts" in check.stdout and "WARNING" in check.stdout
                assert db.sinkQueue.count_documents({"sink": "ts"}) == len(stored)  # kept, not lost
                log_text = (tmp_path / "s.log").read_text()
                assert "not-the-key-0000" not in log_text and "ERROR" in log_text

                # the operator fixes the key, reloads, resumes: Typesense catches up
                write_env(tmp_path / "all.env", **{**settings, "SINK_TS_API_KEY": ts.api_key})
                sink.send_signal(1)  # SIGHUP
                resumed = run(["sinks", "resume", "ts"], env)
                assert resumed.returncode == 0, resumed.stderr
                wait_until(lambda: db.sinkQueue.count_documents({"sink": "ts"}) == 0, timeout=90)
            finally:
                codes = [stop(collector), stop(sink)]
            assert codes == [0, 0]
            assert all(ts.count("items", item_id) == 1 for item_id in stored)
            received = [doc["id"] for batch in hook.batches for doc in batch["payload"]["data"]]
            assert set(received) == stored
            assert hook.refused == 0  # every signature verified by the reference package
