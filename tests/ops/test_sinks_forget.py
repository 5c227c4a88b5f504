"""`collector sinks forget NAME` (a sink removed from SINKS on purpose: its document and queue entries deleted,
dead letters kept; refused while it is configured or a live sink service serves it), and the registered sinks the
lease holder does not configure — it queues no new item meanwhile — shown by `sinks status` and warned on by
`status --check` (review 2, finding 3)."""

from __future__ import annotations

import io
from datetime import timedelta

import mongomock
import pytest

from collector import cli
from collector.engine import store
from collector.ops.status import gather
from collector.ops.statuscheck import WARNING, check
from collector.sdk.timeutil import utcnow
from collector.settings import settings_for_tests


@pytest.fixture
def world(monkeypatch, tmp_path):
    """A mongomock database the command line connects to, settings that configure `search` only, a live lease
    held by a service that does not configure `old`, registered."""
    client = mongomock.MongoClient("mongodb://localhost:27017/likeastore_test", tz_aware=True)
    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: client)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("SINKS", "search")
    monkeypatch.setenv("SINK_SEARCH_KIND", "opensearch")  # every command checks the sinks' settings
    monkeypatch.setenv("SINK_SEARCH_URL", "http://search.test:9200")
    db = client.get_default_database()
    now = utcnow()
    lease = {"_id": "~service", "owner": "box-sink-7", "host": "box", "pid": 7, "beatAt": now}
    lease |= {"leaseUntil": now + timedelta(seconds=30), "blocked": {"owner": "box-sink-7", "sinks": ["old"]}}
    db.sinks.insert_many([{"_id": "search", "kind": "opensearch"}, {"_id": "old", "kind": "typesense"}, lease])
    for i in range(3):
        db.sinkQueue.insert_one({"_id": {"s": "old", "i": i}, "sink": "old", "item": i, "date": now})
    db.sinkQueue.insert_one({"_id": {"s": "search", "i": 0}, "sink": "search", "item": 0, "date": now})
    db.sinkDeadLetters.insert_one({"_id": {"s": "old", "i": 9}, "sink": "old", "item": 9, "reason": "400", "at": now})
    return db


def run(monkeypatch, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    try:
        code = cli.main(argv)
    except SystemExit as exit:
        code = int(exit.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_a_registered_sink_the_lease_holder_does_not_configure_is_shown_and_warned_on(world, monkeypatch):
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert code == 0 and "NEW ITEMS WAIT" in out and "sink(s) old" in out and "collector sinks forget" in out
    code, line = check(gather(world, utcnow(), 15), settings_for_tests(sinks=("search",)))
    assert code == WARNING and "sink service box-sink-7 does not configure sink(s) old" in line, line
    world.sinks.update_one({"_id": "~service"}, {"$set": {"owner": "another"}})  # what the last holder said
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert "NEW ITEMS WAIT" not in out


def test_forget_deletes_the_document_and_queue_and_keeps_the_dead_letters(world, monkeypatch):
    code, out, err = run(monkeypatch, ["sinks", "forget", "old"])
    assert code == 0, err
    assert "forgot sink old: its document and 3 queue entries deleted; its 1 dead letters are kept" in out
    assert world.sinks.find_one({"_id": "old"}) is None
    assert world.sinkQueue.count_documents({"sink": "old"}) == 0 and world.sinkQueue.count_documents({}) == 1
    assert world.sinkDeadLetters.count_documents({"sink": "old"}) == 1
    code, out, err = run(monkeypatch, ["sinks", "forget", "old"])  # no longer known
    assert code == 1 and len(err.strip().splitlines()) == 1 and "no sink 'old'" in err


def test_forget_refuses_a_sink_still_configured_or_served(world, monkeypatch):
    code, out, err = run(monkeypatch, ["sinks", "forget", "search"])
    assert code == 1 and not out and len(err.strip().splitlines()) == 1 and "SINKS names it" in err
    assert world.sinks.find_one({"_id": "search"}) is not None
    stats = {"at": utcnow(), "owner": "box-sink-7", "backlog": 3, "lagSeconds": 0.0}
    world.sinks.update_one({"_id": "old"}, {"$set": {"stats": stats}})  # the live service writes its figures
    code, out, err = run(monkeypatch, ["sinks", "forget", "old"])
    assert code == 1 and "still serves it" in out and world.sinks.find_one({"_id": "old"}) is not None
    assert world.sinkQueue.count_documents({"sink": "old"}) == 3


def test_whatever_the_lease_document_says_is_blocked_is_shown_clearly(world, monkeypatch):
    hostile = ["\x1b[2Jold", "a|b\u202e", 5, None, {"x": 1}]
    world.sinks.update_one({"_id": "~service"}, {"$set": {"blocked.sinks": hostile}})
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert code == 0 and "NEW ITEMS WAIT" in out and "\x1b" not in out and "\u202e" not in out
    code, line = check(gather(world, utcnow(), 15), settings_for_tests(sinks=("search",)))
    assert code == WARNING and line.count("|") == 1 and "\x1b" not in line
    world.sinks.update_one({"_id": "~service"}, {"$set": {"blocked": "junk"}})
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert code == 0 and "NEW ITEMS WAIT" not in out


def test_a_pause_by_someone_with_a_bar_in_the_name_keeps_the_check_to_one_bar(world, monkeypatch):
    world.sinks.update_one({"_id": "search"}, {"$set": {"paused": {"by": {"at": "|"}, "at": utcnow()}}})
    code, line = check(gather(world, utcnow(), 15), settings_for_tests(sinks=("search",)))
    assert code == WARNING and "paused" in line and line.count("|") == 1, line
