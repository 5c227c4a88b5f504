"""A bad sink setting refuses every command where the other settings are checked, before anything is done: one
line naming SINK_<NAME>_<OPTION> on standard error, exit 2, nothing on standard output, no secret, and nothing
written to MongoDB — no `sinks` registration, no backfill, no lease (a mongomock database the command line
connects to, in this process: `collector sink --once`, `sinks list`, `--check-config`, `status`, the daemon)."""

from __future__ import annotations

import base64
import io

import mongomock
import pytest
from bson import ObjectId

from collector import cli
from collector.engine import store
from collector.sdk.timeutil import utcnow

from helpers.sinkservers import WEBHOOK_SECRET

PASSWORD = "very-secret-pw-0042"
KEY = base64.b64encode(b"q" * 32).decode()


@pytest.fixture
def db(monkeypatch, tmp_path):
    client = mongomock.MongoClient("mongodb://localhost:27017/likeastore_test", tz_aware=True)
    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: client)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("SINKS", "hook,search")
    for name, value in {
        "SINK_HOOK_KIND": "webhook",
        "SINK_HOOK_URL": "https://hooks.example/in",
        "SINK_HOOK_SECRET": WEBHOOK_SECRET,
        "SINK_SEARCH_KIND": "opensearch",
        "SINK_SEARCH_URL": "http://127.0.0.1:1",
        "SINK_SEARCH_PASSWORD": PASSWORD,
        "SINK_SEARCH_USERNAME": "writer",
    }.items():
        monkeypatch.setenv(name, value)
    database = client.get_default_database()
    now = utcnow()
    database.items.insert_many(
        [{"_id": ObjectId(), "type": "github", "itemId": str(i), "date": now, "sinkPending": True} for i in range(3)]
    )
    return database


def run(monkeypatch, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    try:
        code = cli.main(argv)
    except SystemExit as exit:
        code = int(exit.code or 0)
    return code, out.getvalue(), err.getvalue()


BAD = [
    ("SINK_HOOK_URL", "http://hooks.example/in", "https URL"),
    ("SINK_HOOK_URL", f"https://writer:{PASSWORD}@hooks.example/in", "credentials"),
    ("SINK_HOOK_URL", "https://192.168.10.2/in", "non-public address"),
    ("SINK_HOOK_SECRET", KEY, "whsec_"),
    ("SINK_HOOK_SECRET", "whsec_" + base64.b64encode(b"short").decode(), "24 to 64 bytes"),
    ("SINK_SEARCH_INDEX", "Likes", "lower case"),
    ("SINK_SEARCH_INDEX", "likes,all", "must not hold"),
    ("SINK_SEARCH_INDEX", "_likes", "begin with"),
    ("SINK_SEARCH_API_KEY", PASSWORD, "not both"),
    ("SINK_SEARCH_CONCURRENCY", "1000", "at most"),
    ("SINK_SEARCH_KIND", "elasticsearch", "unknown kind"),
]
COMMANDS = [
    ["sink", "--once"],
    ["sinks", "list"],
    ["sinks", "list", "--json"],
    ["sinks", "status"],
    ["--check-config"],
    ["status"],
    ["--mode", "normal", "--once"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize(("setting", "value", "words"), BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_a_bad_sink_setting_refuses_the_command_in_one_line_and_writes_nothing(
    db, monkeypatch, command, setting, value, words
):
    monkeypatch.setenv(setting, value)
    before = {name: list(db[name].find()) for name in db.list_collection_names()}
    code, out, err = run(monkeypatch, command)
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and setting in lines[0] and words in lines[0], err
    assert PASSWORD not in err and KEY not in err and WEBHOOK_SECRET.removeprefix("whsec_") not in err
    assert db.sinks.count_documents({}) == 0 and "sinkQueue" not in db.list_collection_names()
    assert {name: list(db[name].find()) for name in db.list_collection_names()} == before


def test_the_same_settings_made_good_register_the_sinks(db, monkeypatch):
    """The contrast: what the refusal prevents is what a run does — the sinks registered, their backfill begun."""
    from collector.daemon import sinkprocess

    monkeypatch.setattr(sinkprocess, "service_database", lambda client: client.get_default_database())  # mongomock
    code, out, err = run(monkeypatch, ["sink", "--once"])
    assert code in (0, 1) and "Traceback" not in err, err
    assert {doc["_id"] for doc in db.sinks.find({"kind": {"$exists": True}})} == {"hook", "search"}
    code, out, err = run(monkeypatch, ["--check-config"])
    assert code == 0 and '"SINK_SEARCH_PASSWORD": "***"' in out and PASSWORD not in out
