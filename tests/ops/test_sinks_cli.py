"""`collector sinks list|status|pause|resume|replay` on mongomock: what they print and write, their exit codes,
secrets masked, unknown names refused, and any document a mongo shell may have written shown clearly (escaped,
strict JSON), never a traceback."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime, timedelta

import mongomock
import pytest
from bson import ObjectId
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector import cli
from collector.engine import store
from collector.sdk.timeutil import utcnow

from helpers import examples
from helpers.sinkservers import WEBHOOK_SECRET

TERMINAL_HOSTILE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
FRAGMENTS = [*"ab@.-_ |\\\"'{}", "\n", "\r", "\x00", "\x1b[2J", "\x9b", "\u202e", "\u2028", "é", "\x1b]0;pwned\x07"]
HOSTILE_TEXT = st.lists(st.sampled_from(FRAGMENTS), max_size=10).map("".join)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    HOSTILE_TEXT,
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["at", "by", "reason", "x"]), inner),
    max_leaves=8,
)
SINK_FIELDS = ["kind", "createdAt", "paused", "stopped", "backfill", "counts", "stats"]
LEASE_FIELDS = ["owner", "host", "pid", "leaseUntil", "beatAt", "epoch"]
FAST = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SECRET = "pw-very-secret-123"


def strict(text: str):
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-RFC 8259 constant {c}"))


@pytest.fixture
def world(monkeypatch, tmp_path):
    """A mongomock database the command line connects to, and settings that configure `search` and `hook`."""
    client = mongomock.MongoClient("mongodb://localhost:27017/likeastore_test", tz_aware=True)
    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: client)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("SINKS", "search,hook")
    for name, kind, url in (("SEARCH", "opensearch", "http://search.test:9200"), ("HOOK", "webhook", "https://h.test")):
        monkeypatch.setenv(f"SINK_{name}_KIND", kind)  # every command checks the sinks' settings
        monkeypatch.setenv(f"SINK_{name}_URL", url)
    monkeypatch.setenv("SINK_HOOK_SECRET", WEBHOOK_SECRET)
    return client.get_default_database()


def run(monkeypatch, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    try:
        code = cli.main(argv)
    except SystemExit as exit:
        code = int(exit.code or 0)
    return code, out.getvalue(), err.getvalue()


def seed(db, now: datetime) -> None:
    """`search` with a queue (the oldest item 20 minutes old) and counts, `hook` stopped, `old` no longer
    configured, and a live service lease."""
    db.sinks.insert_many(
        [
            {
                "_id": "search",
                "kind": "opensearch",
                "createdAt": now - timedelta(days=1),
                "counts": {"delivered": 120, "deadLettered": 2, "failed": {"refused": 3, "tooLarge": 1}},
                "backfill": {"startedAt": now - timedelta(hours=1), "by": "ann@box", "enqueued": 40, "doneAt": None},
            },
            {
                "_id": "hook",
                "kind": "webhook",
                "stopped": {"at": now - timedelta(minutes=5), "reason": "401 from hooks.example/in"},
                "counts": {"failed": {"auth": 1}},
            },
            {"_id": "old", "kind": "typesense"},
            {
                "_id": "~service",
                "owner": "box-sink-7",
                "host": "box",
                "pid": 7,
                "leaseUntil": now + timedelta(seconds=30),
                "beatAt": now - timedelta(seconds=2),
            },
        ]
    )
    for minutes in (20, 5, 1):
        item = ObjectId()
        date = now - timedelta(minutes=minutes)
        db.sinkQueue.insert_one(
            {"_id": {"s": "search", "i": item}, "sink": "search", "item": item, "date": date, "at": date, "nextAt": now}
        )
    db.sinkDeadLetters.insert_one({"_id": {"s": "search", "i": 1}, "sink": "search", "item": 1, "reason": "bad"})
    db.items.insert_many([{"sinkPending": True, "date": now}, {"sinkPending": True, "date": now}, {"date": now}])


def test_status_shows_backlog_lag_counts_states_lease_and_outbox(world, monkeypatch):
    now = utcnow()
    seed(world, now)
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert code == 0, err
    search = next(line for line in out.splitlines() if line.startswith("search "))
    assert "opensearch" in search and " 3 " in search and "20m" in search and " 120 " in search
    assert re.search(r"^hook .*STOPPED", out, re.M) and "401 from hooks.example/in" in out
    assert re.search(r"^old .*unconfigured", out, re.M)
    assert "box-sink-7" in out and "holds the lease" in out
    assert "not yet queued for the sinks: 2" in out
    assert "backfill: running" in out and "40 queued so far" in out
    code, out, err = run(monkeypatch, ["sinks", "status", "--json"])
    report = strict(out)
    rows = {r["name"]: r for r in report["sinks"]}
    assert rows["search"]["backlog"] == 3 and 1190 < rows["search"]["lagSeconds"] < 1300
    assert rows["search"]["counts"]["failed"] == {"refused": 3, "tooLarge": 1, "rejected": 0, "auth": 0}
    assert rows["search"]["deadLetters"] == 1 and rows["old"]["configured"] is False
    assert rows["hook"]["stopped"]["reason"].startswith("401") and report["outboxPending"] == 2
    assert report["service"]["live"] is True and report["service"]["owner"] == "box-sink-7"
    code, out, err = run(monkeypatch, ["sinks", "status", "hook", "--json"])
    assert [r["name"] for r in strict(out)["sinks"]] == ["hook"]
    code, out, err = run(monkeypatch, ["sinks", "status", "search"])
    assert code == 0 and re.search(r"^    item 1 at .*: bad$", out, re.M) and "hook" not in out


def test_a_configured_sink_no_service_registered_yet_is_shown_as_new(world, monkeypatch):
    code, out, err = run(monkeypatch, ["sinks", "status", "--json"])
    assert code == 0
    report = strict(out)
    assert {r["name"]: r["registered"] for r in report["sinks"]} == {"hook": False, "search": False}
    assert report["service"] is None and report["outboxPending"] is None  # no service ran: no index to count with
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert "none has run (no lease)" in out and "no sink service has registered it yet" in out


def test_pause_resume_and_replay_write_what_they_say(world, monkeypatch):
    now = utcnow()
    seed(world, now)
    code, out, err = run(monkeypatch, ["sinks", "pause", "search", "--reason", "reindexing"])
    assert code == 0 and "paused sink search: reindexing" in out, err
    paused = world.sinks.find_one({"_id": "search"})["paused"]
    assert paused["reason"] == "reindexing" and "@" in paused["by"] and isinstance(paused["at"], datetime)
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert re.search(r"^search .*paused", out, re.M) and "by " + paused["by"] in out
    code, out, err = run(monkeypatch, ["sinks", "resume", "search"])
    assert code == 0 and "was paused" in out
    assert "paused" not in world.sinks.find_one({"_id": "search"})
    code, out, err = run(monkeypatch, ["sinks", "resume", "search"])
    assert code == 1 and "neither paused nor stopped" in out
    code, out, err = run(monkeypatch, ["sinks", "resume", "hook"])  # a stop after refused credentials
    assert code == 0 and "was stopped" in out and "stopped" not in world.sinks.find_one({"_id": "hook"})
    code, out, err = run(monkeypatch, ["sinks", "replay", "search", "--since", "2026-11-30"])
    assert code == 0 and "replay of sink search started" in out, err
    # the backfill under way is not lost: the replay takes it over and covers both (every item)
    assert "every item is queued again" in out and "a backfill was under way" in out
    walk = world.sinks.find_one({"_id": "search"})["backfill"]
    assert walk["since"] is None and "@" in walk["by"] and walk["joined"]["enqueued"] == 40
    world.sinks.update_one({"_id": "search"}, {"$set": {"backfill.doneAt": now}})
    code, out, err = run(monkeypatch, ["sinks", "replay", "search", "--since", "2026-11-30"])
    assert code == 0 and "every item dated from 2026-11-30 00:00:00 UTC is queued again" in out, err
    walk = world.sinks.find_one({"_id": "search"})["backfill"]
    assert walk["since"] == datetime(2026, 11, 30, tzinfo=UTC) and "joined" not in walk


def test_unknown_names_bad_dates_and_unconfigured_replays_are_one_line_each(world, monkeypatch):
    now = utcnow()
    seed(world, now)
    for argv in (
        ["pause", "nope"],
        ["resume", "nope"],
        ["replay", "nope", "--since", "2026-01-01"],
        ["status", "nope"],
    ):
        code, out, err = run(monkeypatch, ["sinks", *argv])
        assert code == 1 and out == "" and len(err.strip().splitlines()) == 1 and "no sink 'nope'" in err, argv
    code, out, err = run(monkeypatch, ["sinks", "pause", "\x1b[2Jevil"])
    assert code == 1 and not TERMINAL_HOSTILE.search(err)
    code, out, err = run(monkeypatch, ["sinks", "replay", "old", "--since", "2026-01-01"])
    assert code == 1 and "no longer configured" in err
    code, out, err = run(monkeypatch, ["sinks", "replay", "search", "--since", "yesterday"])
    assert code == 2 and "invalid date" in err
    future = (now + timedelta(days=2)).date().isoformat()
    code, out, err = run(monkeypatch, ["sinks", "replay", "search", "--since", future])
    assert code == 2 and "in the future" in err
    assert "backfill" not in world.sinks.find_one({"_id": "old"})


def test_an_unreachable_database_is_exit_3(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("MONGODB_URI", "mongodb://127.0.0.1:1/x?serverSelectionTimeoutMS=200")
    code, out, err = run(monkeypatch, ["sinks", "status"])
    assert code == 3 and "cannot reach MongoDB" in err and "Traceback" not in err


@FAST
@given(
    sink=st.dictionaries(st.sampled_from(SINK_FIELDS), VALUES),
    lease=st.dictionaries(st.sampled_from(LEASE_FIELDS), VALUES),
    name=st.one_of(HOSTILE_TEXT, st.integers(min_value=-(2**63), max_value=2**63 - 1), st.just("search")),
    entry=st.dictionaries(st.sampled_from(["date", "at", "nextAt", "tries"]), VALUES),
)
def test_any_sink_document_is_shown_clearly(world, monkeypatch, sink, lease, name, entry):
    for collection in ("sinks", "sinkQueue", "sinkDeadLetters", "items"):
        world[collection].delete_many({})
    world.sinks.insert_one({**sink, "_id": name if name != "~service" else "x"})
    world.sinks.insert_one({**lease, "_id": "~service"})
    world.sinkQueue.insert_one({**entry, "sink": name})
    for argv in (["sinks", "status"], ["sinks", "list"], ["status"], ["status", "--check"]):
        code, out, err = run(monkeypatch, argv)
        assert "Traceback" not in err and not TERMINAL_HOSTILE.search(out + err), (argv, out + err)
    for argv in (["sinks", "status", "--json"], ["status", "--json"]):
        code, out, err = run(monkeypatch, argv)
        assert code == 0 and out.isascii(), err
        strict(out)
    code, out, err = run(monkeypatch, ["status", "--check"])
    assert len(out.strip().splitlines()) == 1 and out.count("|") == 1


def probe_registry(monkeypatch):
    """A kind of sink of the test's own (`probe`, with a secret option whose name says nothing), as a plugin adds."""
    from collector.sinks import registry
    from collector.sinks.sdk import DONE, Option, Sink

    class Probe(Sink):
        kind = "probe"
        options = (Option("INDEX", "where", default="items"), Option("PASSPHRASE", "opaque", secret=True))

        def deliver(self, batch):
            return [DONE] * len(batch)

    made = registry.SinkRegistry
    monkeypatch.setattr(registry, "SinkRegistry", lambda: made({"probe": Probe}, discover=False))


def test_list_shows_kind_host_and_sizes_and_masks_every_secret(world, monkeypatch):
    probe_registry(monkeypatch)
    monkeypatch.delenv("SINK_HOOK_SECRET")  # not a setting of a probe sink
    monkeypatch.setenv("SINKS", "search,hook")
    for name, url in (
        ("SEARCH", f"https://search.example:9200/x?token={SECRET}"),
        ("HOOK", "http://h.test/in"),
    ):
        monkeypatch.setenv(f"SINK_{name}_KIND", "probe")
        monkeypatch.setenv(f"SINK_{name}_URL", url)
    monkeypatch.setenv("SINK_SEARCH_PASSPHRASE", SECRET)
    monkeypatch.setenv("SINK_SEARCH_BATCH", "100")
    monkeypatch.setenv("SINK_HOOK_SERVICES", "github,reddit")
    world.sinks.insert_one({"_id": "old", "kind": "typesense"})
    code, out, err = run(monkeypatch, ["sinks", "list"])
    assert code == 0, err
    assert SECRET not in out and "ann" not in out and "/x" not in out
    search = next(line for line in out.splitlines() if line.startswith("search "))
    assert "https://search.example:9200" in search and " 100 " in search and "PASSPHRASE=***" in search
    assert "INDEX=items" in search
    assert re.search(r"^hook .*github,reddit", out, re.M) and re.search(r"^old .*no longer configured", out, re.M)
    code, out, err = run(monkeypatch, ["sinks", "list", "--json"])
    listing = strict(out)
    assert SECRET not in out and listing["unconfigured"][0]["name"] == "old"
    assert listing["configured"][0]["options"] == {"INDEX": "items", "PASSPHRASE": "***"}
    monkeypatch.setenv("SINK_HOOK_BATCH", "lots")
    code, out, err = run(monkeypatch, ["sinks", "list"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "SINK_HOOK_BATCH" in err
    monkeypatch.setenv("SINK_HOOK_URL", f"https://ann:{SECRET}@h.test/in")  # refused, and not repeated
    code, out, err = run(monkeypatch, ["sinks", "list"])
    assert code == 2 and "SINK_HOOK_URL" in err and SECRET not in err and "ann" not in err


def test_a_sink_no_service_registered_yet_cannot_be_paused_or_replayed_yet(world, monkeypatch):
    for argv in (["pause", "search"], ["replay", "search", "--since", "2026-01-01"]):
        code, out, err = run(monkeypatch, ["sinks", *argv])
        assert code == 1 and "no sink service has registered it yet" in out, argv
    assert world.sinks.count_documents({}) == 0
