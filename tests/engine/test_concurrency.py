"""Concurrent passes, per-service caps, quota memory, conditional requests and the fake load target."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import UTC, timedelta

import pytest

from collector import run_once
from collector.devtools.fakeapi import FakeGitHub, make_stars
from collector.engine.registry import Registry
from collector.sdk.connector import Connector, Result
from collector.sdk.http import TURN_BYTES
from collector.settings import settings_for_tests

from helpers import API, STARRED, T0, TOKEN, GitHubStub, add_network, network, starred_headers
from helpers.proc import wait_until
from helpers.rawserver import RawServer, response


class Gauge:
    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.peak = 0

    def __enter__(self):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc):
        with self.lock:
            self.now -= 1


def gauged(name: str, gauge: Gauge, barrier: threading.Barrier | None = None):
    class Gauged(Connector):
        def initial(self, job):
            with gauge:
                if barrier is not None:
                    barrier.wait(timeout=30)  # all `parties` runs are in flight at once, or this times out
            return Result([{"itemId": str(job.network["_id"]), "type": name, "source": "https://x.test"}], done=True)

        def normal(self, job):
            return self.initial(job)

    Gauged.name = name
    return Gauged


def test_concurrency_one_runs_networks_in_series(db, settings):
    gauge = Gauge()
    for k in range(6):
        add_network(db, user=f"u{k}@x.test", service="gauged")
    report = run_once(
        db, "initial", settings, now=T0, concurrency=1, registry=Registry({"gauged": gauged("gauged", gauge)})
    )
    assert report.tasks == 6 and gauge.peak == 1


def test_networks_run_at_once_up_to_two_per_request_slot(db, settings):
    gauge = Gauge()
    for k in range(16):
        add_network(db, user=f"u{k}@x.test", service="gauged")
    barrier = threading.Barrier(8)
    report = run_once(
        db, "initial", settings, now=T0, concurrency=4, registry=Registry({"gauged": gauged("gauged", gauge, barrier)})
    )
    assert report.by_status == {"ok": 16} and gauge.peak == 8
    assert db.items.count_documents({}) == 16


def test_per_service_cap(db):
    settings = settings_for_tests(service_concurrencies={"capped": 2})
    capped, free = Gauge(), Gauge()
    for k in range(8):  # two rounds of four at the barrier (a third of two would wait out its timeout)
        add_network(db, user=f"c{k}@x.test", service="capped")
    for k in range(12):
        add_network(db, user=f"f{k}@x.test", service="free")
    registry = Registry(
        {"capped": gauged("capped", capped, threading.Barrier(4)), "free": gauged("free", free, threading.Barrier(12))}
    )
    report = run_once(db, "initial", settings, now=T0, concurrency=8, registry=registry)
    assert report.by_status == {"ok": 20} and capped.peak == 4 and free.peak == 12


class Exchanges:
    """A server on 127.0.0.1 that counts the requests it holds at once, in all and per first path segment."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now: Counter = Counter()
        self.peak: Counter = Counter()

    def __call__(self, conn, request, server):
        service = request.split(b" ")[1].decode().strip("/").split("/")[0]
        with self.lock:
            for key in ("all", service):
                self.now[key] += 1
                self.peak[key] = max(self.peak[key], self.now[key])
        time.sleep(0.02)  # so that requests overlap when the client lets them; the assertions count, not time
        with self.lock:
            for key in ("all", service):
                self.now[key] -= 1
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]")


def fetching(name: str, url: str, after: threading.Barrier):
    """Runs that make one request, then wait at `after` until that many runs are past their request at once."""

    class Fetching(Connector):
        def initial(self, job):
            self.get(job, f"{url}/{name}/{job.network['_id']}")
            after.wait(timeout=30)  # times out (the run fails) unless the slots were given back after the requests
            return Result([{"itemId": str(job.network["_id"]), "type": name, "source": "https://x.test"}], done=True)

        def normal(self, job):
            return self.initial(job)

    Fetching.name = name
    return Fetching


@pytest.mark.system
def test_a_run_gives_its_request_slot_to_the_next_network_once_its_answer_is_in(db):
    exchanges = Exchanges()
    settings = settings_for_tests(allow_private_hosts=True)
    with RawServer(exchanges) as server:
        for k in range(8):
            add_network(db, user=f"u{k}@x.test", service="fetching")
        registry = Registry({"fetching": fetching("fetching", server.url, threading.Barrier(4))})
        report = run_once(db, "initial", settings, now=T0, concurrency=2, registry=registry)
    # four runs were past their request at once (the barrier), yet at most two requests were ever out
    assert report.by_status == {"ok": 8}
    assert 1 <= exchanges.peak["all"] <= 2


@pytest.mark.system
def test_a_service_cap_bounds_its_requests_out_at_once(db):
    exchanges = Exchanges()
    settings = settings_for_tests(allow_private_hosts=True, service_concurrencies={"capped": 2})
    with RawServer(exchanges) as server:
        for k in range(8):
            add_network(db, user=f"c{k}@x.test", service="capped")
            add_network(db, user=f"f{k}@x.test", service="free")
        registry = Registry(
            {
                "capped": fetching("capped", server.url, threading.Barrier(4)),
                "free": fetching("free", server.url, threading.Barrier(4)),
            }
        )
        report = run_once(db, "initial", settings, now=T0, concurrency=8, registry=registry)
    assert report.by_status == {"ok": 16}
    assert 1 <= exchanges.peak["capped"] <= 2 and exchanges.peak["all"] <= 8


def answering(name: str, url: str, gauge: Gauge, barrier: threading.Barrier | None = None):
    """Runs that ask once, then map the answer for a while: in the gauge, held at `barrier` when given, else for
    50 ms (runs mapping at once would overlap there)."""

    class Answering(Connector):
        def initial(self, job):
            self.get_json(job, f"{url}/{name}/{job.network['_id']}")
            with gauge:
                if barrier is not None:
                    barrier.wait(timeout=30)  # times out (the run fails) unless that many runs map at once
                else:
                    time.sleep(0.05)
            return Result([{"itemId": str(job.network["_id"]), "type": name, "source": "https://x.test"}], done=True)

        def normal(self, job):
            return self.initial(job)

    Answering.name = name
    return Answering


def answer_of(size: int):
    body = b"[" + b"1," * (size // 2) + b"1]"
    return lambda conn, request, server: conn.sendall(response(body=body))


@pytest.mark.system
def test_runs_turn_large_answers_into_items_one_at_a_time(db):
    mapping = Gauge()
    with RawServer(answer_of(TURN_BYTES)) as server:
        for k in range(8):
            add_network(db, user=f"u{k}@x.test", service="answering")
        registry = Registry({"answering": answering("answering", server.url, mapping)})
        settings = settings_for_tests(allow_private_hosts=True)
        report = run_once(db, "initial", settings, now=T0, concurrency=4, registry=registry)
    assert report.by_status == {"ok": 8} and db.items.count_documents({}) == 8
    assert mapping.peak == 1


@pytest.mark.system
def test_small_answers_are_turned_into_items_without_waiting_for_the_turn(db):
    mapping = Gauge()
    with RawServer(answer_of(1000)) as server:
        for k in range(4):
            add_network(db, user=f"u{k}@x.test", service="answering")
        registry = Registry({"answering": answering("answering", server.url, mapping, threading.Barrier(4))})
        settings = settings_for_tests(allow_private_hosts=True)
        report = run_once(db, "initial", settings, now=T0, concurrency=4, registry=registry)
    assert report.by_status == {"ok": 4} and mapping.peak == 4


@pytest.mark.system
def test_concurrent_pass_saves_every_network_and_item(db, settings, http_mock):
    stub = GitHubStub(http_mock, stars=make_stars(120, seed=13))
    for k in range(1, 12):
        stub.fake.add_user(f"token-{k}", make_stars(120, seed=13 + k))
        add_network(db, user=f"u{k}@x.test", accessToken=f"token-{k}")
    add_network(db)
    for k in range(2):
        run_once(db, "initial", settings, now=T0 + timedelta(seconds=k), concurrency=8)
    assert db.networks.count_documents({"mode": "normal"}) == 12
    assert db.items.count_documents({}) == 12 * 120


def test_a_spent_token_is_skipped_without_an_http_call(db, settings, http_mock):
    reset = T0 + timedelta(minutes=30)
    http_mock.get(STARRED, json=make_stars(3), headers=starred_headers(remaining=1, reset=reset))
    first = add_network(db, scheduledTo=T0 - timedelta(minutes=2))
    second = add_network(db, user="same-token@x.test", scheduledTo=T0 - timedelta(minutes=1))
    report = run_once(db, "initial", settings, now=T0, concurrency=1)
    assert len(http_mock.calls) == 1
    assert report.requests_skipped == 1
    for doc in (first, second):
        state = network(db, doc)
        assert state["mode"] == "rateLimit" and state["scheduledTo"] == reset
    assert network(db, second).get("errors", 0) == 0


def test_quota_memory_lasts_across_passes_and_ends_at_the_reset(db, settings, http_mock):
    from collector.engine import Collector

    reset = T0 + timedelta(minutes=30)
    http_mock.get(
        STARRED,
        status=403,
        json={"message": "API rate limit exceeded"},
        headers=starred_headers(remaining=0, reset=reset),
    )
    add_network(db)
    collector = Collector(db, settings, concurrency=1)
    collector.run_pass("initial", now=T0)
    other = add_network(db, user="same-token@x.test")
    collector.run_pass("initial", now=T0 + timedelta(minutes=1))
    assert len(http_mock.calls) == 1 and network(db, other)["scheduledTo"] == reset
    assert len(collector.quotas) == 1
    collector.quotas.prune(reset)
    assert len(collector.quotas) == 0
    collector.close()


def test_429_without_headers_is_a_rate_limit_not_an_error(db, settings, http_mock):
    http_mock.get(STARRED, status=429, json={"message": "Too Many Requests"})
    doc = add_network(db, errors=1)
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["mode"] == "rateLimit" and state["errors"] == 1 and "lastError" not in state
    assert state["scheduledTo"] == T0 + timedelta(seconds=60)


def test_transient_failures_at_one_moment_come_back_spread_out(db, settings, http_mock):
    http_mock.get(STARRED, status=503, json={"message": "unavailable"})
    docs = [add_network(db, user=f"u{k}@x.test") for k in range(20)]
    run_once(db, "initial", settings, now=T0)
    times = {network(db, d)["scheduledTo"] for d in docs}
    assert len(times) > 10
    assert all(T0 + timedelta(seconds=30) <= t <= T0 + timedelta(seconds=60) for t in times)


def test_normal_poll_sends_the_stored_etag_and_a_304_is_a_free_success(db, settings, http_mock):
    stub = GitHubStub(http_mock, stars=make_stars(30, seed=14))
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    first = T0 + timedelta(seconds=settings.normal_interval)
    run_once(db, "normal", settings, now=first)  # the first poll (10 newest) answers 200 and gives its ETag
    etag = network(db, doc)["etag"]
    assert etag and stub.requests[-1].url.endswith("per_page=10&page=1")
    later = first + timedelta(seconds=settings.normal_interval)
    db.networks.update_one({"_id": doc["_id"]}, {"$set": {"errors": 2}})
    accepted = stub.fake.accepted
    report = run_once(db, "normal", settings, now=later)
    assert stub.requests[-1].headers["If-None-Match"] == etag
    assert stub.fake.not_modified == 1 and stub.fake.accepted == accepted  # the 304 cost no quota
    state = network(db, doc)
    assert report.by_status == {"ok": 1} and report.new_items == 0
    assert state["errors"] == 0 and state["lastSuccess"] == later and state["mode"] == "normal"
    assert state["scheduledTo"] == later + timedelta(seconds=settings.normal_interval)


def test_a_changed_list_answers_200_and_the_new_etag_is_stored(db, settings, http_mock):
    from datetime import datetime

    from collector.devtools.fakeapi import make_star

    stub = GitHubStub(http_mock, stars=make_stars(30, seed=15))
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    run_once(db, "normal", settings, now=T0 + timedelta(minutes=30))  # the first poll stores its ETag
    old = network(db, doc)["etag"]
    stub.fake.star(TOKEN, make_star(777_777, datetime(2026, 5, 1, tzinfo=UTC)))
    report = run_once(db, "normal", settings, now=T0 + timedelta(hours=1))
    assert report.new_items == 1 and stub.requests[-1].headers["If-None-Match"] == old
    assert network(db, doc)["etag"] not in (None, old)


def test_no_etag_is_sent_without_a_marker(db, settings, http_mock):
    stub = GitHubStub(http_mock, stars=make_stars(3))
    add_network(db, mode="normal", etag='W/"0-1-100"')
    run_once(db, "normal", settings, now=T0)
    assert "If-None-Match" not in stub.requests[0].headers


@pytest.mark.parametrize("status", [403, 429])
def test_fake_api_enforces_its_quota_window(status):
    fake = FakeGitHub(quota=2, window=60, over_status=status)
    fake.add_user("t", generated=500, seed=1)
    now = 1_800_000_010.0
    answers = [fake.handle("t", {"per_page": ["100"]}, API, now) for _ in range(3)]
    assert [a[0] for a in answers] == [200, 200, status]
    assert [a[1]["x-ratelimit-remaining"] for a in answers] == ["1", "0", "0"]
    assert answers[0][1]["x-ratelimit-reset"] == "1800000060"
    assert fake.handle("t", {"per_page": ["100"]}, API, now + 60)[0] == 200  # a new window
    assert fake.over_quota == 1


def test_fake_api_generates_any_number_of_distinct_stars():
    fake = FakeGitHub()
    fake.add_user("t", generated=25_000, seed=3)
    ids = set()
    for page in (1, 2, 250):
        status, headers, body = fake.handle("t", {"per_page": ["100"], "page": [str(page)]}, API, 0.0)
        ids |= {entry["repo"]["id"] for entry in json.loads(body)}
    assert len(ids) == 300
    assert 'rel="next"' not in headers["Link"]


def test_github_and_gist_share_one_quota_per_token(db, settings, http_mock):
    reset = T0 + timedelta(minutes=30)
    http_mock.get(
        STARRED,
        status=403,
        json={"message": "API rate limit exceeded"},
        headers=starred_headers(remaining=0, reset=reset),
    )
    add_network(db, scheduledTo=T0 - timedelta(minutes=2))
    gist = add_network(db, service="gist", scheduledTo=T0 - timedelta(minutes=1))
    report = run_once(db, "initial", settings, now=T0, concurrency=1)
    assert len(http_mock.calls) == 1 and report.requests_skipped == 1
    assert network(db, gist)["scheduledTo"] == reset


def test_a_token_spent_in_one_collector_is_skipped_by_another_without_a_request(db, settings, http_mock):
    from collector.engine import Collector
    from collector.sdk import utcnow

    now = utcnow()  # real time: the quotas collection's TTL index (mongomock applies it) expires past blocks
    reset = now.replace(microsecond=0) + timedelta(minutes=30)
    http_mock.get(
        STARRED,
        status=403,
        json={"message": "API rate limit exceeded"},
        headers=starred_headers(remaining=0, reset=reset),
    )
    add_network(db)
    first = Collector(db, settings, instance_id="collector-a")
    assert first.run_pass("initial", now=now).by_status == {"rateLimit": 1}
    assert len(http_mock.calls) == 1
    assert db.quotas.count_documents({}) == 1 and "ghp_" not in str(db.quotas.find_one())  # a hash, no token
    # another collector (another process, or this one restarted: a fresh memory) gets a network of the same token
    add_network(db, user="bo@example.com", service="gist")  # gists share GitHub's quota
    second = Collector(db, settings, instance_id="collector-b")
    report = second.run_pass("initial", now=now + timedelta(minutes=1))
    assert report.requests_skipped == 1 and len(http_mock.calls) == 1
    assert db.networks.find_one({"service": "gist"})["scheduledTo"] == reset


@pytest.mark.system
def test_runs_waiting_for_a_slot_when_the_collector_stops_send_nothing_and_leave_their_networks_as_they_were(db):
    from collector.engine import Collector

    go, lock, arrived = threading.Event(), threading.Lock(), []

    def held_answers(conn, request, server):
        with lock:
            arrived.append(request)
        go.wait(timeout=60)  # the first requests stay out until the stop has come
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]")

    settings = settings_for_tests(allow_private_hosts=True)
    with RawServer(held_answers) as server:
        docs = [add_network(db, user=f"u{k}@x.test", service="fetching") for k in range(4)]
        registry = Registry({"fetching": fetching("fetching", server.url, threading.Barrier(1))})
        collector = Collector(db, settings, registry=registry, concurrency=2)  # two slots, four runs
        reports: list = []
        thread = threading.Thread(target=lambda: reports.append(collector.run_pass("initial", now=T0)), daemon=True)
        thread.start()
        wait_until(lambda: len(arrived) == 2, timeout=120)  # both slots out
        collector.http.interrupt_after(3600)  # a stop: requests out may finish, nothing new waits for a slot
        go.set()
        thread.join(timeout=30)
        collector.close()
    assert len(arrived) == 2 and reports[0].by_status == {"ok": 2, "interrupted": 2}
    untouched = [network(db, doc) for doc in docs if network(db, doc).get("mode") != "normal"]
    assert len(untouched) == 2
    for state in untouched:
        assert state.get("errors", 0) == 0 and "lastError" not in state


def test_the_quota_memory_keeps_blocked_tokens_only_and_forgets_a_block_a_later_answer_lifts():
    from collector.engine.quota import QuotaMemory
    from collector.sdk.errors import Quota

    memory = QuotaMemory()
    for k in range(1000):  # a fleet polled: every answer tells the quota left
        memory.remember("github", f"token-{k}", Quota(remaining=4000, limit=5000, reset=T0 + timedelta(hours=1)), None)
    assert len(memory) == 0
    memory.remember("github", "spent", Quota(remaining=0, limit=5000, reset=T0 + timedelta(minutes=5)), None)
    assert len(memory) == 1 and memory.blocked_until("github", "spent", T0) == T0 + timedelta(minutes=5)
    memory.remember("github", "spent", Quota(remaining=4999, limit=5000, reset=T0 + timedelta(hours=1)), None)
    assert len(memory) == 0 and memory.blocked_until("github", "spent", T0) is None
