"""The GitHub connector through one collector pass at a time (run_once), against responses-served fixtures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import requests
import responses

from collector import run_once
from collector.devtools.fakeapi import make_star, make_stars

from helpers import STARRED, T0, TOKEN, GitHubStub, add_network, fixture, network, starred_headers


def test_one_page_maps_every_field(db, settings, http_mock):
    http_mock.get(STARRED, json=fixture("github_starred_page.json"), headers=starred_headers())
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    item = db.items.find_one({"itemId": "1296269"})
    assert {
        k: item[k] for k in ("type", "source", "title", "description", "authorName", "authorUrl", "avatarUrl", "user")
    } == {
        "type": "github",
        "source": "https://github.com/octocat/Hello-World",
        "title": "octocat/Hello-World",
        "description": "This your first repo!",
        "authorName": "octocat",
        "authorUrl": "https://github.com/octocat",
        "avatarUrl": "https://github.com/images/error/octocat_happy.gif",
        "user": "ann@example.com",
    }
    assert item["created"] == datetime(2011, 1, 26, 19, 1, 12, tzinfo=UTC)
    assert item["likedAt"] == datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    assert item["date"] == T0
    assert db.items.find_one({"itemId": "64778136"})["description"] is None
    # no Link rel=next: the history is complete after one page
    assert network(db, doc)["mode"] == "normal"


def test_request_sends_token_in_header_and_asks_for_star_times(db, settings, http_mock):
    stub = GitHubStub(http_mock, stars=make_stars(3))
    add_network(db)
    run_once(db, "initial", settings, now=T0)
    request = stub.requests[0]
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Accept"] == "application/vnd.github.star+json"
    assert "per_page=100" in request.url and "page=1" in request.url
    assert TOKEN not in request.url


def test_multi_page_history_is_walked_to_normal_mode(db, settings, http_mock):
    stars = make_stars(250, seed=3)
    GitHubStub(http_mock, stars=stars)
    doc = add_network(db)
    modes = []
    for k in range(3):
        report = run_once(db, "initial", settings, now=T0 + timedelta(seconds=k))
        assert report.tasks == 1
        state = network(db, doc)
        modes.append((state["mode"], state.get("page")))
    assert modes == [("initial", 2), ("initial", 3), ("normal", 4)]
    assert db.items.count_documents({}) == 250
    assert {i["itemId"] for i in db.items.find()} == {str(s["repo"]["id"]) for s in stars}
    state = network(db, doc)
    assert state["errors"] == 0 and state["lastSuccess"] == T0 + timedelta(seconds=2)
    assert state["scheduledTo"] == T0 + timedelta(seconds=2 + settings.normal_interval)
    # the normal-mode marker is the newest star of the first page
    assert state["sinceLikedAt"] == datetime(2026, 1, 1, tzinfo=UTC)


def test_empty_last_page_moves_to_normal(db, settings, http_mock):
    link = f'<{STARRED}?per_page=100&page=3>; rel="next"'
    http_mock.get(STARRED, json=[], headers=starred_headers(link=link))  # a stale next link, empty page
    doc = add_network(db, mode="initial", page=3)
    run_once(db, "initial", settings, now=T0)
    assert network(db, doc)["mode"] == "normal"
    assert db.items.count_documents({}) == 0


def test_normal_mode_collects_only_new_stars(db, settings, http_mock):
    stub = GitHubStub(http_mock, stars=make_stars(150, seed=4))
    doc = add_network(db)
    for k in range(2):
        run_once(db, "initial", settings, now=T0 + timedelta(seconds=k))
    assert network(db, doc)["mode"] == "normal"
    assert db.items.count_documents({}) == 150
    new = [make_star(900_001 + k, datetime(2026, 2, 1, tzinfo=UTC) + timedelta(minutes=k)) for k in range(3)]
    for entry in new:
        stub.fake.star(TOKEN, entry)
    later = T0 + timedelta(seconds=settings.normal_interval + 5)
    assert run_once(db, "initial", settings, now=later).tasks == 0  # normal networks are not initial's
    before = len(stub.requests)
    report = run_once(db, "normal", settings, now=later)
    assert report.tasks == 1 and report.new_items == 3
    assert len(stub.requests) - before == 1  # the first page held every new star
    assert db.items.count_documents({}) == 153
    assert network(db, doc)["sinceLikedAt"] == datetime(2026, 2, 1, 0, 2, tzinfo=UTC)
    # nothing new: one request, no items
    report = run_once(db, "normal", settings, now=later + timedelta(seconds=settings.normal_interval))
    assert report.tasks == 1 and report.new_items == 0


def test_normal_mode_follows_pages_while_every_star_is_new(db, settings, http_mock):
    old = make_stars(5, seed=5)
    stub = GitHubStub(http_mock, stars=old)
    doc = add_network(db, mode="normal", sinceLikedAt=datetime(2026, 1, 1, tzinfo=UTC))
    for k in range(130):
        stub.fake.star(TOKEN, make_star(800_000 + k, datetime(2026, 3, 1, tzinfo=UTC) + timedelta(minutes=k)))
    report = run_once(db, "normal", settings, now=T0)
    assert report.new_items == 131  # 130 new + the marker star itself (equal time), stored once
    # a poll of the newest 10 (all new), then full pages from the newest until the marker: 2 pages of 100
    assert [r.url.split("?")[1] for r in stub.requests] == [
        "per_page=10&page=1",
        "per_page=100&page=1",
        "per_page=100&page=2",
    ]
    assert network(db, doc)["sinceLikedAt"] == datetime(2026, 3, 1, 2, 9, tzinfo=UTC)


def test_low_quota_enters_rate_limit_and_keeps_the_page(db, settings, http_mock):
    reset = T0 + timedelta(minutes=40)
    link = f'<{STARRED}?per_page=100&page=2>; rel="next"'
    http_mock.get(
        STARRED, json=fixture("github_starred_page.json"), headers=starred_headers(remaining=1, reset=reset, link=link)
    )
    doc = add_network(db)
    report = run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert report.by_status == {"rateLimit": 1}
    assert state["mode"] == "rateLimit" and state["prevMode"] == "initial"
    assert state["scheduledTo"] == reset and state["page"] == 2
    assert state.get("errors", 0) == 0 and "lastError" not in state
    assert db.items.count_documents({}) == 2  # the items of that last page are saved


def test_rate_limited_network_resumes_in_its_previous_mode(db, settings, http_mock):
    stub = GitHubStub(http_mock, stars=make_stars(150, seed=6))
    reset = T0 + timedelta(minutes=40)
    doc = add_network(db, mode="rateLimit", prevMode="initial", page=2, scheduledTo=reset)
    assert run_once(db, "initial", settings, now=reset - timedelta(seconds=1)).tasks == 0
    assert run_once(db, "normal", settings, now=reset + timedelta(seconds=1)).tasks == 0
    assert run_once(db, "initial", settings, now=reset).tasks == 1
    state = network(db, doc)
    assert "page=2" in stub.requests[0].url
    assert state["mode"] == "normal" and "prevMode" not in state  # page 2 was the last
    assert db.items.count_documents({}) == 50


@pytest.mark.parametrize("status", [403, 429])
def test_exhausted_quota_answer_is_rate_limit_not_error(db, settings, http_mock, status):
    reset = T0 + timedelta(minutes=17)
    http_mock.get(
        STARRED,
        status=status,
        json={"message": "API rate limit exceeded for user ID 1."},
        headers=starred_headers(remaining=0, reset=reset),
    )
    doc = add_network(db, mode="normal", errors=2)
    report = run_once(db, "normal", settings, now=T0)
    state = network(db, doc)
    assert report.by_status == {"rateLimit": 1}
    assert (state["mode"], state["prevMode"], state["scheduledTo"]) == ("rateLimit", "normal", reset)
    assert state["errors"] == 2 and "lastError" not in state


def test_retry_after_sets_the_next_run(db, settings, http_mock):
    http_mock.get(
        STARRED,
        status=403,
        headers={"Retry-After": "120"},
        json={"message": "You have exceeded a secondary rate limit."},
    )
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["mode"] == "rateLimit" and state["scheduledTo"] == T0 + timedelta(seconds=120)


def test_secondary_rate_limit_without_retry_after_waits_a_minute(db, settings, http_mock):
    http_mock.get(
        STARRED,
        status=403,
        json={"message": "You have exceeded a secondary rate limit."},
        headers=starred_headers(remaining=4000),
    )
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["mode"] == "rateLimit" and state["scheduledTo"] == T0 + timedelta(seconds=60)


def test_401_marks_unauthorized_and_the_network_never_runs_again(db, settings, http_mock):
    http_mock.get(STARRED, status=401, json={"message": "Bad credentials"})
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["unauthorized"] is True
    assert state["lastError"]["status"] == 401 and "Bad credentials" in state["lastError"]["message"]
    assert run_once(db, "initial", settings, now=T0 + timedelta(days=1)).tasks == 0


@pytest.mark.parametrize(
    "failure",
    [
        {"status": 502, "json": {"message": "Server Error"}},
        {"body": requests.exceptions.ConnectTimeout("timed out")},
        {"body": requests.exceptions.ConnectionError("refused")},
    ],
)
def test_transient_failures_count_and_back_off_exponentially(db, settings, http_mock, failure):
    http_mock.get(STARRED, **failure)
    doc = add_network(db)
    delays = []
    now = T0
    for expected_errors in (1, 2, 3):
        assert run_once(db, "initial", settings, now=now).tasks == 1
        state = network(db, doc)
        assert state["errors"] == expected_errors
        delays.append((state["scheduledTo"] - now).total_seconds())
        now = state["scheduledTo"]
    base = settings.backoff_base
    for n, delay in enumerate(delays):  # equal jitter: between half and all of base * 2^n
        assert base * 2**n / 2 <= delay <= base * 2**n
    assert state["lastError"]["kind"] == "transient"


def test_other_client_errors_count_and_retry_at_the_normal_interval(db, settings, http_mock):
    http_mock.get(STARRED, status=404, json={"message": "Not Found"})
    doc = add_network(db, mode="normal")
    run_once(db, "normal", settings, now=T0)
    state = network(db, doc)
    assert state["errors"] == 1 and state["lastError"]["status"] == 404
    assert state["lastError"]["kind"] == "badResponse" and state["lastError"]["at"] == T0
    assert state["scheduledTo"] == T0 + timedelta(seconds=settings.normal_interval)


@pytest.mark.parametrize(
    "body",
    [
        "<html>Unicorn!</html>",
        '{"message": "not a list"}',
        '"[1, 2, 3]"',
        "null",
    ],
)
def test_garbage_bodies_are_errors_on_that_network_only(db, settings, http_mock, body):
    http_mock.get(STARRED, body=body, headers=starred_headers())
    bad = add_network(db, accessToken="ghp_broken_token_0001")
    stub_ok = add_network(db, user="bo@example.com", service="nosuchservice")
    report = run_once(db, "initial", settings, now=T0)
    assert report.tasks == 2
    assert network(db, bad)["errors"] == 1
    assert network(db, bad)["lastError"]["kind"] == "badResponse"
    assert network(db, stub_ok)["lastError"]["kind"] == "unknownService"
    assert db.items.count_documents({}) == 0


@pytest.mark.parametrize(
    "entries", [[{"starred_at": "yesterday", "repo": {"id": 1}}], [1, 2, 3], [None, "x", [], {}], [{"repo": None}] * 7]
)
@pytest.mark.parametrize("more", [True, False])
def test_a_page_of_entries_it_cannot_keep_is_skipped_and_the_link_decides(db, settings, http_mock, entries, more):
    """Entries never end the walk nor fail the page: all of them unusable, they are counted as skipped; with a
    next link the walk goes on to page 2, without one it is over (the network moves to normal)."""
    headers = {**starred_headers(), **({"Link": f'<{STARRED}?page=2>; rel="next"'} if more else {})}
    http_mock.get(STARRED, json=entries, headers=headers)
    doc = add_network(db)
    report = run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert report.by_status == {"ok": 1} and report.skipped == len(entries)
    assert state["errors"] == 0 and state["skippedItems"] == len(entries) and "lastError" not in state
    assert state["mode"] == ("initial" if more else "normal") and state["page"] == 2
    assert db.items.count_documents({}) == 0


@pytest.mark.parametrize("starred_at", [None, "yesterday", 12345])
def test_a_page_without_usable_star_times_is_stored_and_leaves_the_marker_alone(db, settings, http_mock, starred_at):
    """A server that drops or garbles `starred_at` on every entry (a proxy that strips the star+json Accept, a
    GitHub-compatible server): the repositories are still stars, stored without likedAt; no marker is made up."""
    page = fixture("github_starred_page.json")
    for entry in page:
        entry["starred_at"] = starred_at
    http_mock.get(STARRED, json=page, headers=starred_headers())
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["mode"] == "normal" and state["errors"] == 0 and "lastError" not in state
    assert "sinceLikedAt" not in state
    assert db.items.count_documents({}) == len(page)
    assert all(item["likedAt"] is None for item in db.items.find())
    later = T0 + timedelta(seconds=settings.normal_interval + 1)
    report = run_once(db, "normal", settings, now=later)  # a poll without a marker: the page again, no error
    assert report.tasks == 1 and network(db, doc)["errors"] == 0 and "sinceLikedAt" not in network(db, doc)
    assert db.items.count_documents({}) == len(page)


@pytest.mark.parametrize("etag", ['"' + "e" * 2000 + '"', 'W/"\u00e9t\u00e9"', '"a\x01b"'])
def test_an_etag_the_collector_cannot_keep_is_left_out_and_the_poll_succeeds(db, settings, http_mock, etag):
    """An ETag longer than 1,024 characters, or with bytes past ASCII (RFC 9110 allows obs-text), is not kept:
    the poll's stars are stored, no error counts (else the network would be disabled after MAX_ERRORS polls),
    and the next poll asks without If-None-Match."""
    GitHubStub(http_mock, stars=make_stars(5, seed=8))
    doc = add_network(db)
    run_once(db, "initial", settings, now=T0)
    http_mock.replace(
        responses.GET,
        STARRED,
        json=[make_star(700_001, datetime(2026, 7, 1, tzinfo=UTC))],
        headers={**starred_headers(), "ETag": etag.encode().decode("latin-1")},
    )
    later = T0 + timedelta(seconds=settings.normal_interval + 1)
    report = run_once(db, "normal", settings, now=later)
    state = network(db, doc)
    assert report.tasks == 1 and report.new_items == 1 and state["errors"] == 0 and "lastError" not in state
    assert "etag" not in state and db.items.count_documents({"itemId": "700001"}) == 1
    run_once(db, "normal", settings, now=later + timedelta(seconds=settings.normal_interval + 1))
    assert "If-None-Match" not in http_mock.calls[-1].request.headers and network(db, doc)["errors"] == 0


def test_max_consecutive_errors_disable_the_network(db, settings, http_mock):
    http_mock.get(STARRED, status=400, json={"message": "Bad request"})
    doc = add_network(db, mode="normal", errors=settings.max_errors - 1)
    run_once(db, "normal", settings, now=T0)
    state = network(db, doc)
    assert state["errors"] == settings.max_errors and state["disabled"] is True
    assert run_once(db, "normal", settings, now=T0 + timedelta(days=1)).tasks == 0


def test_success_resets_the_error_count(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(3))
    doc = add_network(db, errors=3, lastError={"status": 502, "message": "x", "at": T0})
    run_once(db, "initial", settings, now=T0)
    assert network(db, doc)["errors"] == 0


def test_github_enterprise_base_url_is_used(db, settings, http_mock):
    ghes = "https://github.example.com/api/v3"
    http_mock.get(f"{ghes}/user/starred", json=fixture("github_starred_page.json"), headers=starred_headers())
    add_network(db)
    run_once(db, "initial", settings.with_(github_api_url=ghes), now=T0)
    assert db.items.count_documents({}) == 2


def test_redirect_to_another_host_does_not_carry_the_token(db, settings, http_mock):
    http_mock.get(STARRED, status=301, headers={"Location": "https://elsewhere.test/user/starred"})
    seen = []

    def capture(request):
        seen.append(request.headers.get("Authorization"))
        return 200, starred_headers(), "[]"

    http_mock.add_callback(responses.GET, "https://elsewhere.test/user/starred", callback=capture)
    add_network(db)
    run_once(db, "initial", settings, now=T0)
    assert seen == [None]


@pytest.mark.system
@pytest.mark.parametrize("gzip_ok", [True, False])
def test_the_fakes_prerendered_pages_are_the_pages_it_renders_when_asked(gzip_ok):
    """`collector bench` has the fake render its pages before serving (its CPU then is not spent on the cores the
    walk is measured on): a client gets the same page either way, gzip-encoded only when it asked."""
    import gzip

    import requests

    from collector.devtools.fakeapi import FakeGitHub, FakeServer

    def pages(fake: FakeGitHub) -> list[tuple[str | None, bytes]]:
        fake.add_user("t", generated=250, seed=3)
        fake.add_user("u", stars=make_stars(2, seed=4))
        got = []
        with FakeServer(fake) as url:
            for token, page in (("t", 1), ("t", 3), ("u", 1)):
                response = requests.get(
                    f"{url}/user/starred",
                    params={"per_page": 100, "page": page},
                    headers={"Authorization": f"Bearer {token}", "Accept-Encoding": "gzip" if gzip_ok else "identity"},
                    stream=True,
                )
                raw = response.raw.read(decode_content=False)
                encoding = response.headers.get("Content-Encoding")
                got.append((encoding, gzip.decompress(raw) if encoding == "gzip" else raw))
        return got

    prerendered = FakeGitHub(prerender_per_page=100)
    assert pages(prerendered) == pages(FakeGitHub())
    assert len(prerendered.rendered) == 3 + 1  # t: 3 pages of 100, u: 1
    assert {encoding for encoding, _ in pages(FakeGitHub(prerender_per_page=100))} == {"gzip" if gzip_ok else None}


@pytest.mark.system
def test_a_fake_whose_process_dies_before_serving_is_an_error_not_a_wait_for_ever():
    from collector.devtools.fakeapi import FakeGitHub, FakeProcess

    broken = FakeGitHub(prerender_per_page=100)
    broken.accounts["t"] = "not an account"  # type: ignore[assignment]  # its prerendering fails in the child
    with pytest.raises(RuntimeError, match="ended before serving"):
        with FakeProcess(broken):
            pass


def fake_exchanges(serving, fake) -> list[tuple[int, dict, bytes]]:
    """Requests of every kind the fake answers, on one kept-alive connection: status, headers (but the date, and
    the length of a gzipped body), the body's bytes as sent (a gzipped one decompressed)."""
    import gzip

    fake.add_user("t", generated=250, seed=3)
    asked = [
        ("/user/starred", {"per_page": 100, "page": 1}, {"Accept-Encoding": "gzip"}),
        ("/user/starred", {"per_page": 100, "page": 3}, {"Accept-Encoding": "identity"}),
        ("/user/starred", {"per_page": 100, "page": 1}, {"If-None-Match": 'W/"0-1-100"'}),
        ("/user/starred", {}, {"Authorization": "Bearer nobody"}),
        ("/elsewhere", {}, {}),
    ]
    got = []
    with serving(fake) as url, requests.Session() as session:
        for path, params, headers in asked:
            response = session.get(
                f"{url}{path}", params=params, headers={"Authorization": "Bearer t", **headers}, stream=True
            )
            raw = response.raw.read(decode_content=False)
            if response.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)  # (the gzip header holds the time it was made)
            heads = {
                k: v.replace(url, "URL") for k, v in response.headers.items() if k not in ("Date", "Content-Length")
            }
            got.append((response.status_code, heads, raw))
        stats = session.get(f"{url}/_fake/stats").json()
    assert stats["requests"] == 4 and stats["not_modified"] == 1  # the three answered, the unknown token
    return got


@pytest.mark.system
def test_the_fakes_event_loop_answers_what_its_threaded_server_answers():
    """The bench's fake (FakeProcess) serves from one event loop (fakeloop.py), the tests' in a thread: the same
    statuses, headers and bytes, on a connection kept alive, with its latency (a quota window no clock crosses
    between the two: the reset it names is the same)."""
    from collector.devtools.fakeapi import FakeGitHub, FakeProcess, FakeServer

    on_loop = fake_exchanges(FakeProcess, FakeGitHub(latency=0.01, window=10**10))
    assert [status for status, _, _ in on_loop] == [200, 200, 304, 401, 404]
    assert on_loop[0][1]["Content-Encoding"] == "gzip" and "Content-Encoding" not in on_loop[1][1]
    assert on_loop == fake_exchanges(FakeServer, FakeGitHub(latency=0.01, window=10**10))


@pytest.mark.system
def test_the_fakes_event_loop_answers_requests_sent_together_in_their_order():
    """Three requests in one write, their latencies drawn at random: the answers leave in the requests' order; a
    method other than GET is not served."""
    import socket
    from urllib.parse import urlsplit

    from collector.devtools.fakeapi import FakeGitHub, FakeProcess

    fake = FakeGitHub(latency=0.02, latency_sigma=1.0, seed=11)
    fake.add_user("t", generated=250, seed=3)
    with FakeProcess(fake) as url:
        address = urlsplit(url)
        with socket.create_connection((address.hostname, address.port), timeout=10) as conn:
            conn.sendall(
                b"".join(
                    f"GET /user/starred?per_page=100&page={page} HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer t\r\n\r\n".encode()
                    for page in (3, 1, 2)
                )
            )
            reader = Answers(conn)
            answers = [reader.next_head() for _ in range(3)]
            conn.sendall(b"POST /user/starred HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            assert reader.next_head().startswith(b"HTTP/1.1 501 ")  # as the threaded server: GET only
    assert [page_of(head) for head in answers] == [3, 1, 2]


class Answers:
    """Whole answers' heads read off a socket one at a time (each body read past by its length)."""

    def __init__(self, conn):
        self.conn, self.buffered = conn, b""

    def fill(self, enough) -> None:
        while not enough():
            chunk = self.conn.recv(65536)
            assert chunk, "the fake closed the connection"
            self.buffered += chunk

    def next_head(self) -> bytes:
        self.fill(lambda: b"\r\n\r\n" in self.buffered)
        head, self.buffered = self.buffered.split(b"\r\n\r\n", 1)
        length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        self.fill(lambda: len(self.buffered) >= length)
        self.buffered = self.buffered[length:]
        return head


def page_of(head: bytes) -> int:
    """The page an answer of a 250-star history at 100 a page is, by its links: the last has no next."""
    links = head.split(b"Link: ", 1)[1].split(b"\r\n", 1)[0].decode()
    if 'rel="next"' not in links:
        return 3
    return 2 if 'rel="prev"' in links else 1
