"""The operator can see why a sink is refused: a sink whose every delivery fails (a redirect, a 4xx, a 5xx, a TLS
failure, a connection refused) logs it once (WARNING, masked, printable), keeps `failing: {since, at, reason}` in
its document, shows FAILING with the reason in `collector sinks status` (text and JSON), warns in `status --check`
once it lasted SINK_FAILING_WARN, and in the monitor; the first delivery that goes through clears it and says so
once (INFO). Real receivers on 127.0.0.1; time passed in."""

from __future__ import annotations

import json
import logging
import random
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from collector.jsonout import dumps
from collector.monitor import reading, view
from collector.ops import sinks as ops_sinks
from collector.ops import sinksview, statuscheck
from collector.settings import load_settings
from collector.sinks.service import SinkService
from collector.sinks.store import SINKS

from helpers import free_port
from helpers.fakesink import Clock, add_items, run
from helpers.sinkservers import WEBHOOK_SECRET, Reply, WebhookReceiver, self_signed

pytestmark = pytest.mark.system

PASSWORD = "pw-Zq8vN3kLr5tY"  # SINK_SEARCH_PASSWORD, echoed back by a hostile cluster


def webhook_settings(url: str):
    environ = {
        "SINKS": "hooks",
        "SINK_HOOKS_KIND": "webhook",
        "SINK_HOOKS_URL": url,
        "SINK_HOOKS_SECRET": WEBHOOK_SECRET,
        "ALLOW_PRIVATE_HOSTS": "true",
    }
    return load_settings(environ=environ, env="test", read_dotenv=False)


def failing_lines(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"sink {name} is failing")]


def recovered_lines(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"sink {name} recovered")]


def check_failing(db, settings, name: str, now, expected: str) -> dict:
    """What the operator sees of a failing sink: its document, `sinks status` as text and JSON, the monitor."""
    doc = db[SINKS].find_one({"_id": name})
    failing = doc["failing"]
    assert failing["since"] <= failing["at"] <= now and expected in failing["reason"]
    report = ops_sinks.gather(db, now, settings.sinks)
    (row,) = report["sinks"]
    assert row["failing"]["since"] == failing["since"] and expected in row["failing"]["reason"]
    text = sinksview.render_status(report)
    assert "FAILING" in text and "failing since" in text and expected in text
    assert json.loads(dumps(report))["sinks"][0]["failing"]["reason"] == row["failing"]["reason"]
    (shown,) = view.sinks(reading.read_sinks(db), now)["rows"]  # the monitor: one find on `sinks`
    assert shown["state"] == "FAILING" and expected in shown["failing"]["reason"]
    assert shown["failing"]["since"] == failing["since"]
    return failing


def check_warns_after_the_bound(db, settings, name: str, since, expected: str) -> None:
    before = ops_sinks.gather(db, since + timedelta(seconds=statuscheck.SINK_FAILING_WARN - 1), settings.sinks)
    assert f"sink {name} failing" not in statuscheck.check({"modes": {}, "instances": [], "sinks": before}, settings)[1]
    after = ops_sinks.gather(db, since + timedelta(seconds=statuscheck.SINK_FAILING_WARN + 1), settings.sinks)
    code, line = statuscheck.check({"modes": {}, "instances": [], "sinks": after}, settings)
    assert code == statuscheck.WARNING
    assert f"sink {name} failing since {since:%Y-%m-%d %H:%M} UTC" in line and expected in line


def check_recovered(db, settings, name: str, caplog, now) -> None:
    assert "failing" not in db[SINKS].find_one({"_id": name})
    assert len(recovered_lines(caplog, name)) == 1
    report = ops_sinks.gather(db, now, settings.sinks)
    assert report["sinks"][0]["failing"] is None and sinksview.state_word(report["sinks"][0]) == "ok"
    assert "failing" not in statuscheck.check({"modes": {}, "instances": [], "sinks": report}, settings)[1]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(308, {"Location": "https://elsewhere.test/hooks"}), "308: redirect not followed"),
        (Reply(302, {"Location": "/login"}), "302: redirect not followed"),
        (Reply(404, body=b"no route"), "404: batch refused by the receiver"),
        (Reply(400, body=b'{"error": "bad request"}'), "400: batch refused by the receiver"),
        (Reply(422, body=b"unprocessable"), "422: batch refused by the receiver"),
        (Reply(500, body=f"internal error, secret {WEBHOOK_SECRET}".encode()), "500: batch refused"),
        (Reply(503, {"Retry-After": "1"}), "503: batch refused"),
    ],
)
def test_a_receiver_refusing_every_batch_is_said_once_shown_warned_and_cleared(db, caplog, reply, expected):
    caplog.set_level(logging.INFO, logger="collector.sinks")
    add_items(db, 5)
    with WebhookReceiver() as receiver:
        receiver.replies = [reply] * 6  # a batch every other round (outcomes written, then due again)
        settings = webhook_settings(receiver.url)
        clock = Clock()
        svc = SinkService(db, settings, owner="one", clock=clock, rng=random.Random(3))
        run(svc, clock, rounds=3, tick=700)
        first = check_failing(db, settings, "hooks", clock(), expected)
        run(svc, clock, rounds=8, tick=700)  # more refused batches: the same streak, no other line
        failing = check_failing(db, settings, "hooks", clock(), expected)
        assert failing["since"] == first["since"] and failing["at"] > first["at"]
        assert len(receiver.batches) >= 5
        (line,) = failing_lines(caplog, "hooks")
        assert expected in line and WEBHOOK_SECRET not in line
        check_warns_after_the_bound(db, settings, "hooks", failing["since"], expected)
        run(svc, clock, rounds=4, tick=700)  # the receiver takes them now
        check_recovered(db, settings, "hooks", caplog, clock())
        assert len(failing_lines(caplog, "hooks")) == 1
        svc.stop(5)
    assert all(WEBHOOK_SECRET not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("broken", ["connection refused", "tls"])
def test_a_destination_that_cannot_be_reached_is_said_once_and_mended_by_new_settings(db, caplog, tmp_path, broken):
    caplog.set_level(logging.INFO, logger="collector.sinks")
    add_items(db, 4)
    with WebhookReceiver() as good:
        if broken == "tls":  # a receiver whose certificate no authority signed
            tls = WebhookReceiver(tls=self_signed(tmp_path)).__enter__()
            url = tls.url
        else:
            tls, url = None, f"http://127.0.0.1:{free_port()}/hooks/likes"
        try:
            settings = webhook_settings(url)
            clock = Clock()
            svc = SinkService(db, settings, owner="one", clock=clock, rng=random.Random(3))
            run(svc, clock, rounds=6, tick=700)
            failing = check_failing(db, settings, "hooks", clock(), "refused")
            assert len(failing_lines(caplog, "hooks")) == 1
            check_warns_after_the_bound(db, settings, "hooks", failing["since"], "refused")
            mended = webhook_settings(good.url)
            svc.apply_settings(mended)
            run(svc, clock, rounds=4, tick=700)
            check_recovered(db, mended, "hooks", caplog, clock())
            assert len(good.ids()) == 4
            svc.stop(5)
        finally:
            if tls is not None:
                tls.__exit__(None, None, None)


class HostileCluster:
    """An OpenSearch-like `_bulk` endpoint that fails every document with a reason echoing the sink's password
    (500, retried) or refusing it (400, rejected) until `healthy`."""

    def __init__(self, status: int):
        self.status, self.healthy, self.bulks = status, False, 0
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                ids = [json.loads(line)["index"]["_id"] for line in body.splitlines()[::2]]
                cluster.bulks += 1
                items = [{"index": cluster.result(i)} for i in ids]
                payload = json.dumps({"errors": not cluster.healthy, "items": items}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def result(self, doc_id: str) -> dict:
        if self.healthy:
            return {"_id": doc_id, "status": 201}
        reason = f"security: user likeastore with password {PASSWORD} \x1b[31mdenied\x1b[0m"
        return {"_id": doc_id, "status": self.status, "error": {"type": "internal", "reason": reason}}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(("status", "expected"), [(500, "500: internal"), (400, "400: internal")])
def test_every_document_failing_with_a_reason_echoing_the_secret_is_shown_masked(db, caplog, status, expected):
    caplog.set_level(logging.INFO, logger="collector.sinks")
    add_items(db, 3)
    cluster = HostileCluster(status)
    try:
        environ = {
            "SINKS": "search",
            "SINK_SEARCH_KIND": "opensearch",
            "SINK_SEARCH_URL": cluster.url,
            "SINK_SEARCH_USERNAME": "likeastore",
            "SINK_SEARCH_PASSWORD": PASSWORD,
            "SINK_MAX_TRIES": "50",
            "ALLOW_PRIVATE_HOSTS": "true",
        }
        settings = load_settings(environ=environ, env="test", read_dotenv=False)
        clock = Clock()
        svc = SinkService(db, settings, owner="one", clock=clock, rng=random.Random(3))
        run(svc, clock, rounds=9, tick=700)
        assert cluster.bulks >= 4
        failing = check_failing(db, settings, "search", clock(), expected)
        assert PASSWORD not in failing["reason"] and "***" in failing["reason"]
        (line,) = failing_lines(caplog, "search")
        assert PASSWORD not in line and "\x1b" not in line and "***" in line
        report = ops_sinks.gather(db, clock(), settings.sinks)
        assert PASSWORD not in sinksview.render_status(report) and "\x1b" not in sinksview.render_status(report)
        check_warns_after_the_bound(db, settings, "search", failing["since"], expected)
        cluster.healthy = True
        run(svc, clock, rounds=4, tick=700)
        check_recovered(db, settings, "search", caplog, clock())
        svc.stop(5)
    finally:
        cluster.close()
    assert all(PASSWORD not in r.getMessage() for r in caplog.records)
