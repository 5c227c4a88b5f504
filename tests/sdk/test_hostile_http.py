"""Hostile servers, over real sockets on 127.0.0.1: trickles, bombs, huge bodies, lying rate-limit headers,
redirects inside. Assertions are about behaviour (cut, refused, clamped), never about how long something took."""

from __future__ import annotations

import gzip
import json
import random
import signal
import socket
import subprocess
import sys
import threading
import zlib
from datetime import timedelta
from email.utils import format_datetime

import pytest
import requests
import responses

from collector import run_once
from collector.daemon import Daemon
from collector.engine import Collector
from collector.sdk.errors import BadResponse, Interrupted, Transient
from collector.sdk.http import Http, RedirectRefused, _Session
from collector.sdk.safeurl import is_public
from collector.settings import settings_for_tests

from helpers import T0, TOKEN, add_network, network
from helpers.rawserver import RawServer, response

STAR = {
    "starred_at": "2026-05-01T10:00:00Z",
    "repo": {
        "id": 1,
        "full_name": "o/r",
        "html_url": "https://github.com/o/r",
        "created_at": "2020-01-01T00:00:00Z",
        "owner": {"login": "o"},
    },
}


def http_to(server: RawServer, **changes) -> Http:
    """An Http whose configured API host is the raw server (so its loopback address is allowed)."""
    return Http(settings_for_tests(github_api_url=server.url, **changes))


@pytest.mark.system
def test_a_server_trickling_its_headers_is_cut_at_the_whole_request_deadline():
    whole = response(body=b"[]")
    with RawServer(lambda conn, head, srv: srv.trickle(conn, whole, every=0.3)) as server:
        with pytest.raises(Transient, match="deadline of 1s exceeded"):
            http_to(server, http_timeout=1).get(f"{server.url}/user/starred")
        assert server.client_gone.wait(60)
    assert server.sent < len(whole)  # each byte came within the per-read timeout, yet the request was cut


@pytest.mark.system
def test_a_server_that_answers_nothing_is_cut_at_the_deadline():
    """A GET's reads have no socket timeout of their own (each would cost a poll before every read): the deadline
    watch alone ends a request whose server stays silent after taking it."""

    def silent(conn, head, srv):
        srv.stop.wait(60)  # holds the connection open and says nothing

    with RawServer(silent) as server:
        with pytest.raises(Transient, match="deadline of 1s exceeded"):
            http_to(server, http_timeout=1).get(f"{server.url}/user/starred")


def test_the_adapter_remembers_no_more_pools_than_the_pool_manager_keeps():
    """The adapter looks each origin's pool up once (requests would parse the URL and build the key each time)
    and keeps no more of them than the pool manager does: pools (and their idle connections) stay bounded."""
    http = Http(settings_for_tests(), pool_size=10)
    adapter = http.session.get_adapter("https://example.org")
    for n in range(25):  # the pool is looked up before anything is sent: no server needed
        request = requests.Request("GET", f"http://host{n}.example:8080/x").prepare()
        adapter.get_connection_with_tls_context(request, True, {})
        assert len(adapter.pools) <= 10


@pytest.mark.system
def test_a_server_trickling_its_body_is_cut_at_the_deadline():
    body = json.dumps([STAR] * 3).encode()

    def script(conn, head, srv):
        srv.send(conn, response(headers={"Content-Type": "application/json"}, body=body)[: -len(body)])
        srv.trickle(conn, body, every=0.3)

    with RawServer(script) as server:
        with pytest.raises(Transient, match="deadline"):
            http_to(server, http_timeout=1).get(f"{server.url}/user/starred")
        assert server.client_gone.wait(60)
    assert server.sent < len(response(body=body))


@pytest.mark.system
def test_a_trickling_network_gets_a_transient_error_and_the_others_run(db):
    body = json.dumps([STAR]).encode()

    def script(conn, head, srv):
        if b"slow-token" in head:
            srv.trickle(conn, response(body=b"[]"), every=0.3)
        else:
            srv.send(conn, response(headers={"Content-Type": "application/json"}, body=body))

    with RawServer(script) as server:
        settings = settings_for_tests(github_api_url=server.url, http_timeout=1)
        slow = add_network(db, accessToken="slow-token-1234")
        fast = add_network(db, user="fast@example.com")
        report = run_once(db, "initial", settings, now=T0)
    assert report.by_status == {"transient": 1, "ok": 1}
    assert "deadline" in network(db, slow)["lastError"]["message"]
    assert network(db, fast)["mode"] == "normal" and db.items.count_documents({"user": "fast@example.com"}) == 1


BOMB_CLIENT = """
import json, sys
sys.path[:0] = {paths!r}
from collector.sdk.http import Http
from collector.sdk.errors import BadResponse
from collector.settings import settings_for_tests
import tracemalloc
def peak(): return tracemalloc.get_traced_memory()[1] / 2**20  # Python's own allocations: what a body costs
http = Http(settings_for_tests(github_api_url={url!r}))
http.get({url!r} + "/warm-up")
tracemalloc.start()
base = peak()
try:
    http.get({url!r} + "/bomb")
    kind = "ok"
except BadResponse as exc:
    kind = "badResponse: " + exc.message
print(json.dumps({{"kind": kind, "base_mb": base, "peak_mb": peak(), "cap_mb": http.max_bytes / 2**20}}))
"""


def encoded_bomb(encoding: str, mib: int) -> bytes:
    zeros = b"\0" * (mib * 2**20)
    if encoding == "gzip":
        return gzip.compress(zeros, 9)
    if encoding == "deflate":
        return zlib.compress(zeros, 9)
    if encoding == "deflate-raw":
        packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        return packer.compress(zeros) + packer.flush()
    return gzip.compress(gzip.compress(zeros, 9), 9)  # gzip, gzip


@pytest.mark.system
@pytest.mark.parametrize(
    ("encoding", "header"),
    [("gzip", "gzip"), ("deflate", "deflate"), ("deflate-raw", "deflate"), ("gzip, gzip", "gzip, gzip")],
)
def test_a_bomb_is_refused_at_the_cap_with_memory_bounded_whatever_the_encoding(encoding, header):
    bomb = encoded_bomb(encoding, 400)  # well under 1 MB on the wire, 400 MiB decoded

    def script(conn, head, srv):
        if b"/bomb" in head:
            srv.send(
                conn, response(headers={"Content-Encoding": header, "Content-Type": "application/json"}, body=bomb)
            )
        else:
            srv.send(conn, response(body=b"[]"))

    with RawServer(script) as server:
        code = BOMB_CLIENT.format(paths=sys.path, url=server.url)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert len(bomb) < 1024 * 1024
    assert result["kind"].startswith("badResponse") and "cap" in result["kind"]
    assert result["cap_mb"] == 4  # the default: about 7 times the largest real page (a 100-star GitHub page)
    # decoded in bounded steps: the peak grows by about the cap plus a small constant, any layering
    assert result["peak_mb"] - result["base_mb"] < result["cap_mb"] + 2, result  # measured: 4.2-4.3 MiB


@pytest.mark.system
def test_a_declared_huge_body_is_refused_before_reading_and_the_connection_dropped():
    def script(conn, head, srv):
        srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n[")
        srv.trickle(conn, b"1," * 200, every=0.05)

    with RawServer(script) as server:
        with pytest.raises(BadResponse, match="exceeds the 1048576-byte cap"):
            http_to(server, http_max_bytes=1024 * 1024).get(f"{server.url}/x")
        assert server.client_gone.wait(60)


@pytest.mark.system
def test_an_undeclared_body_over_the_cap_is_refused():
    def script(conn, head, srv):
        srv.send(conn, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b" " * (3 * 1024 * 1024))

    with RawServer(script) as server:
        with pytest.raises(BadResponse, match="cap"):
            http_to(server, http_max_bytes=1024 * 1024).get(f"{server.url}/x")


@pytest.mark.system
def test_a_compressed_page_cut_short_by_a_closed_connection_is_a_bad_response_and_nothing_is_stored(db):
    """A body without a length ends where the connection closes: a page cut there reads as a shorter page at the
    HTTP level. Its gzip stream has not ended, so it is refused rather than mapped (and the walk not ended)."""
    packed = gzip.compress(json.dumps([STAR] * 100).encode())

    def script(conn, head, srv):
        srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n")
        srv.send(conn, packed[: len(packed) - 20])

    with RawServer(script) as server:
        settings = settings_for_tests(github_api_url=server.url)
        cut = add_network(db)
        report = run_once(db, "initial", settings, now=T0)
    assert report.by_status == {"badResponse": 1}
    stored = network(db, cut)
    assert "cut short" in stored["lastError"]["message"]
    assert stored.get("mode", "initial") == "initial" and stored.get("page", 1) == 1  # the walk did not move on
    assert db.items.count_documents({}) == 0


@pytest.mark.system
@pytest.mark.parametrize("body", ["cut short", "not gzip", "decodes past the cap", "over the cap as sent"])
@pytest.mark.parametrize(
    "status, headers, kind",
    [
        ("429 Too Many Requests", {"Retry-After": "3600"}, "rateLimit"),
        ("401 Unauthorized", {}, "unauthorized"),
        ("503 Service Unavailable", {}, "transient"),
    ],
)
def test_an_error_answer_whose_body_cannot_be_decoded_keeps_the_meaning_of_its_status(db, body, status, headers, kind):
    """A proxy's or a server's error page can be as broken as any body; its status and headers still say what
    happened, and a 429's wait is honoured rather than lost behind a `badResponse` about the body."""
    packed = gzip.compress(b'{"message": "API rate limit exceeded"}' * 50)
    sent = {
        "cut short": packed[:-10],
        "not gzip": b"\x1f\x8b" + b"not gzip at all",
        "decodes past the cap": gzip.compress(b" " * 200_000),
        "over the cap as sent": gzip.compress(random.Random(1).randbytes(100_000)),
    }[body]
    answer = response(status, {**headers, "Content-Encoding": "gzip"}, sent)
    with RawServer(lambda conn, head, srv: srv.send(conn, answer)) as server:
        doc = add_network(db)
        settings = settings_for_tests(github_api_url=server.url, http_max_bytes=64 * 1024)
        report = run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert report.by_status == {kind: 1}
    if kind == "rateLimit":
        assert state["mode"] == "rateLimit" and state["scheduledTo"] == T0 + timedelta(hours=1)


@pytest.mark.system
@pytest.mark.parametrize(
    "status, headers, comes_back",
    [
        (
            "403 Forbidden",
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "100000000000000000000"},
            T0 + timedelta(hours=24),
        ),
        (
            "403 Forbidden",
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "253402300800"},
            T0 + timedelta(hours=24),
        ),
        ("403 Forbidden", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "inf"}, T0 + timedelta(seconds=60)),
        ("403 Forbidden", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"}, T0 + timedelta(seconds=60)),
        ("429 Too Many Requests", {"Retry-After": "100000000000000000000"}, T0 + timedelta(hours=24)),
        (
            "429 Too Many Requests",
            {"Retry-After": format_datetime(T0 + timedelta(hours=2), usegmt=True)},
            T0 + timedelta(hours=2),
        ),
        ("429 Too Many Requests", {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, T0 + timedelta(hours=24)),
        ("429 Too Many Requests", {"Retry-After": "garbage"}, T0 + timedelta(seconds=60)),
    ],
)
def test_rate_limit_times_from_a_server_are_honoured_within_bounds(db, status, headers, comes_back):
    with RawServer(lambda conn, head, srv: srv.send(conn, response(status, headers, b'{"message": "no"}'))) as server:
        doc = add_network(db)
        run_once(db, "initial", settings_for_tests(github_api_url=server.url), now=T0)
    state = network(db, doc)
    assert state["mode"] == "rateLimit" and "lastError" not in state
    assert state["scheduledTo"] == comes_back


@pytest.mark.system
@pytest.mark.parametrize("jitter", [0.0, 0.6])
def test_a_refusal_whose_reset_is_already_past_waits_the_minimum_not_now(db, jitter):
    import random

    past = str(int((T0 - timedelta(minutes=5)).timestamp()))
    answer = response("403 Forbidden", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": past}, b"{}")

    class Fixed(random.Random):
        def random(self):
            return jitter

    with RawServer(lambda conn, head, srv: srv.send(conn, answer)) as server:
        doc = add_network(db)
        run_once(db, "initial", settings_for_tests(github_api_url=server.url), now=T0, rng=Fixed())
        assert run_once(db, "initial", settings_for_tests(github_api_url=server.url), now=T0).tasks == 0
    waited = (network(db, doc)["scheduledTo"] - T0).total_seconds()
    assert waited == pytest.approx(60 * (1 + jitter / 2), abs=0.01)


@pytest.mark.system
def test_a_connection_to_loopback_from_an_untrusted_host_is_refused_at_connect():
    with RawServer(lambda conn, head, srv: srv.send(conn, response(body=b"[]"))) as server:
        http = Http(settings_for_tests(github_api_url="https://api.github.test"))
        with pytest.raises(BadResponse, match="refused: non-public address"):
            http.get(f"{server.url}/api/v1/favourites", headers={"Authorization": f"Bearer {TOKEN}"})
        assert server.requests == []  # not one byte of the request (nor the token) was sent
        allowed = Http(settings_for_tests(github_api_url="https://api.github.test", allow_private_hosts=True))
        assert allowed.get(f"{server.url}/x").status_code == 200


@pytest.mark.system
def test_a_redirect_hop_to_loopback_is_refused_at_the_address_connected_to():
    def script(conn, head, srv):
        if head.startswith(b"GET /start"):
            srv.send(conn, response("302 Found", {"Location": f"http://127.0.0.1:{srv.port}/inside"}))
        else:
            srv.send(conn, response(body=b"secret internal page"))

    with RawServer(script) as server:
        trusted = f"http://localhost:{server.port}"  # the configured host; its redirect target is another host
        http = Http(settings_for_tests(github_api_url=trusted))
        with pytest.raises(BadResponse, match="non-public address"):
            http.get(f"{trusted}/start")
    assert [r.split(b" ")[1] for r in server.requests] == [b"/start"]


def test_a_redirect_from_https_to_http_is_refused():
    session = _Session()
    resp = requests.Response()
    resp.url, resp.status_code = "https://mastodon.example/api/v1/favourites", 302
    resp.headers["Location"] = "http://127.0.0.1/admin"
    with pytest.raises(RedirectRefused, match="https to http"):
        session.get_redirect_target(resp)
    resp.headers["Location"] = "https://cdn.mastodon.example/x"
    assert session.get_redirect_target(resp) == "https://cdn.mastodon.example/x"


@pytest.mark.system
@pytest.mark.parametrize("location", [b"http://[::1", b"/\xff\xfe", b"https://x.example:99999999/"])
def test_a_redirect_to_a_location_that_cannot_be_read_is_a_bad_response(location):
    def script(conn, request, server):
        server.send(conn, b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n")

    with RawServer(script) as server:
        with pytest.raises(BadResponse):
            http_to(server).get(f"{server.url}/x")


@pytest.mark.system
def test_an_interim_answer_is_skipped_and_the_answer_after_it_is_its_own_requests():
    """A server that sends 103 Early Hints before its answer (http.client skips only 100): the interim answer is
    read past (net/answers.py), the request gets the answer meant for it, and the next request its own (more
    kinds, bounds and kept-alive connections: tests/net/test_interim.py)."""
    connections = []

    def script(conn, request, server):
        connections.append(request)
        if len(connections) == 1:
            server.send(conn, b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            server.stop.wait(0.3)  # the server works on the answer meanwhile
            server.send(conn, response(body=b'["for A"]'))
        else:
            server.send(conn, response(body=b'["for B"]'))

    with RawServer(script) as server:
        http = http_to(server)
        assert http.get(f"{server.url}/a").content == b'["for A"]'
        assert http.get(f"{server.url}/b").content == b'["for B"]'
    assert len(connections) == 2


def test_a_users_instance_redirecting_to_plain_http_is_an_error_on_that_network(db, http_mock):
    settings = settings_for_tests(allow_private_hosts=True)
    inside = []
    http_mock.add(
        responses.GET,
        "https://mastodon.example/api/v1/favourites",
        status=302,
        headers={"Location": "http://127.0.0.1/admin"},
    )
    http_mock.add_callback(
        responses.GET, "http://127.0.0.1/admin", callback=lambda r: inside.append(r) or (200, {}, "[]")
    )
    doc = add_network(db, service="mastodon", instanceUrl="https://mastodon.example")
    run_once(db, "initial", settings, now=T0)
    assert inside == []
    error = network(db, doc)["lastError"]
    assert error["kind"] == "badResponse" and "https to http" in error["message"]


@pytest.mark.system
def test_interrupting_cuts_running_requests_and_refuses_new_ones():
    whole = response(body=b"[]")
    with RawServer(lambda conn, head, srv: srv.trickle(conn, whole, every=0.3)) as server:
        http = http_to(server, http_timeout=30)
        threading.Timer(0.5, http.interrupt_after, args=(0.2,)).start()
        with pytest.raises(Interrupted, match="cut short"):
            http.get(f"{server.url}/a")
        with pytest.raises(Interrupted, match="not started"):
            http.get(f"{server.url}/b")
    assert len(server.requests) == 1


@pytest.mark.system
def test_sigterm_stops_a_pass_stuck_on_a_slow_host_and_leaves_the_network_as_it_was(db):
    whole = response(body=b"[]")
    with RawServer(lambda conn, head, srv: srv.trickle(conn, whole, every=0.3)) as server:
        settings = settings_for_tests(github_api_url=server.url, http_timeout=1000)
        doc = add_network(db, page=3)
        collector = Collector(db, settings)
        daemon = Daemon(collector, "initial")
        result = {}
        thread = threading.Thread(target=lambda: result.setdefault("code", daemon.run(once=True)))
        thread.start()
        while not server.requests and thread.is_alive():
            thread.join(0.05)
        settings_short = collector.settings.with_(http_timeout=0.5)
        collector.settings = settings_short  # the stop is bounded by the deadline in force
        daemon.on_signal(signal.SIGTERM)
        thread.join(60)
        collector.close()
    assert not thread.is_alive() and result["code"] == 0
    assert server.sent < len(whole)
    state = network(db, doc)
    assert state["page"] == 3 and state.get("errors", 0) == 0 and "lastError" not in state
    assert "leaseOwner" not in state  # given back: due again for whoever runs next


@pytest.mark.parametrize(
    "address, public",
    [
        ("93.184.216.34", True),
        ("2a03:2880:f003:c07:face:b00c::2", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("64:ff9b::7f00:1", False),
        ("64:ff9b:1::a00:1", False),
        ("2002:7f00:1::1", False),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),
        ("not an address", False),
    ],
)
def test_which_addresses_count_as_public(address, public):
    from collector.sdk.safeurl import is_public

    assert is_public(address) is public


CONCURRENT_BOMBS_CLIENT = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
sys.path[:0] = {paths!r}
from collector.sdk.http import Http
from collector.sdk.errors import BadResponse
from collector.settings import settings_for_tests
import tracemalloc
def peak(): return tracemalloc.get_traced_memory()[1] / 2**20  # Python's own allocations: what a body costs
settings = settings_for_tests(github_api_url={url!r})
http = Http(settings, pool_size=settings.concurrency)
http.get({url!r} + "/warm-up")
tracemalloc.start()
base = peak()
def one(k):
    try:
        http.get({url!r} + "/bomb/" + str(k))
        return "ok"
    except BadResponse as exc:
        return "badResponse"
with ThreadPoolExecutor(settings.concurrency) as pool:
    kinds = list(pool.map(one, range(settings.concurrency)))
print(json.dumps({{"kinds": kinds, "base_mb": base, "peak_mb": peak(), "cap_mb": http.max_bytes / 2**20,
                   "concurrency": settings.concurrency}}))
"""


@pytest.mark.system
def test_concurrency_hostile_hosts_at_once_stay_well_inside_the_units_memory_max():
    bombs = {"gzip, gzip": encoded_bomb("gzip, gzip", 200), "deflate": encoded_bomb("deflate", 200)}

    def script(conn, head, srv):
        if b"/bomb/" in head:
            encoding = "gzip, gzip" if int(head.split(b"/bomb/")[1].split(b" ")[0]) % 2 else "deflate"
            srv.send(conn, response(headers={"Content-Encoding": encoding}, body=bombs[encoding]))
        else:
            srv.send(conn, response(body=b"[]"))

    with RawServer(script) as server:
        code = CONCURRENT_BOMBS_CLIENT.format(paths=sys.path, url=server.url)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["kinds"] == ["badResponse"] * result["concurrency"] == ["badResponse"] * 16
    # the unit's MemoryMax is 1 GiB: 16 bombs at once add about 16 x (cap + a constant), far below it
    grown = result["peak_mb"] - result["base_mb"]
    assert grown < result["concurrency"] * (result["cap_mb"] + 2) < 512, result  # measured: 48-66 MiB


@pytest.mark.parametrize(
    ("answers", "attempted"),
    [
        ([["127.0.0.1"]], []),  # loopback only: refused before any connection
        ([["10.1.2.3", "192.168.0.9", "::1", "169.254.169.254", "100.64.0.1"]], []),  # every non-public kind
        ([["93.184.216.34", "127.0.0.1"]], ["93.184.216.34"]),  # mixed: only the address that passed is tried
        ([["93.184.216.34"], ["127.0.0.1"]], ["93.184.216.34", "93.184.216.34"]),  # rebinding: checked = connected
    ],
    ids=["loopback", "private-kinds", "mixed", "rebinding"],
)
def test_the_address_is_checked_before_any_connection_is_made(monkeypatch, answers, attempted):
    """A resolver we control and a connect guard that records every address a connection is attempted to (and
    never connects anywhere): no attempt to a non-public address, ever, whatever the name answers."""
    import socket as socket_module

    from collector.net import connections

    lookups = iter(answers * 4)
    tried: list[str] = []

    def resolver(host, port, *args, **kwargs):
        addresses = next(lookups)
        return [
            (socket_module.AF_INET6 if ":" in a else socket_module.AF_INET, socket_module.SOCK_STREAM, 6, "", (a, port))
            for a in addresses
        ]

    def guard(address, *args, **kwargs):
        tried.append(address[0])
        raise ConnectionRefusedError("the guard never connects")

    monkeypatch.setattr(connections.socket, "getaddrinfo", resolver)
    monkeypatch.setattr(connections.urllib3_connection, "create_connection", guard)
    http = Http(settings_for_tests(github_api_url="https://api.github.test"))
    for _ in range(2 if len(answers) > 1 else 1):
        with pytest.raises((BadResponse, Transient)) as caught:
            http.get("https://instance.example/api/v1/favourites")
        if not attempted:
            assert caught.value.message.startswith("connection to instance.example refused: non-public address")
    assert set(tried) == set(attempted)  # (the session retries a failed connect: the same address again)
    assert not [a for a in tried if not is_public(a)]


def test_a_name_with_many_unanswering_addresses_gets_one_deadline_not_one_per_address(monkeypatch):
    """A host whose name answers 20 public addresses that all drop the connection attempt (a blackhole): each
    attempt was given the whole HTTP_TIMEOUT, 20 x 3 tries x 30 s. The attempts now share the request's deadline
    (the connect guard records the timeout each was given, and waits it out as a blackhole would)."""
    import socket as socket_module
    import time

    from collector.net import connections

    addresses = [f"93.184.216.{k}" for k in range(1, 21)]
    granted: list[float] = []

    def resolver(host, port, *args, **kwargs):
        return [(socket_module.AF_INET, socket_module.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    def blackhole(address, timeout, *args, **kwargs):
        granted.append(timeout)
        time.sleep(timeout)
        raise TimeoutError("timed out")

    monkeypatch.setattr(connections.socket, "getaddrinfo", resolver)
    monkeypatch.setattr(connections.urllib3_connection, "create_connection", blackhole)
    http = Http(settings_for_tests(github_api_url="https://api.github.test", http_timeout=0.5))
    with pytest.raises(Transient):
        http.get("https://instance.example/api/v1/favourites")
    assert granted and sum(granted) <= 0.5 + 0.01, granted  # one budget for every address and every retry
    assert len(granted) < len(addresses)


@pytest.mark.system
def test_a_cookie_one_server_sets_never_travels_with_a_later_request_nor_a_redirect():
    """One session serves every network: a Set-Cookie answered to one user's request must not be sent with the
    next request (another user's), nor with a redirect's next hop, and the parameters and headers still arrive
    as given (the GET fast path prepares them itself)."""

    def script(conn, head, srv):
        if head.startswith(b"GET /start"):
            srv.send(conn, response("302 Found", {"Location": "/next", "Set-Cookie": "sid=user-one; Path=/"}))
        else:
            srv.send(conn, response(headers={"Set-Cookie": "sid=user-one-again; Path=/"}, body=b"[]"))

    with RawServer(script) as server:
        http = Http(settings_for_tests(github_api_url=server.url))
        assert http.get(f"{server.url}/start", params={"page": 2, "q": "a b"}).status_code == 200
        http.get(f"{server.url}/other", headers={"If-None-Match": 'W/"1"'})
    lines = [request.decode("latin-1").lower() for request in server.requests]
    assert [line.split(" ")[1] for line in lines] == ["/start?page=2&q=a+b", "/next", "/other"]
    assert not any("\r\ncookie:" in line for line in lines)
    assert '\r\nif-none-match: w/"1"\r\n' in lines[2]


@pytest.mark.system
def test_a_header_value_from_a_document_cannot_add_a_header():
    with RawServer(lambda conn, head, srv: srv.send(conn, response(body=b"[]"))) as server:
        http = Http(settings_for_tests(github_api_url=server.url))
        with pytest.raises(Transient):  # requests refuses the value before anything is sent
            http.get(f"{server.url}/x", headers={"If-None-Match": 'W/"1"\r\nX-Injected: 1'})
        http.get(f"{server.url}/y", headers={"If-None-Match": 'W/"1"'})
    assert [request.split(b" ")[1] for request in server.requests] == [b"/y"]  # the refused one was never sent


@pytest.mark.system
def test_conditional_polls_one_after_another_reuse_the_kept_alive_connection():
    """A 304 must leave its connection ready for the next request, even while the caller still holds the 304 (one
    not read to its end made the next request on that kept-alive connection fail with ResponseNotReady)."""
    from collector.devtools.fakeapi import FakeGitHub, FakeServer

    fake = FakeGitHub()
    fake.add_user(TOKEN, generated=30, seed=1)
    with FakeServer(fake) as url:
        http = Http(settings_for_tests(github_api_url=url))
        kept = [  # each response still held while the next request goes out, as a connector may hold it
            http.get(
                f"{url}/user/starred",
                params={"per_page": 10, "page": 1},
                headers={"If-None-Match": 'W/"0-1-10"', "Authorization": f"Bearer {TOKEN}"},
            )
            for _ in range(4)
        ]
        page = http.get(f"{url}/user/starred", headers={"Authorization": f"Bearer {TOKEN}"})
    assert [r.status_code for r in kept] == [304] * 4 and page.status_code == 200 and len(page.json()) == 30
    assert fake.not_modified == 4 and fake.requests == 5


@pytest.mark.system
def test_a_request_sent_on_a_kept_alive_connection_is_cut_at_the_deadline_when_the_server_stops_reading():
    """On a kept-alive connection a request is sent without a socket timeout (setting one costs two system calls
    per request): the deadline watch alone ends a send the server no longer reads."""
    keep_alive = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]"

    def answer_once_then_stop_reading(conn, head, srv):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the client's send fills it
        srv.send(conn, keep_alive)
        srv.stop.wait(60)

    with RawServer(answer_once_then_stop_reading) as server:
        http = http_to(server, http_timeout=1)
        assert http.get(f"{server.url}/user/starred").json() == []
        with pytest.raises(Transient, match="deadline of 1s exceeded"):
            http.get(f"{server.url}/user/starred", headers={"X-Large": "x" * 8 * 2**20})
    assert len(server.requests) == 1  # the second request went out on the same connection


@pytest.mark.system
def test_requests_on_a_kept_alive_connection_leave_its_socket_timeout_as_it_is(monkeypatch):
    """Each socket timeout set is a system call (an ioctl) that hands the interpreter lock to another thread: on a
    kept-alive connection a GET's send and reads both go without one, so after the first request nothing is set."""
    from collector.devtools.fakeapi import FakeGitHub, FakeServer

    fake = FakeGitHub()
    fake.add_user(TOKEN, generated=30, seed=1)
    set_to: list = []
    plain_settimeout = socket.socket.settimeout

    def counted(sock, value):
        if threading.get_ident() == own:  # not a thread another test of this worker left running
            set_to.append(value)
        plain_settimeout(sock, value)

    own = threading.get_ident()

    monkeypatch.setattr(socket.socket, "settimeout", counted)
    headers = {"If-None-Match": 'W/"0-1-10"', "Authorization": f"Bearer {TOKEN}"}
    with FakeServer(fake) as url:
        http = Http(settings_for_tests(github_api_url=url))
        first = http.get(f"{url}/user/starred", params={"per_page": 10, "page": 1}, headers=headers)
        assert set_to  # connecting set the connect timeout, reading the response none
        set_to.clear()
        again = [
            http.get(f"{url}/user/starred", params={"per_page": 10, "page": 1}, headers=headers).status_code
            for _ in range(5)
        ]
    assert first.status_code == 304 and again == [304] * 5 and fake.requests == 6
    assert set_to == []


@pytest.mark.system
def test_a_page_that_arrived_whole_is_taken_in_by_one_read(monkeypatch):
    """Every read is a system call that lets go of the interpreter lock (under load, up to a switch interval to get
    it back): a gzipped page that arrived whole (~32 KB for 100 stars) is taken in by the read that finds its
    status line, not by a second read for the rest as http.client's 8 KiB reader would."""
    page = gzip.compress(b'[{"repo": 1}]' + random.Random(1).randbytes(32_000))  # as large as a page gzipped
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nConnection: close\r\n"
        + f"Content-Length: {len(page)}\r\n\r\n".encode()
        + page
    )

    def whole(conn, request, server):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2**20)  # one write, one segment on loopback
        server.send(conn, reply)

    reads: list[int] = []
    plain_recv_into = socket.socket.recv_into

    def counted(sock, buffer, *args):
        got = plain_recv_into(sock, buffer, *args)
        if threading.get_ident() == own:  # not a thread another test of this worker left running
            reads.append(got)
        return got

    own = threading.get_ident()

    monkeypatch.setattr(socket.socket, "recv_into", counted)
    with RawServer(whole) as server:
        http = http_to(server)
        for _ in range(3):
            assert http.get(f"{server.url}/user/starred").content.startswith(b'[{"repo"')
    assert len(page) > 30_000 and reads == [len(reply)] * 3
