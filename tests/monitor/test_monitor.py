"""The monitor in process, on mongomock: what a refresh reads and shows, whatever the documents hold; the actions
refused without the token and done with it, recorded as the CLI's are."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import mongomock
import pytest

from collector.monitor import actions, app, view
from collector.monitor.httpd import Request

HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>\x1b[31m\u202e'
TOKEN = "monitor-token-0123456789"


@pytest.fixture
def db():
    return mongomock.MongoClient(tz_aware=True)["monitor"]


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def make(db, token: str = "", clock=now) -> app.Monitor:
    return app.Monitor(db, token=token, heartbeat_seconds=15, version="9.9", clock=clock)


def snapshot(monitor: app.Monitor) -> dict:
    asyncio.run(monitor.refresh())
    return json.loads(monitor.snapshot)


def request(path: str, body: object = None, token: str | None = None, kind="application/json", host="127.0.0.1:8089"):
    headers = {"host": host, "content-type": kind}
    if token is not None:
        headers["x-monitor-token"] = token
    raw = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
    return Request("POST", path, {}, headers, raw, "127.0.0.1")


def answer(monitor: app.Monitor, req: Request) -> tuple[int, dict]:
    got = asyncio.run(monitor.handle(req))
    return got.status, json.loads(got.body)


def test_a_refresh_shows_the_fleet_its_rates_and_the_work(db):
    at = now()
    beat = {
        "mode": "normal",
        "startedAt": at - timedelta(hours=1),
        "heartbeatAt": at,
        "heartbeatSeconds": 15,
        "statsSeconds": 1,
        "version": "9.9",
        "host": "box",
        "pid": 7,
        "services": {"only": ["github"]},
        "process": {"rssBytes": 64 * 2**20, "cpuSeconds": 10.0},
    }
    db.collectors.insert_one({"_id": "c1", **beat, "statsAt": at, "sinceStart": {"runs": {"ok": 5}, "newItems": 1}})
    db.networks.insert_many(
        [
            {"user": "a@x", "service": "github", "mode": "normal", "scheduledTo": at - timedelta(seconds=30)},
            {"user": "b@x", "service": "gist", "scheduledTo": at + timedelta(hours=1)},
        ]
    )
    db.control.insert_one(
        {"_id": "pause:initial:*", "mode": "initial", "service": "*", "reason": "deploy", "by": "ann@box", "at": at}
    )
    clock = iter([at, at + timedelta(seconds=1)])
    monitor = make(db, clock=lambda: next(clock))
    first = snapshot(monitor)
    db.collectors.update_one(
        {"_id": "c1"},
        {
            "$set": {
                "statsAt": at + timedelta(seconds=1),
                "sinceStart": {"runs": {"ok": 9, "network": 1}, "newItems": 21},
                "process": {"rssBytes": 64 * 2**20, "cpuSeconds": 10.25},
            }
        },
    )
    second = snapshot(monitor)
    assert first["database"]["ok"] and first["monitor"] == {
        "version": "9.9",
        "actions": False,
        "viewers": 0,
        "connections": 0,
        "accepted": 0,
        "heldBytes": 0,
        "cut": {},
        "refreshes": 1,
        "commands": None,
    }
    (row,) = second["fleet"]
    assert row["id"] == "c1" and row["alive"] and row["services"] == "github" and row["uptimeS"] == 3601.0
    assert row["rates"]["runs"] == 5.0 and row["rates"]["newItems"] == 20.0 and row["cpuPercent"] == 25.0
    assert second["rates"]["errors"] == 1.0 and second["rates"]["errorsByKind"] == {"network": 1.0}
    assert second["point"]["by"]["c1"]["runs"] == 5.0
    work = second["work"]
    assert (
        work["modes"]["normal"]["due"] == 1 and work["modes"]["normal"]["lagS"] == 30.0
    )  # the work as read at the first refresh
    assert work["modes"]["initial"]["due"] == 0 and work["modes"]["initial"]["networks"] == 1
    assert [s["service"] for s in work["services"]] == ["github", "gist"]
    assert work["pauses"][0]["by"] == "ann@box" and work["behind"][0]["user"] == "a@x"
    history = json.loads(monitor.history_event().split(b"data: ", 1)[1])
    assert len(history["points"]) == 2 and history["points"][1]["total"]["runs"] == 5.0


def test_a_collector_whose_stats_stop_is_stale_before_its_heartbeat_would_say_so(db):
    at = now()
    db.collectors.insert_one(
        {
            "_id": "c1",
            "mode": "normal",
            "heartbeatAt": at,
            "heartbeatSeconds": 15,
            "statsAt": at - timedelta(seconds=10),
            "statsSeconds": 1,
        }
    )
    db.collectors.insert_one({"_id": "old", "mode": "initial", "heartbeatAt": at, "heartbeatSeconds": 15})
    rows = {r["id"]: r for r in snapshot(make(db))["fleet"]}
    assert not rows["c1"]["alive"]
    assert rows["old"]["alive"]  # a collector without the stats beat is judged by its heartbeat


def test_hostile_documents_reach_the_page_as_bounded_printable_text_with_secrets_masked(db):
    at = now()
    secret = "s3cr3t-token-abcdefgh"
    db.collectors.insert_one(
        {
            "_id": HOSTILE * 50,
            "mode": HOSTILE,
            "host": HOSTILE,
            "heartbeatAt": at,
            "version": {"$x": 1},
            "statsAt": at,
            "running": [{"network": HOSTILE, "user": HOSTILE * 100}] * 5000,
            "sinceStart": {"runs": {HOSTILE: 1e300}},
            "process": {"rssBytes": -5},
        }
    )
    db.networks.insert_one(
        {
            "_id": HOSTILE,
            "user": HOSTILE * 100,
            "service": HOSTILE,
            "accessToken": secret,
            "errors": 3,
            "lastError": {"kind": HOSTILE, "message": f"echoed {secret} " + "x" * 10_000, "at": at},
        }
    )
    shown = snapshot(make(db))
    text = json.dumps(shown)
    assert secret not in text and "\x1b" not in text and "\u202e" not in text
    (row,) = shown["fleet"]
    assert len(row["id"]) <= 80 and len(row["running"]) <= 20 and row["rssBytes"] is None
    (error,) = shown["work"]["errors"]
    assert error["message"].startswith("echoed *** ") and len(error["message"]) <= view.MESSAGE
    assert error["user"].startswith('<img src=x onerror="window.pwned=1">')  # text, for the page to show as text
    found = asyncio.run(
        make(db).handle(Request("GET", "/api/networks", {"q": [HOSTILE]}, {"host": "localhost"}, b"", "127.0.0.1"))
    )
    listed = json.loads(found.body)["networks"]
    assert len(listed) == 1 and secret not in found.body.decode() and listed[0]["document"]["accessToken"] == "***"


def test_actions_are_refused_without_a_token_configured_or_with_a_wrong_one_and_nothing_changes(db):
    for monitor, sent in ((make(db), TOKEN), (make(db, TOKEN), None), (make(db, TOKEN), TOKEN + "x")):
        status, body = answer(monitor, request("/api/pause", {"mode": "normal"}, sent))
        assert status == 403 and not body["ok"]
    assert db.control.count_documents({}) == 0
    status, body = answer(make(db, TOKEN), request("/api/pause", b"mode=normal", TOKEN, kind="text/plain"))
    assert status == 415 and db.control.count_documents({}) == 0
    assert answer(make(db, TOKEN), request("/api/pause", {"mode": "<b>"}, TOKEN))[0] == 400
    assert answer(make(db, TOKEN), request("/api/pause", b"{not json", TOKEN))[0] == 400
    assert answer(make(db, TOKEN), request("/api/drop", {}, TOKEN))[0] == 404


def test_with_the_token_pause_and_resume_are_recorded_as_the_cli_records_them(db):
    monitor = make(db, TOKEN)
    status, body = answer(
        monitor, request("/api/pause", {"mode": "normal", "service": "github", "reason": "reindexing"}, TOKEN)
    )
    assert status == 200 and body == {"ok": True, "message": "paused mode normal, service github: reindexing"}
    pause = db.control.find_one({"_id": "pause:normal:github"})
    assert pause["by"] == "monitor (127.0.0.1)" and pause["reason"] == "reindexing" and pause["at"] is not None
    assert answer(monitor, request("/api/resume", {"mode": "normal", "service": "github"}, TOKEN))[0] == 200
    assert db.control.count_documents({}) == 0
    status, body = answer(monitor, request("/api/resume", {"mode": "normal"}, TOKEN))
    assert status == 409 and body["message"].startswith("no pause for mode normal")


def test_with_the_token_a_network_is_enabled_or_reset(db):
    net = db.networks.insert_one(
        {
            "user": "a@x",
            "service": "github",
            "mode": "normal",
            "disabled": True,
            "errors": 5,
            "lastError": {"kind": "network"},
            "page": 7,
        }
    ).inserted_id
    monitor = make(db, TOKEN)
    status, body = answer(monitor, request("/api/networks/enable", {"id": str(net)}, TOKEN))
    assert status == 200 and "cleared disabled" in body["message"]
    assert answer(monitor, request("/api/networks/reset", {"id": str(net)}, TOKEN))[0] == 200
    doc = db.networks.find_one({"_id": net})
    assert doc["mode"] == "initial" and "page" not in doc and "disabled" not in doc and doc["errors"] == 0
    status, body = answer(monitor, request("/api/networks/reset", {"id": "0" * 24}, TOKEN))
    assert status == 409 and body["message"].startswith("no network with id")


def test_a_page_of_another_site_resolving_here_is_refused():
    allowed = frozenset({"monitor.example.org"})
    for host in ("127.0.0.1:8089", "localhost:8089", "[::1]:8089", "10.0.0.5", "monitor.example.org"):
        assert app.local_host(host, allowed), host
    for host in ("evil.example.com:8089", "", "127.0.0.1.evil.com"):
        assert not app.local_host(host, allowed), host


def test_the_database_thread_takes_a_bounded_queue_of_requests(db):
    monitor = make(db, TOKEN)
    monitor.queued = app.QUEUED
    status, body = answer(monitor, request("/api/pause", {"mode": "normal"}, TOKEN))
    assert status == 503 and db.control.count_documents({}) == 0
    with pytest.raises(actions.Busy):
        asyncio.run(monitor.on_db(lambda: None))


def test_junk_collector_documents_dated_in_the_future_cannot_hide_the_fleet(db, monkeypatch):
    from collector.monitor import reading

    monkeypatch.setattr(reading, "MAX_COLLECTORS", 5)
    at = now()
    db.collectors.insert_many(
        [{"_id": f"junk{n}", "heartbeatAt": datetime(9999, 1, 1, tzinfo=UTC), "statsAt": at} for n in range(20)]
    )
    db.collectors.insert_one({"_id": "real", "mode": "normal", "heartbeatAt": at, "statsAt": at})
    assert [row["id"] for row in snapshot(make(db))["fleet"]] == ["real"]


def test_a_credential_nested_anywhere_in_a_network_is_masked_in_the_errors_table(db):
    db.networks.insert_one(
        {
            "user": "a@x",
            "service": "github",
            "oauth": {"token": "nested-credential-12345", "password": "pass-word-6789"},
            "lastError": {"kind": "network", "message": "sent nested-credential-12345 and pass-word-6789", "at": now()},
        }
    )
    (error,) = snapshot(make(db))["work"]["errors"]
    assert error["message"] == "sent *** and ***"


def test_actions_take_only_a_mode_and_a_service_by_name_and_refusals_are_logged_once_a_minute(db, caplog):
    monitor = make(db, TOKEN)
    for body in ({"mode": 0}, {"mode": "normal", "service": "   "}, {"service": 5}, {"mode": ["normal"]}):
        status, _ = answer(monitor, request("/api/pause", body, TOKEN))
        assert status == 400, body
    assert db.control.count_documents({}) == 0
    with caplog.at_level("WARNING", logger="collector.monitor"):
        for _ in range(5):
            answer(monitor, request("/api/pause", {"mode": "normal"}, "guess"))
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1 and "from 127.0.0.1" in refused[0]


def test_a_token_outside_ascii_is_compared_as_the_bytes_a_browser_sends(db):
    token = "jeton-éèà-0123456789"
    monitor = make(db, token)
    sent = token.encode("utf-8").decode("latin-1")  # how the server reads the header's bytes
    assert answer(monitor, request("/api/pause", {"mode": "normal"}, sent))[0] == 200


def test_the_monitors_client_reads_any_date_and_any_string_another_program_wrote():
    from bson.codec_options import DatetimeConversion

    from collector.monitor import serve

    client = serve.client("mongodb://127.0.0.1:1/likeastore")
    assert client.codec_options.datetime_conversion == DatetimeConversion.DATETIME_AUTO
    assert client.codec_options.unicode_decode_error_handler == "replace"
    client.close()


def test_the_work_is_read_every_refresh_while_quick_and_at_most_a_tenth_of_the_time_when_slow():
    from collector.monitor.reading import Cadence

    cadence = Cadence(1.0)
    assert cadence.due(0.0)
    cadence.took(0.05, now=0.05)  # quick: due again at the next refresh, a second later
    assert cadence.due(1.05)
    cadence.took(2.0, now=3.0)  # two seconds to read: not again for twenty
    assert not cadence.due(3.0 + 19.0) and cadence.due(3.0 + 20.0)
    cadence.took(30.0, now=100.0)  # never less often than once a minute
    assert cadence.due(100.0 + Cadence.MAX_WORK_EVERY)


def test_the_address_listened_on_and_the_machine_s_names_are_its_own():
    import socket

    for host, header in (
        ("monitor.example.org", "monitor.example.org:8089"),
        ("Box.Lan.", "box.lan"),
        ("[::1]", "[::1]:8089"),
        ("0.0.0.0", "0.0.0.0:8089"),
    ):
        names = app.own_names(host)
        assert {"localhost", socket.gethostname().lower(), socket.getfqdn().lower().rstrip(".")} <= names
        assert app.local_host(header, names), (host, header)
        assert not app.local_host("other.example.org", names) and not app.local_host(f"x.{header}", names)
    assert not app.local_host("monitor.example.org", app.own_names("127.0.0.1"))


def test_the_networks_waiting_for_re_authorisation_are_named_first_by_id_printable(db):
    from bson import ObjectId

    ids = [ObjectId(f"6b14{k:020x}") for k in range(12)]
    for k, network_id in enumerate(ids):
        user = "evil\x1b[31m@x.test" if k == 0 else f"u{k}@x.test"
        db.networks.insert_one({"_id": network_id, "user": user, "service": "github", "unauthorized": True})
    db.networks.insert_one({"_id": "@odd", "user": "odd@x.test", "service": "reddit", "unauthorized": True})
    for flag in ("true", 1, False, None):  # only the flag the collector writes counts
        db.networks.insert_one({"user": f"flag-{flag}@x.test", "service": "github", "unauthorized": flag})
    shown = snapshot(make(db))["work"]["renewals"]
    assert len(shown) == 10  # the first ten by id (BSON's order: a string before an ObjectId); --check counts all
    assert shown[0] == {"id": '"@odd"', "user": "odd@x.test", "service": "reddit"}  # an id that reads back as one
    assert [r["id"] for r in shown[1:3]] == [str(ids[0]), str(ids[1])] and "\x1b" not in shown[1]["user"]
    assert not any(r["user"].startswith("flag-") for r in shown)
    db.networks.update_many({}, {"$unset": {"unauthorized": ""}})
    assert snapshot(make(db))["work"]["renewals"] == []
