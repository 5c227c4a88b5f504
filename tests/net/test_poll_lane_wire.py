"""The polls' lane on the wire (net/pollloop.py, net/pollwire.py): real sockets, real TLS, scripted answers. Every
call ends once, gives its request slot back once, and only a clean exchange leaves its connection to the next."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from requests.utils import DEFAULT_CA_BUNDLE_PATH

from collector.net.addresses import Policy
from collector.net.pollloop import Answer, Expired, Lane, Outgoing, TooLarge, Unsent, tls_context

from helpers.tlsservers import BODY, Authority, TlsServer
from helpers.wireserver import CLOSE, WireServer, answer

PRIVATE_ALLOWED = Policy(True, frozenset())  # these servers are on 127.0.0.1 (ALLOW_PRIVATE_HOSTS)
CHECKED = Policy(False, frozenset())  # every host checked by address


def head(port: int, path: str = "/poll") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\r\n".encode()


def plain(port: int, path: str = "/poll") -> Outgoing:
    return Outgoing("http", "127.0.0.1", port, head(port, path))


class Calls:
    """The lane's ends as a test sees them: each call's (answer, error), and how often each slot was given back."""

    def __init__(self) -> None:
        self.ended: list[tuple[Answer | None, BaseException | None]] = []
        self.released = 0
        self.event = threading.Condition()

    def send(self, lane: Lane, outgoing: Outgoing) -> None:
        lane.send(outgoing, self.done, self.release)

    def release(self) -> None:
        with self.event:
            self.released += 1

    def done(self, answer: Answer | None, error: BaseException | None) -> None:
        with self.event:
            self.ended.append((answer, error))
            self.event.notify_all()

    def wait(self, count: int = 1) -> list[tuple[Answer | None, BaseException | None]]:
        with self.event:
            assert self.event.wait_for(lambda: len(self.ended) >= count, timeout=60), self.ended
            return list(self.ended)


@pytest.fixture
def lane():
    made: list[Lane] = []

    def make(
        timeout: float = 10.0, max_bytes: int = 64 * 1024, bundle: str = "", policy: Policy = PRIVATE_ALLOWED
    ) -> Lane:
        made.append(Lane(timeout, max_bytes, policy, tls_context(bundle, DEFAULT_CA_BUNDLE_PATH)))
        return made[-1]

    yield make
    for one in made:
        one.close()
        assert not one.thread.is_alive()


@pytest.mark.parametrize("uvloop_there", [True, False])
def test_the_lane_runs_on_uvloop_and_on_asyncios_own_loop_where_uvloop_is_missing(lane, monkeypatch, uvloop_there):
    import asyncio
    import sys

    if not uvloop_there:
        monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    calls, polls = Calls(), lane()
    assert type(polls.loop).__module__.startswith("uvloop") == uvloop_there
    assert isinstance(polls.loop, asyncio.AbstractEventLoop)
    with WireServer(lambda request: [answer(304, headers={"ETag": '"e"'})]) as server:
        calls.send(polls, plain(server.port))
        ((answered, error),) = calls.wait(1)
    assert error is None and answered is not None and answered.status == 304 and calls.released == 1


def test_a_304_comes_back_whole_and_its_connection_serves_the_next_poll(lane):
    calls, polls = Calls(), lane()
    with WireServer(lambda request: [answer(304, headers={"ETag": '"e"', "X-RateLimit-Remaining": "4999"})]) as server:
        calls.send(polls, plain(server.port))
        calls.wait(1)
        calls.send(polls, plain(server.port))
        (first, error), (second, _) = calls.wait(2)
        connections = [request.connection for request in server.requests]
    assert error is None and first is not None and first.status == 304 and first.chunks == []
    assert ("ETag", '"e"') in first.headers and ("X-RateLimit-Remaining", "4999") in first.headers
    assert second is not None and second.status == 304
    assert connections == [1, 1] and calls.released == 2


@pytest.mark.parametrize(
    "pieces",
    [
        [answer(304) + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"],  # a second answer in the same read
        [answer(103), answer(304)],  # an interim answer
        [b"HTTP/1.1 304 Not Modified\r\nNo Colon Here\r\n\r\n"],  # unreadable
        [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", CLOSE],  # cut short (the server hangs up)
        [b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % n for n in range(101)) + b"\r\n"],  # 101 headers
    ],
)
def test_what_the_lane_does_not_judge_is_unsent_and_its_connection_never_reused(lane, pieces):
    calls, polls = Calls(), lane()
    script = {1: pieces}
    with WireServer(lambda request: script.get(request.number, [answer(304)])) as server:
        calls.send(polls, plain(server.port))
        calls.wait(1)
        calls.send(polls, plain(server.port))
        (answer_one, error), (after, _) = calls.wait(2)
        connections = [request.connection for request in server.requests]
    assert answer_one is None and isinstance(error, Unsent)
    assert after is not None and after.status == 304 and connections == [1, 2] and calls.released == 2


def test_a_redirect_is_left_to_the_sessions_path_which_follows_it_checking_each_hop(lane):
    calls, polls = Calls(), lane()
    with WireServer(lambda request: [answer(302, headers={"Location": "/elsewhere"})]) as server:
        calls.send(polls, plain(server.port))
        ((got, error),) = calls.wait(1)
    assert got is None and isinstance(error, Unsent) and "redirect 302" in str(error) and calls.released == 1


def test_the_deadline_bounds_an_answer_trickled_byte_by_byte(lane):
    calls, polls = Calls(), lane(timeout=1.0)
    trickle = [b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n"] + [piece for _ in range(40) for piece in (b"x", 0.1)]
    with WireServer(lambda request: trickle) as server:
        calls.send(polls, plain(server.port))
        ((got, error),) = calls.wait(1)
    assert got is None and isinstance(error, Expired) and not error.cutoff and calls.released == 1


def test_the_stops_cutoff_cuts_an_exchange_under_way_and_one_sent_after_it(lane):
    calls, polls = Calls(), lane(timeout=30.0)
    with WireServer(lambda request: [5.0]) as server:
        calls.send(polls, plain(server.port))
        time.sleep(0.2)
        polls.clamp(time.monotonic() + 0.3)
        ((got, error),) = calls.wait(1)
        calls.send(polls, plain(server.port))
        calls.wait(2)
    assert got is None and isinstance(error, Expired) and error.cutoff
    assert isinstance(calls.ended[1][1], Expired) and calls.ended[1][1].cutoff and calls.released == 2


def test_a_host_that_must_be_checked_is_never_connected_to_on_a_private_address(lane):
    calls, polls = Calls(), lane(policy=CHECKED)
    with WireServer(lambda request: [answer(304)]) as server:
        calls.send(polls, plain(server.port))
        ((got, error),) = calls.wait(1)
        connections = server.connections
    assert got is None and isinstance(error, Unsent) and "no public address" in str(error)
    assert connections == 0 and calls.released == 1


@pytest.mark.parametrize(("status", "declared"), [(500, True), (500, False), (200, True), (200, False)])
def test_a_body_over_the_cap_keeps_an_error_answers_head_and_refuses_a_2xx(lane, status, declared):
    body = b"x" * 100_000
    reply = answer(status, body) if declared else b"HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n\r\n" % status
    pieces = [reply] if declared else [reply, b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"]
    calls, polls = Calls(), lane(max_bytes=64 * 1024)
    with WireServer(lambda request: pieces) as server:
        calls.send(polls, plain(server.port))
        ((got, error),) = calls.wait(1)
    if status >= 400:
        assert error is None and got is not None and got.status == status and got.chunks == []
    else:
        assert got is None and isinstance(error, TooLarge) and error.cap == 64 * 1024
        assert error.length == (len(body) if declared else None)
    assert calls.released == 1


def test_tls_is_verified_against_the_authorities_given_and_refused_otherwise(lane, tmp_path: Path):
    authority = Authority()
    with TlsServer(authority.leaf()) as server:
        outgoing = Outgoing("https", "127.0.0.1", server.port, head(server.port))
        trusted, untrusted = Calls(), Calls()
        trusted.send(lane(bundle=str(authority.bundle(tmp_path))), outgoing)
        untrusted.send(lane(), outgoing)  # certifi's authorities: the private CA is not among them
        ((got, error),) = trusted.wait(1)
        ((refused, why),) = untrusted.wait(1)
        answered = server.answered
    assert error is None and got is not None and got.status == 200 and b"".join(got.chunks) == BODY
    assert refused is None and isinstance(why, Unsent) and "CERTIFICATE_VERIFY_FAILED" in str(why)
    assert answered == 1


def test_an_https_request_on_a_lane_without_tls_authorities_is_never_sent_in_the_clear():
    """The lane reads its authorities at the first https poll (Http.lane_started): one that reaches a lane without
    them goes to the session's path, and no byte of it goes out."""
    polls, calls = Lane(10.0, 64 * 1024, PRIVATE_ALLOWED, None), Calls()
    try:
        with WireServer(lambda request: [answer(200)]) as server:
            calls.send(polls, Outgoing("https", "127.0.0.1", server.port, head(server.port)))
            ((got, error),) = calls.wait(1)
            time.sleep(0.3)  # (a connection would have been accepted by now)
            connections = server.connections
    finally:
        polls.close()
    assert got is None and isinstance(error, Unsent) and "TLS" in str(error)
    assert connections == 0 and calls.released == 1


def test_closing_the_lane_ends_what_runs_and_its_thread(lane):
    calls, polls = Calls(), lane(timeout=30.0)
    with WireServer(lambda request: [3.0]) as server:
        calls.send(polls, plain(server.port))
        time.sleep(0.2)
        polls.close()
        ((got, error),) = calls.wait(1)
    assert got is None and isinstance(error, Expired) and calls.released == 1 and not polls.thread.is_alive()


def test_connections_kept_idle_are_bounded_in_all_whatever_the_number_of_origins(lane, monkeypatch):
    monkeypatch.setattr("collector.net.pollloop.IDLE_TOTAL", 2)
    calls, polls = Calls(), lane()
    servers = [WireServer(lambda request: [answer(304)]) for _ in range(3)]
    for server in servers:
        server.__enter__()
    try:
        for n, server in enumerate(servers, 1):
            calls.send(polls, plain(server.port))
            calls.wait(n)
        kept = sum(len(exchanges) for exchanges in polls.idle.values())
        for n, server in enumerate(servers, 4):  # each origin again: the first two reuse their connection, the third
            calls.send(polls, plain(server.port))  # connects anew
            calls.wait(n)
        connections = [server.connections for server in servers]
    finally:
        for server in servers:
            server.__exit__(None, None, None)
    assert kept == 2 and connections == [1, 1, 2]


def test_a_requests_head_never_shows_in_a_repr_nor_a_bug_in_the_lanes_log(lane, caplog):
    outgoing = Outgoing("https", "api.github.test", 443, b"GET / HTTP/1.1\r\nAuthorization: Bearer ghp_SECRET\r\n\r\n")
    assert "ghp_SECRET" not in repr(outgoing)
    polls = lane()

    def bug() -> None:
        raise RuntimeError("a server said ghp_SECRET")

    polls.loop.call_soon_threadsafe(bug)
    deadline = time.monotonic() + 30
    while "poll lane" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "poll lane: RuntimeError in a callback" in caplog.text and "ghp_SECRET" not in caplog.text


def test_a_header_line_that_never_ends_is_refused_at_the_heads_bound(lane):
    calls, polls = Calls(), lane(timeout=30.0)
    endless = [b"HTTP/1.1 200 OK\r\nX-Endless: "] + [b"a" * 16384] * 12  # 192 KiB, no line end
    with WireServer(lambda request: [*endless, 5.0]) as server:
        calls.send(polls, plain(server.port))
        ((got, error),) = calls.wait(1)
    assert got is None and isinstance(error, Unsent) and "a head of more than 65536 bytes" in str(error)


def test_trailers_of_a_chunked_answer_are_not_headers(lane):
    calls, polls = Calls(), lane()
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-RateLimit-Remaining: 10\r\n\r\n"
        b"2\r\n[]\r\n0\r\nX-RateLimit-Remaining: 0\r\n\r\n"
    )
    with WireServer(lambda request: [chunked]) as server:
        calls.send(polls, plain(server.port))
        ((got, error),) = calls.wait(1)
    assert error is None and got is not None and b"".join(got.chunks) == b"[]"
    assert [value for name, value in got.headers if name == "X-RateLimit-Remaining"] == ["10"]


def test_bytes_a_server_sends_while_the_connection_is_idle_are_nobodys_answer(lane):
    calls, polls = Calls(), lane()
    script = {1: [answer(304), 0.3, b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"]}
    with WireServer(lambda request: script.get(request.number, [answer(304)])) as server:
        calls.send(polls, plain(server.port))
        calls.wait(1)
        time.sleep(1.0)  # the 408 arrives on the idle connection meanwhile
        calls.send(polls, plain(server.port))
        (_, (second, error)) = calls.wait(2)
        connections = [request.connection for request in server.requests]
    assert error is None and second is not None and second.status == 304 and connections == [1, 2]


def test_a_connection_opened_under_an_address_policy_a_reload_replaced_is_not_reused(lane):
    calls, polls = Calls(), lane()
    script = {1: [0.5, answer(304)]}
    with WireServer(lambda request: script.get(request.number, [answer(304)])) as server:
        calls.send(polls, plain(server.port))
        time.sleep(0.2)  # in flight when the reload comes
        polls.configure(10.0, 64 * 1024, Policy(True, frozenset({"api.github.test"})))
        calls.wait(1)
        calls.send(polls, plain(server.port))
        calls.wait(2)
        connections = [request.connection for request in server.requests]
    assert connections == [1, 2]


def test_a_request_sent_after_the_lane_closed_ends_at_once_for_the_sessions_path(lane):
    calls, polls = Calls(), lane()
    polls.close()
    calls.send(polls, plain(9))
    ((got, error),) = calls.wait(1)
    assert got is None and isinstance(error, Unsent) and calls.released == 1
