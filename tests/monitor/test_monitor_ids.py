"""The monitor's actions take an id as an id, never as a query: `collector monitor` as a real process with a
MONITOR_TOKEN, on the MongoDB stand-in, asked over HTTP to enable or reset a network named by a query (a document
with `$` keys at any depth, a regular expression, code, as JSON or Extended JSON), or to pause a scope named by a
wildcard or a document, answers 400 with one clear line and changes nothing in any collection; a search for such
text finds nothing; legitimate ids (ObjectId hex, integers, strings, plain documents) still act on their network
alone."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime

import pytest
from bson import ObjectId
from pymongo import MongoClient

from collector.devtools.mongowire import WireServer
from collector.ops.ids import format_id

from helpers import free_port
from helpers.proc import start, stop, wait_until, write_env

# one worker runs this module's tests: its module-scoped fixture is set up once (--dist loadgroup)
pytestmark = pytest.mark.xdist_group("monitor_ids")

TOKEN = "ids-test-token-0123456789"
QUERIES = [
    '{"$ne": null}',
    '{"$gt": ""}',
    '{"$regex": "."}',
    '{"$regularExpression": {"pattern": "^a", "options": "i"}}',
    '{"$where": "true"}',
    '{"$in": [7, "abc"]}',
    '{"a": {"$ne": 1}}',
    '{"s": "github", "i": {"$gte": 0}}',
    '[{"$exists": true}]',
    '{"\\u0024ne": null}',
    '{"$code": "1"}',
]
COLLECTIONS = ("networks", "control", "collectors", "items", "quotas", "sinks", "sinkQueue", "sinkDeadLetters")
NOT_TEXT = [{"$ne": None}, {"$gt": ""}, ["$ne"], 7, True, [{"$where": "1"}]]


class Monitor:
    def __init__(self, port: int, db):
        self.port, self.db = port, db

    def post(self, action: str, body: object) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/{action}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "X-Monitor-Token": TOKEN},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def search(self, q: str) -> list[dict]:
        status, found = self.ask(q)
        assert status == 200 and found["error"] is None, found
        return found["networks"]

    def ask(self, q: str) -> tuple[int, dict]:
        url = f"http://127.0.0.1:{self.port}/api/networks?" + urllib.parse.urlencode({"q": q})
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def snapshot(self) -> dict[str, list]:
        """Every document of every collection the monitor reads or writes (the stand-in lists no collections)."""
        return {name: list(self.db[name].find()) for name in COLLECTIONS}


@pytest.fixture(scope="module")
def monitor(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("monitor-ids")
    with WireServer() as wire:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        now = datetime.now(UTC).replace(microsecond=0)
        common = {"service": "github", "accessToken": "tok-0123456789abcdef", "disabled": True, "errors": 3}
        db.networks.insert_many(
            [
                {"_id": ObjectId(), "user": "ada@x.test", **common, "mode": "normal", "page": 4},
                {"_id": 7, "user": "bob@x.test", **common, "mode": "normal"},
                {"_id": "abc", "user": "cy@x.test", **common, "mode": "normal"},
                {"_id": {"s": "github", "i": 7}, "user": "dee@x.test", **common, "mode": "normal"},
                {"_id": "$ne", "user": "eve@x.test", **common, "mode": "normal"},
            ]
        )
        db.control.insert_one({"_id": "pause:*:gist", "mode": "*", "service": "gist", "by": "ann", "at": now})
        port = free_port()
        env = write_env(tmp / "monitor.env", MONGODB_URI=wire.uri, MONITOR_TOKEN=TOKEN, LOG_LEVEL="INFO")
        process = start(["monitor", "--port", str(port)], env, tmp / "monitor.log")
        try:
            running = Monitor(port, db)
            wait_until(lambda: running.search("ada@x.test"), timeout=60)
            yield running
        finally:
            assert stop(process) == 0, (tmp / "monitor.log").read_text()[-2000:]


@pytest.mark.parametrize("action", ["networks/enable", "networks/reset"])
def test_a_query_given_as_a_networks_id_is_refused_with_400_and_changes_nothing(monitor, action):
    before = monitor.snapshot()
    for query in QUERIES:
        status, answer = monitor.post(action, {"id": query})
        assert status == 400 and answer["ok"] is False, (query, answer)
        assert "is a query, not an id" in answer["message"] and "\n" not in answer["message"]
    for value in NOT_TEXT:
        status, answer = monitor.post(action, {"id": value})
        assert (status, answer["message"]) == (400, "id must be text of at most 200 characters"), value
    assert monitor.snapshot() == before


@pytest.mark.parametrize("action", ["pause", "resume"])
def test_a_pause_names_its_scope_by_name_only(monitor, action):
    before = monitor.snapshot()
    for body in (
        {"service": "*"},
        {"service": " * ", "mode": "initial"},
        {"service": {"$ne": None}},
        {"service": ["github"]},
        {"mode": {"$in": ["initial", "normal"]}},
        {"mode": "*"},
        {"mode": "$ne"},
    ):
        status, answer = monitor.post(action, body)
        assert status == 400 and answer["ok"] is False, (body, answer)
    assert monitor.snapshot() == before


def test_a_search_for_a_query_is_refused_with_400_and_a_string_with_a_dollar_is_an_id(monitor):
    for query in QUERIES:
        status, answer = monitor.ask(query)
        assert status == 400 and answer["networks"] == [], (query, answer)
        assert "is a query, not an id" in answer["error"] and "\n" not in answer["error"]
    for text in ('{"s": "github"', "{not json", ".*", "^ada"):  # no JSON, no email: a search of users' emails
        assert monitor.search(text) == [], text
    assert [n["user"] for n in monitor.search("ad")] == ["ada@x.test"]
    assert [n["user"] for n in monitor.search('"$ne"')] == ["eve@x.test"]
    assert [n["user"] for n in monitor.search("$ne")] == ["eve@x.test"]
    assert [n["user"] for n in monitor.search(format_id({"s": "github", "i": 7}))] == ["dee@x.test"]


@pytest.mark.parametrize("user", ["ada@x.test", "bob@x.test", "cy@x.test", "dee@x.test", "eve@x.test"])
def test_legitimate_ids_act_on_their_network_and_only_on_it(monitor, user):
    network = monitor.db.networks.find_one({"user": user})
    monitor.db.networks.update_one({"_id": network["_id"]}, {"$set": {"disabled": True, "errors": 3}})
    others = [n for n in monitor.db.networks.find() if n["user"] != user]
    shown = format_id(network["_id"])
    status, answer = monitor.post("networks/enable", {"id": shown})
    assert (status, answer["ok"]) == (200, True) and answer["message"].count("cleared") == 1, answer
    status, answer = monitor.post("networks/reset", {"id": shown})
    assert (status, answer["ok"]) == (200, True) and "-> initial" in answer["message"], answer
    changed = monitor.db.networks.find_one({"user": user})
    assert changed["mode"] == "initial" and "disabled" not in changed and changed["errors"] == 0
    assert [n for n in monitor.db.networks.find() if n["user"] != user] == others


def test_a_service_named_with_dollars_is_paused_as_that_name(monitor):
    for service in ("$ne", '{"$ne": null}', ".*"):
        status, answer = monitor.post("pause", {"service": service, "reason": "test"})
        assert status == 200 and answer["ok"], answer
        assert monitor.db.control.find_one({"_id": f"pause:*:{service}"})["service"] == service
        status, answer = monitor.post("resume", {"service": service})
        assert status == 200 and answer["ok"], answer
    assert [d["_id"] for d in monitor.db.control.find()] == ["pause:*:gist"]
