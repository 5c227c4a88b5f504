"""Polls on the event loop (net/pollloop.py, engine/polls.py), through whole passes against servers on real sockets:
a 304 ends on the lane without a worker, a changed answer reaches the connector without a second request, and what
the lane does not judge itself takes the session's path, which behaves as it always did."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from collector import run_once
from collector.devtools.fakeapi import FakeGitHub, FakeServer, make_star, make_stars
from collector.engine import dispatch, polls
from collector.settings import settings_for_tests

from helpers import T0, TOKEN, add_network, network
from helpers.wireserver import CLOSE, WireServer, answer

ETAG = '"a1b2c3"'
MARKED = {"mode": "normal", "sinceLikedAt": T0 - timedelta(days=1), "etag": ETAG}


@pytest.fixture
def on_workers(monkeypatch):
    """Counts the runs handed to a worker (the dispatcher's and the lane's hand-overs)."""
    calls: list[object] = []
    real = dispatch.execute

    def counted(run, primed=None):
        calls.append(primed)
        return real(run, primed)

    monkeypatch.setattr(dispatch, "execute", counted)
    monkeypatch.setattr(polls, "execute", counted)
    return calls


def poll_settings(url: str, **more):
    return settings_for_tests(github_api_url=url, **more)


def walked(db, fake: FakeGitHub, url: str) -> tuple[dict, object]:
    """A network walked through its history and polled once (which keeps the ETag): ready for conditional polls."""
    settings = poll_settings(url)
    doc = add_network(db)
    for k in range(3):
        run_once(db, "initial", settings, now=T0 + timedelta(seconds=k))
    assert network(db, doc)["mode"] == "normal"
    run_once(db, "normal", settings, now=T0 + timedelta(seconds=settings.normal_interval + 5))
    assert network(db, doc).get("etag")
    return doc, settings


def test_a_poll_answered_304_ends_on_the_event_loop_without_a_worker(db, on_workers):
    fake = FakeGitHub()
    fake.add_user(TOKEN, make_stars(30, seed=2))
    with FakeServer(fake) as url:
        doc, settings = walked(db, fake, url)
        before, workers = fake.stats(), len(on_workers)
        later = T0 + timedelta(seconds=3 * settings.normal_interval)
        report = run_once(db, "normal", settings, now=later)
        after = fake.stats()
    assert report.by_status == {"ok": 1} and report.new_items == 0
    assert after["requests"] - before["requests"] == 1 and after["not_modified"] - before["not_modified"] == 1
    assert len(on_workers) == workers  # no worker was given the run
    saved = network(db, doc)
    assert saved["lastExecution"] == later and saved["scheduledTo"] > later and not saved.get("lastError")


def test_a_changed_poll_reaches_the_connector_with_its_answer_and_is_sent_once(db, on_workers):
    fake = FakeGitHub()
    fake.add_user(TOKEN, make_stars(30, seed=3))
    with FakeServer(fake) as url:
        doc, settings = walked(db, fake, url)
        stored = db.items.count_documents({})
        newest = network(db, doc)["sinceLikedAt"]
        fake.star(TOKEN, make_star(990_001, newest + timedelta(minutes=5)))
        before, workers = fake.stats(), len(on_workers)
        report = run_once(db, "normal", settings, now=T0 + timedelta(seconds=3 * settings.normal_interval))
        after = fake.stats()
    assert report.new_items == 1 and db.items.count_documents({}) == stored + 1
    assert after["requests"] - before["requests"] == 1  # the poll, read on the lane, was not sent again
    assert [primed is not None for primed in on_workers[workers:]] == [True]  # the worker got the answer
    assert network(db, doc)["sinceLikedAt"] == newest + timedelta(minutes=5)


def test_a_poll_past_its_deadline_is_transient_and_not_sent_again(db, on_workers):
    with WireServer(lambda request: [4.0]) as server:  # answers nothing before the 1 s deadline
        settings = poll_settings(server.url, http_timeout=1.0)
        doc = add_network(db, **MARKED)
        report = run_once(db, "normal", settings, now=T0)
        sent = len(server.requests)
    saved = network(db, doc)
    assert report.by_status == {"transient": 1} and sent == 1 and on_workers == []
    assert saved["lastError"]["kind"] == "transient"
    assert "deadline of 1s exceeded: GET 127.0.0.1/user/starred" in saved["lastError"]["message"]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (answer(401, b'{"message":"Bad credentials"}', {"Content-Type": "application/json"}), "unauthorized"),
        (answer(500, b"oops"), "transient"),
        (answer(403, b"{}", {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1893456000"}), None),
    ],
)
def test_an_error_answer_on_the_lane_is_judged_by_the_connector_from_that_one_answer(db, on_workers, reply, kind):
    with WireServer(lambda request: [reply]) as server:
        doc = add_network(db, **MARKED)
        run_once(db, "normal", poll_settings(server.url), now=T0)
        sent = len(server.requests)
    saved = network(db, doc)
    assert sent == 1 and [primed is not None for primed in on_workers] == [True]
    if kind is None:
        assert saved["mode"] == "rateLimit" and not saved.get("lastError")
    else:
        assert saved["lastError"]["kind"] == kind


@pytest.mark.parametrize(
    "reply",
    [
        [answer(103, headers={"Link": "</x>; rel=preload"}), answer(304, headers={"ETag": ETAG})],  # interim first
        [answer(304, headers={"ETag": ETAG}) + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"],  # bytes after it
        [b"HTTP/1.1 304 Not Modified\r\nBad Header Line\r\n\r\n"],  # unreadable
        [b"HTTP/1.1 200 OK\r\n", CLOSE],  # cut before the head's end
    ],
)
def test_what_the_lane_does_not_judge_takes_the_sessions_path_which_judges_it_as_always(db, on_workers, reply):
    """The lane gives up (`Unsent`): a worker sends the request again on the session's path, whose answer decides."""

    def script(request):
        return reply if request.number == 1 else [answer(304, headers={"ETag": ETAG})]

    with WireServer(script) as server:
        doc = add_network(db, **MARKED)
        report = run_once(db, "normal", poll_settings(server.url), now=T0)
        sent = len(server.requests)
    assert sent == 2 and on_workers == [None]  # the worker went without an answer, and asked again
    assert report.by_status == {"ok": 1} and not network(db, doc).get("lastError")


def test_a_redirect_is_followed_on_the_sessions_path_each_hop_checked(db, on_workers):
    def script(request):
        if request.path.startswith("/user/starred"):
            return [answer(301, headers={"Location": "/moved/starred?per_page=10&page=1"})]
        return [answer(304, headers={"ETag": ETAG})]

    with WireServer(script) as server:
        doc = add_network(db, **MARKED)
        report = run_once(db, "normal", poll_settings(server.url), now=T0)
        paths = [request.path.split("?")[0] for request in server.requests]
    assert paths == ["/user/starred", "/user/starred", "/moved/starred"] and on_workers == [None]
    assert report.by_status == {"ok": 1} and not network(db, doc).get("lastError")


def test_a_2xx_body_over_the_cap_is_refused_without_being_read_whole(db, on_workers):
    big = b"[" + b"0," * 40_000 + b"0]"
    with WireServer(lambda request: [answer(200, big)]) as server:
        doc = add_network(db, **MARKED)
        run_once(db, "normal", poll_settings(server.url, http_max_bytes=64 * 1024), now=T0)
        sent = len(server.requests)
    saved = network(db, doc)
    assert sent == 1 and on_workers == []
    assert saved["lastError"]["kind"] == "badResponse"
    assert (
        f"body of {len(big)} bytes exceeds the 65536-byte cap: GET 127.0.0.1/user/starred"
        in saved["lastError"]["message"]
    )


def test_the_poll_sends_what_the_session_would_send_and_no_secret_leaves_in_the_url(db):
    with WireServer(lambda request: [answer(304, headers={"ETag": ETAG})]) as server:
        add_network(db, **MARKED)
        run_once(db, "normal", poll_settings(server.url), now=T0)
        (request,) = server.requests
    head = request.head.decode("latin-1").lower()
    assert request.method == "GET" and request.path == "/user/starred?per_page=10&page=1"
    assert f"authorization: bearer {TOKEN}".lower() in head and f"if-none-match: {ETAG}".lower() in head
    assert "accept: application/vnd.github.star+json" in head and "x-github-api-version: 2022-11-28" in head
    assert f"host: 127.0.0.1:{server.port}" in head and "user-agent: " in head and "accept-encoding: " in head
    assert TOKEN.lower() not in request.path.lower() and "content-length" not in head  # a GET as the session sends it


def test_with_a_stand_in_for_requests_transport_every_request_takes_the_sessions_path(db, settings, http_mock):
    from helpers import STARRED

    http_mock.get(STARRED, status=304, headers={"ETag": ETAG})
    doc = add_network(db, **MARKED)
    report = run_once(db, "normal", settings, now=T0)
    assert report.by_status == {"ok": 1} and len(http_mock.calls) == 1 and not network(db, doc).get("lastError")


def test_requests_out_at_once_on_the_lane_stay_within_the_concurrency(db, on_workers, monkeypatch):
    lock, inside, most = threading.Lock(), [0], [0]
    prepared: list[object] = []
    real_prepare = dispatch.prepare

    def counted_prepare(claimed, *rest):
        prepared.append(claimed.network["_id"])
        return real_prepare(claimed, *rest)

    monkeypatch.setattr(dispatch, "prepare", counted_prepare)

    def enter():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])

    def leave():
        with lock:
            inside[0] -= 1

    with WireServer(lambda request: [enter, 0.2, leave, answer(304, headers={"ETag": ETAG})]) as server:
        docs = [add_network(db, **MARKED, user=f"u{k}@x", accessToken=f"token-{k}") for k in range(12)]
        report = run_once(db, "normal", poll_settings(server.url), now=T0, concurrency=3)
        sent = len(server.requests)
    assert report.by_status == {"ok": 12} and sent == 12 and on_workers == []
    assert 1 <= most[0] <= 3  # the lane's polls take the request slots the workers' requests take
    # a network waits for a slot unprepared: each is prepared once, not again at each look while slots are taken
    assert sorted(prepared) == sorted(doc["_id"] for doc in docs)
    assert all(not network(db, doc).get("lastError") for doc in docs)


def test_with_a_proxy_configured_no_request_goes_on_the_lane(monkeypatch):
    from collector.sdk import Http

    assert Http(settings_for_tests()).lane_speaks()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert not Http(settings_for_tests()).lane_speaks()


def test_a_service_whose_polls_wait_for_its_cap_holds_back_no_other_service(db):
    """GitHub at a cap of two requests at a time (four seats), its polls answered slowly: the gist networks claimed
    behind its third and fourth go out at once on workers, not after GitHub's answers."""

    def script(request):
        if request.path.startswith("/gists/"):
            return [answer(200, b"[]", {"Content-Type": "application/json"})]
        return [3.0, answer(304, headers={"ETag": ETAG})]

    with WireServer(script) as server:
        for k in range(4):
            add_network(db, **MARKED, user=f"g{k}@x", accessToken=f"gh-{k}", scheduledTo=T0 - timedelta(hours=2))
        for k in range(3):
            add_network(db, mode="normal", service="gist", user=f"s{k}@x", accessToken=f"gist-{k}", scheduledTo=T0)
        settings = poll_settings(server.url, service_concurrencies={"github": 2})
        report = run_once(db, "normal", settings, now=T0, concurrency=8)
        order = [request.path.split("?")[0] for request in server.requests]
    assert report.by_status == {"ok": 7}
    github = [n for n, path in enumerate(order) if path == "/user/starred"]
    gists = [n for n, path in enumerate(order) if path == "/gists/starred"]
    assert len(github) == 4 and len(gists) == 3
    assert max(gists) < github[2]  # not held behind GitHub's third and fourth polls, which wait for its answers


def test_a_primed_answer_is_for_the_get_it_was_asked_for_only(settings, http_mock):
    """Priming matches the URL before authentication and the headers the GET passes: another GET is sent."""
    from collector.net.pollloop import Answer
    from collector.sdk import Http
    from collector.sdk.http import Asked

    from helpers import STARRED

    http_mock.get(STARRED, status=200, json=[])
    http = Http(settings)
    asked = Asked(f"{STARRED}?per_page=10&page=1", {"If-None-Match": ETAG})
    with http.priming(asked, Answer(304, "Not Modified", [("ETag", ETAG)])):
        other = http.get(STARRED, params={"per_page": 10, "page": 1}, headers={"If-None-Match": '"another"'})
        same = http.get(STARRED, params={"per_page": 10, "page": 1}, headers={"If-None-Match": ETAG})
        again = http.get(STARRED, params={"per_page": 10, "page": 1}, headers={"If-None-Match": ETAG})
    assert other.status_code == 200 and same.status_code == 304 and again.status_code == 200
    assert len(http_mock.calls) == 2  # the primed answer served one GET, once


def test_a_header_the_lane_would_write_with_a_line_break_sends_the_poll_the_sessions_way(settings):
    from collector.sdk import Http, Poll
    from collector.sdk.auth import BearerAuth

    http = Http(settings)
    poll = Poll("http://127.0.0.1:9/user/starred", {"page": 1}, {"If-None-Match": ETAG})
    assert http.outgoing(poll, {}, BearerAuth("fine-token")) is not None
    assert http.outgoing(poll, {}, BearerAuth("bad\r\nX-Injected: 1")) is None


def test_every_worker_pool_gives_tickets_no_other_pool_gave():
    from collector.engine.workers import Workers

    first, second = Workers(2), Workers(2)
    tickets = [pool.submit(lambda: None, (), lambda finished: None) for pool in (first, second, first, second)]
    first.shutdown(), second.shutdown()
    assert len(set(tickets)) == 4 and min(tickets) > 0


def test_a_claim_ahead_that_hangs_stops_the_loop_telling_the_watchdog_it_goes_round(db, settings, monkeypatch, caplog):
    from collector.engine import Collector
    from collector.engine import dispatch as dispatching

    ticks: list[int] = []

    class Ticks:
        def on_tick(self, inflight: int) -> None:
            ticks.append(inflight)

    collector = Collector(db, settings)
    collector.observe(Ticks())
    dispatcher = collector.dispatcher
    monkeypatch.setattr(dispatching, "drain", lambda completions, timeout, gather=0.0: [])
    dispatcher.ahead.busy, dispatcher.ahead.since = True, time.monotonic()
    dispatcher.step()
    assert ticks == [0]  # out, not overdue: the loop goes round
    dispatcher.ahead.since = time.monotonic() - 3600
    dispatcher.step()
    assert ticks == [0] and "has not come back from the database" in caplog.text
    dispatcher.ahead.busy = False
    dispatcher.step()
    assert ticks == [0, 0]
    collector.close()


def test_polls_ending_one_by_one_are_gathered_and_a_historys_pages_are_not(db, monkeypatch):
    """In normal mode, with GATHER_FROM or more polls on the lane and few ended at the last look, the dispatcher
    lets GATHER_S pass after the first end; a history's pages (initial mode, on workers) are taken in at once."""
    from collector.engine import dispatch as dispatching

    gathers: dict[str, list[float]] = {"normal": [], "initial": []}
    real = dispatching.drain

    def recorded(completions, timeout, gather=0.0):
        gathers[mode].append(gather)
        return real(completions, timeout, gather)

    monkeypatch.setattr(dispatching, "drain", recorded)
    mode, count = "normal", dispatching.GATHER_FROM + 4
    with WireServer(lambda request: [0.05, answer(304, headers={"ETag": ETAG})]) as server:
        for k in range(count):
            add_network(db, **MARKED, user=f"u{k}@x", accessToken=f"token-{k}")
        report = run_once(db, "normal", poll_settings(server.url), now=T0, concurrency=count)
    assert report.by_status == {"ok": count}
    assert gathers["normal"][0] == dispatching.GATHER_S  # all in flight, none ended yet: the first look gathers
    fake, mode = FakeGitHub(), "initial"
    for k in range(count):
        fake.add_user(f"walk-{k}", make_stars(3, seed=k))
    with FakeServer(fake) as url:
        for k in range(count):
            add_network(db, user=f"w{k}@x", accessToken=f"walk-{k}")
        report = run_once(db, "initial", poll_settings(url), now=T0, concurrency=count)
    assert report.runs == count and set(gathers["initial"]) == {0.0}


def test_a_304_on_the_lane_is_decoded_as_the_sessions_path_decodes_it(db):
    """No body and no encoding: nothing to undo, the run ends ok; an encoding never asked for, even on an empty
    body, is the network's bad answer, as a request sent by the session gets it."""
    with WireServer(lambda request: [answer(304, headers={"ETag": ETAG})]) as server:
        plain = add_network(db, **MARKED, user="plain@x", accessToken="token-plain")
        report = run_once(db, "normal", poll_settings(server.url), now=T0)
    assert report.by_status == {"ok": 1} and not network(db, plain).get("lastError")
    with WireServer(lambda request: [answer(304, headers={"ETag": ETAG, "Content-Encoding": "br"})]) as server:
        odd = add_network(db, **MARKED, user="odd@x", accessToken="token-odd")
        report = run_once(db, "normal", poll_settings(server.url), now=T0)  # the first one is due later
    assert report.by_status == {"badResponse": 1}
    assert "encoding not asked for" in network(db, odd)["lastError"]["message"]
