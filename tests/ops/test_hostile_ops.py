"""The operator's tools under documents written by others and text sent by third parties: status, networks,
logs and ids never crash, lie, leak, or let text drive a terminal. Values are drawn by hypothesis where it fits."""

from __future__ import annotations

import io
import json
import logging
import re
from datetime import UTC, datetime, timedelta

import mongomock
import pytest
from bson import Binary, ObjectId
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from collector import cli
from collector.daemon import logs
from collector.engine import store
from collector.engine.store import Store
from collector.ops.status import gather, render
from collector.ops.statuscheck import CRITICAL, check
from collector.sdk.timeutil import utcnow

from helpers import TOKEN, examples

FRAGMENTS = [
    *"ab@.-_ \\\"'{}[]",
    "\n",
    "\r",
    "\x00",
    "\x1b",
    "\x07",
    "\x7f",
    "\x9b",
    "\u202e",
    "\u2028",
    "\u200b",
    "é",
    "\x1b[2J",
    "\x1b]0;pwned\x07",
]
HOSTILE_TEXT = st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join)
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
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="abcxyz", max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
TERMINAL_HOSTILE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
FAST = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def fresh_db():
    client = mongomock.MongoClient("mongodb://localhost:27017/likeastore_test", tz_aware=True)
    return client, client.get_default_database()


def run_cli(monkeypatch, client, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: client)
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    try:
        code = cli.main(argv)
    except SystemExit as exit:
        code = int(exit.code or 0)
    return code, out.getvalue(), err.getvalue()


# --- 1. text from outside never drives a terminal --------------------------------------------------------------
@FAST
@given(
    service=HOSTILE_TEXT, user=HOSTILE_TEXT, kind=HOSTILE_TEXT, owner=HOSTILE_TEXT, instance=HOSTILE_TEXT, mode=VALUES
)
def test_no_control_character_reaches_the_terminal(monkeypatch_session, service, user, kind, owner, instance, mode):
    client, db = fresh_db()
    now = utcnow()
    doc = {
        "service": service,
        "user": user,
        "mode": mode,
        "errors": 2,
        "lastError": {"kind": kind, "at": now},
        "accessToken": TOKEN,
        "leaseOwner": owner,
        "leaseUntil": now + timedelta(minutes=1),
    }
    network_id = db.networks.insert_one(doc).inserted_id
    db.networks.insert_one({"_id": user or "x", "service": service, "user": user, "accessToken": TOKEN})
    db.collectors.insert_one({"_id": instance or "y", "mode": mode, "heartbeatAt": now, "host": service})
    for argv in (
        ["status"],
        ["status", "--check"],
        ["networks", "list"],
        ["networks", "reset", str(network_id)],
        ["networks", "enable", str(network_id)],
    ):
        code, out, err = run_cli(monkeypatch_session, client, argv)
        assert not TERMINAL_HOSTILE.search(out + err), (argv, out + err)
        assert "Traceback" not in err
    for argv in (["status", "--json"], ["networks", "list", "--json"], ["networks", "show", str(network_id)]):
        code, out, err = run_cli(monkeypatch_session, client, argv)
        assert code == 0 and out.isascii()
        json.loads(out, parse_constant=lambda c: pytest.fail(f"non-RFC 8259 constant {c}"))
    code, out, err = run_cli(monkeypatch_session, client, ["status", "--check"])
    assert len(out.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def monkeypatch_session():
    mp = pytest.MonkeyPatch()
    mp.setenv("COLLECTOR_ENV", "test")
    yield mp
    mp.undo()


@given(user=HOSTILE_TEXT, message=HOSTILE_TEXT)
@settings(max_examples=examples(50), deadline=None)
def test_a_text_log_record_is_one_line_whatever_it_quotes(user, message):
    from collector.textout import EscapingFormatter

    formatter = EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    record = logging.LogRecord(
        "collector.run", logging.INFO, __file__, 1, "run user=%s error=%s", (user, message), None
    )
    line = formatter.format(record)
    assert "\n" not in line and not TERMINAL_HOSTILE.search(line)
    try:
        raise ValueError(message)
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    lines = formatter.format(record).split("\n")
    assert all(line.startswith("  ") for line in lines[1:]) and not TERMINAL_HOSTILE.search("".join(lines))


def test_a_text_log_lines_time_is_loggings_own_within_a_second_and_across_seconds():
    from collector.textout import EscapingFormatter

    ours, loggings = (f("%(asctime)s %(message)s") for f in (EscapingFormatter, logging.Formatter))
    for created in (1765000000.004, 1765000000.999, 1765000001.0, 1765000001.5, 1764999999.25, 1765000000.004):
        record = logging.LogRecord("collector.run", logging.INFO, __file__, 1, "run", None, None)
        record.created, record.msecs = created, int((created - int(created)) * 1000)
        assert ours.format(record) == loggings.format(record)
        assert ours.formatTime(record, "%H:%M") == loggings.formatTime(record, "%H:%M")


def test_the_daemons_records_collect_no_caller_thread_or_process_and_its_lines_are_the_same(capsys):
    made: list[logging.LogRecord] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            made.append(record)

    logs.setup_logging("INFO")
    logging.getLogger().addHandler(Kept())
    logging.getLogger("collector.run").info("run service=%s user=%s", "github", "u@x")
    line = capsys.readouterr().err.strip()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO collector.run: run service=github user=u@x", line)
    (record,) = made
    assert record.funcName == "(unknown function)" and record.thread is None and record.process is None


def test_a_json_log_line_is_strict_ascii_json(capsys):
    logs.setup_logging("INFO", "json")
    try:
        logging.getLogger("collector.run").info("run user=%s", "a\u202eb\nc", extra={"run": {"ratio": float("nan")}})
    finally:
        logs.setup_logging("WARNING")
    line = capsys.readouterr().err.strip()
    assert line.isascii() and "\n" not in line
    record = json.loads(line, parse_constant=lambda c: pytest.fail(c))
    assert record["message"] == "run user=a\u202eb\nc" and record["ratio"] is None


# --- 2. any document shape: never a traceback, never a false verdict --------------------------------------------
@FAST
@given(
    docs=st.lists(
        st.dictionaries(
            st.sampled_from(
                ["_id", "mode", "heartbeatAt", "heartbeatSeconds", "inflight", "lastMinute", "host", "pid"]
            ),
            VALUES,
        ),
        max_size=5,
    )
)
def test_status_reads_any_heartbeat_document_and_only_a_real_live_one_counts(docs):
    _, db = fresh_db()
    now = utcnow()
    db.networks.insert_one({"service": "github", "mode": "normal", "accessToken": TOKEN, "user": "a@x.test"})
    for k, doc in enumerate(docs):
        doc["_id"] = k
        db.collectors.insert_one(doc)
    status = gather(db, now, 15)
    render(status)
    for i in status["instances"]:
        doc = docs[int(i["instance"])]
        beat = doc.get("heartbeatAt")
        if i["live"]:  # only a heartbeat neither older than its (bounded) interval allows nor in the future
            assert isinstance(beat, datetime) and -60 <= (now - beat).total_seconds() <= 3 * 3600
    code, line = check(status, None or __import__("collector.settings").settings.settings_for_tests())
    live_normal = any(i["live"] and i["mode"] == "normal" for i in status["instances"])
    assert (code == CRITICAL) == (not live_normal) and "\n" not in line
    # one real, fresh heartbeat among the garbage: the mode is served, whatever else the collection holds
    Store(db).beat("real", {"mode": "normal", "heartbeatAt": now, "heartbeatSeconds": 15})
    code, line = check(gather(db, now, 15), __import__("collector.settings").settings.settings_for_tests())
    assert "no live collector" not in line


def test_a_heartbeat_from_the_future_or_claiming_a_year_is_not_live():
    _, db = fresh_db()
    now = utcnow()
    db.collectors.insert_many(
        [
            {"_id": "future", "mode": "normal", "heartbeatAt": now + timedelta(days=365), "heartbeatSeconds": 15},
            {"_id": "year", "mode": "normal", "heartbeatAt": now - timedelta(days=30), "heartbeatSeconds": 366 * 86400},
            {"_id": "nan", "mode": "normal", "heartbeatAt": now - timedelta(hours=2), "heartbeatSeconds": float("inf")},
            {"_id": "text", "mode": "normal", "heartbeatAt": now.isoformat(), "heartbeatSeconds": "15"},
        ]
    )
    status = gather(db, now, 15)
    assert [i["live"] for i in status["instances"]] == [False, False, False, False]
    assert status["instances"][0]["clockAhead"] and "ahead" in render(status)


# --- 3. secrets anywhere in a document stay secret ---------------------------------------------------------------
NESTED = {
    "oauth": {"token": "nested-oauth-token-1", "tokenSecret": "nested-secret-2"},
    "auth": {"accessToken": "nested-access-3", "list": [{"password": "pw-in-a-list-4"}]},
    "apiKey": "api-key-value-5",
    "secret": "plain-secret-6",
    "notes": "see ghp_" + "A" * 36 + " and eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
}
NESTED_VALUES = [
    "nested-oauth-token-1",
    "nested-secret-2",
    "nested-access-3",
    "pw-in-a-list-4",
    "api-key-value-5",
    "plain-secret-6",
    "ghp_" + "A" * 36,
    "eyJzdWIiOiIxMjM0In0",
]


def test_networks_show_masks_secrets_by_name_at_any_depth_and_by_shape(monkeypatch_session):
    client, db = fresh_db()
    network_id = db.networks.insert_one(
        {"service": "github", "user": "a@x.test", "accessToken": TOKEN, **NESTED}
    ).inserted_id
    code, out, _ = run_cli(monkeypatch_session, client, ["networks", "show", str(network_id)])
    assert code == 0
    for value in [TOKEN, *NESTED_VALUES]:
        assert value not in out, value
    shown = json.loads(out)
    assert shown["oauth"] == {"token": "***", "tokenSecret": "***"} and shown["auth"]["list"] == [{"password": "***"}]


@pytest.mark.system
def test_the_claims_command_log_over_a_real_socket_never_shows_a_nested_token(caplog):
    from pymongo import MongoClient

    from collector.devtools.mongowire import WireServer
    from collector.engine import Collector
    from collector.settings import settings_for_tests

    with WireServer() as wire:
        client = MongoClient(wire.uri, tz_aware=True)
        db = client.get_default_database()
        db.networks.insert_one({"service": "nosuch", "user": "a@x.test", "accessToken": TOKEN, **NESTED})
        with caplog.at_level(logging.DEBUG):
            collector = Collector(db, settings_for_tests())
            collector.run_pass("initial")
            collector.close()
        client.close()
    logged = caplog.text
    assert '\\"tokenSecret\\": \\"***\\"' in logged  # the claim's reply was logged, masked by its field name
    for value in [TOKEN, *NESTED_VALUES[:6]]:
        assert value not in logged, value


# --- 4. every network can be addressed ---------------------------------------------------------------------------
IDS = st.one_of(
    st.builds(ObjectId),
    st.text(min_size=0, max_size=30),
    st.from_regex(r"[0-9a-f]{24}", fullmatch=True),
    st.from_regex(r"-?[0-9]{1,12}", fullmatch=True),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.dictionaries(
        st.sampled_from(["a", "b", "user"]), st.one_of(st.integers(-5, 5), st.text(max_size=5)), min_size=1, max_size=2
    ),
    st.builds(lambda u: Binary(u.bytes, 4), st.uuids()),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9).filter(lambda f: f != int(f)),
    # (Decimal128 ids are valid BSON, but mongomock cannot index them: it hashes the _id)
)


@FAST
@given(network_id=IDS)
@example(network_id=-7.597495733651587e-38)  # a leading "-" would read as an option on the command line
@example(network_id="-abc")
@example(network_id="6b0eef6be1dc6017ccd542b3")  # a string that looks like an ObjectId
@example(network_id="123")  # a string that looks like an integer
def test_an_id_printed_by_list_is_accepted_back_by_show_enable_and_reset(monkeypatch_session, network_id):
    client, db = fresh_db()
    db.networks.insert_one(
        {
            "_id": network_id,
            "service": "github",
            "user": "a@x.test",
            "accessToken": TOKEN,
            "disabled": True,
            "errors": 5,
        }
    )
    db.networks.insert_one({"_id": "decoy", "service": "github", "user": "b@x.test", "accessToken": TOKEN})
    code, out, _ = run_cli(monkeypatch_session, client, ["networks", "list", "--json"])
    printed = [row["id"] for row in json.loads(out) if row["user"] == "a@x.test"]
    assert len(printed) == 1
    code, out, err = run_cli(monkeypatch_session, client, ["networks", "show", printed[0]])
    assert code == 0, err
    assert json.loads(out)["user"] == "a@x.test"
    code, out, err = run_cli(monkeypatch_session, client, ["networks", "enable", printed[0]])
    assert code == 0 and "cleared disabled" in out, out + err
    code, out, err = run_cli(monkeypatch_session, client, ["networks", "reset", printed[0]])
    assert code == 0 and "-> initial" in out, out + err
    assert db.networks.find_one({"user": "a@x.test"})["mode"] == "initial"
    assert "mode" not in db.networks.find_one({"_id": "decoy"})


def test_read_only_commands_and_dry_runs_create_nothing(monkeypatch_session, http_mock):
    client, db = fresh_db()
    network_id = db.networks.insert_one(
        {"service": "github", "user": "a@x.test", "accessToken": TOKEN, "disabled": True}
    ).inserted_id
    before = {name: db[name].index_information() for name in db.list_collection_names()}
    monkeypatch_session.setenv("GITHUB_API_URL", "https://api.github.test")
    for argv in (
        ["status"],
        ["status", "--json"],
        ["status", "--check"],
        ["networks", "list"],
        ["networks", "show", str(network_id)],
        ["networks", "enable", str(network_id), "--dry-run"],
        ["networks", "reset", str(network_id), "--dry-run"],
        ["networks", "run", str(network_id), "--dry-run"],
    ):
        run_cli(monkeypatch_session, client, argv)
        after = {name: db[name].index_information() for name in db.list_collection_names()}
        assert after == before, argv
    monkeypatch_session.delenv("GITHUB_API_URL")


# --- 6. descriptors run out: the collector's trouble, never a network's ------------------------------------------
def test_running_out_of_descriptors_charges_no_network(db, settings, http_mock):
    import errno

    import requests

    from collector.engine import Collector
    from collector.sdk.errors import exhausted
    from collector.sdk.http import Http

    def no_descriptor(*args, **kwargs):
        raise requests.ConnectionError(OSError(errno.EMFILE, "Too many open files"))

    from helpers import add_network

    doc = add_network(db, mode="normal", errors=1, lastError={"kind": "transient"})
    collector = Collector(db, settings)
    http = collector.http
    assert isinstance(http, Http)
    http.session.send = no_descriptor  # type: ignore[method-assign]  # every request goes through send
    report = collector.run_pass("normal")
    collector.close()
    saved = db.networks.find_one({"_id": doc["_id"]})
    assert report.by_status == {"interrupted": 1}
    assert saved["errors"] == 1 and saved["lastError"] == {"kind": "transient"} and "disabled" not in saved
    assert collector.exhausted_at is not None and exhausted(OSError(errno.ENFILE, "x"))


@pytest.mark.system
def test_through_real_processes_a_hostile_user_forges_no_log_line_and_no_terminal_escape(tmp_path):
    from collector.devtools.mongowire import WireServer

    from helpers.proc import run, start, write_env

    forged = "x@y.test\n2026-12-01 00:00:00,000 INFO collector.run: run service=github user=boss status=ok"
    with WireServer() as wire:
        client = __import__("pymongo").MongoClient(wire.uri)
        db = client.get_default_database()
        db.networks.insert_one({"user": forged, "service": "no\x1b]0;title\x07such", "accessToken": TOKEN})
        db.collectors.insert_one({"_id": "evil\x1b[2J\u202e", "mode": "normal", "heartbeatAt": utcnow()})
        env_file = write_env(tmp_path / "collector.env", MONGODB_URI=wire.uri, LOG_LEVEL="INFO")
        log = tmp_path / "collector.log"
        assert start(["--mode", "initial", "--once"], env_file, log).wait(60) == 0
        outputs = [run(argv, env_file) for argv in (["status"], ["networks", "list"], ["status", "--check"])]
        client.close()
    text = log.read_text()
    assert "run service=github user=boss" not in [line.split(": ", 1)[-1] for line in text.splitlines()]
    assert "\\n2026-12-01 00:00:00,000 INFO collector.run" in text  # the forged line stays inside its record
    for result in outputs:
        assert not TERMINAL_HOSTILE.search(result.stdout + result.stderr), result
    assert "evil\\x1b[2J\\u202e" in outputs[0].stdout
