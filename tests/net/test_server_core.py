"""The server core's policy (collector/net/server.py), pure: whom a newcomer displaces at the bound, and whom the
byte budget cuts, before the bytes it makes room for are written."""

from __future__ import annotations

import pytest

from collector.net.server import IDLE, STREAM, WORKING, Budget, Room


def room_of(states: list[str], limit: int) -> Room[int]:
    room: Room[int] = Room(limit)
    for key, state in enumerate(states):
        room.add(key)
        room.mark(key, state)
    return room


@pytest.mark.parametrize(
    ("states", "victim"),
    [
        ([IDLE, IDLE, IDLE], 0),
        ([WORKING, STREAM, IDLE, IDLE], 2),  # the oldest idle one, however old the others
        ([STREAM, WORKING, STREAM, WORKING], 0),  # no idle one: the oldest stream
        ([WORKING, WORKING, STREAM], 2),
        ([WORKING, WORKING, WORKING], 0),  # all mid-request: the oldest
        ([WORKING] * 200 + [IDLE], 200),
    ],
)
def test_a_full_room_closes_the_oldest_idle_then_the_oldest_stream_then_the_oldest(states, victim):
    room = room_of(states, len(states))
    assert room.victim() == victim
    room.remove(victim)
    assert room.victim() is None and len(room) == len(states) - 1 and victim not in room


@pytest.mark.parametrize("limit", [1, 5, 256])
def test_a_room_with_a_place_left_closes_no_one(limit):
    room = room_of([IDLE] * (limit - 1), limit)
    assert room.victim() is None
    room.add(-1)
    oldest = 0 if limit > 1 else -1
    assert room.victim() == oldest and room.count(IDLE) == limit and room.oldest() == oldest
    room.mark(oldest, STREAM)
    assert room.state(oldest) == STREAM and room.oldest(STREAM) == oldest and room.oldest(WORKING) is None
    assert list(room) == [*range(limit - 1), -1]


def test_the_budget_cuts_the_clients_holding_most_until_the_rest_fits():
    budget = Budget(total=100, per_client=40)
    assert budget.to_cut({"a": 30, "b": 30, "c": 30}) == []
    assert budget.to_cut({"a": 10, "b": 60, "c": 50}) == ["b"]
    assert budget.to_cut({"a": 50, "b": 60, "c": 55, "d": 5}) == ["b", "c"]
    assert budget.to_cut({"a": 50, "b": 30, "new": 0}, 30) == ["a"]  # room made before 30 bytes more are written
    assert budget.to_cut({"a": 10, "b": 30}, 60) == []
    assert budget.to_cut({"a": 10, "new": 0}, 300) == ["a"]  # never one holding nothing, even when it cannot fit
    assert budget.to_cut({f"k{i}": 1 for i in range(150)}) == [f"k{i}" for i in range(50)]  # ties: oldest first
    assert [budget.over_client(n) for n in (0, 40, 41, 10**9)] == [False, False, True, True]
    assert not Budget(10).over_client(10**9)  # no share per client


# --- the metrics port's byte budget, over real sockets --------------------------------------------------------------
def read_all(sock) -> int:
    """The bytes a client reads until the server closes its connection."""
    sock.settimeout(30)
    got = 0
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except ConnectionResetError:
        pass
    return got


BIG = b"x" * 4_000_000  # the kernel takes about 100 KB of it whatever the client does


def big(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [BIG if environ["PATH_INFO"] == "/big" else b"ok\n"]


@pytest.mark.system
@pytest.mark.parametrize("answers_held", [1, 2, 4])
def test_the_metrics_port_cuts_its_slowest_readers_past_its_byte_budget(monkeypatch, answers_held):
    import socket

    from collector.daemon import httpserver

    from helpers.proc import wait_until

    budget = answers_held * len(BIG) + len(BIG) // 2
    monkeypatch.setattr(httpserver, "UNSENT_LIMIT", budget)
    server = httpserver.HttpServer(big, "127.0.0.1", 0, timeout=600)
    clients: list[socket.socket] = []
    seen: list[int] = []
    try:
        for n in range(answers_held + 3):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # never read: the answer waits in the server
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(sock)
            wait_until(lambda n=n: server.accepted == n + 1, every=0.005)
            seen.append(server.unsent)
        wait_until(lambda: server.closed["slow"] == 3, every=0.005)  # the three oldest: each held as much
        assert max(seen) <= budget and server.unsent <= budget
        whole = [read_all(c) > len(BIG) for c in clients]  # read now: the cut ones got a part of it, then the end
        assert whole == [False] * 3 + [True] * answers_held
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as reader:
            reader.sendall(b"GET /small HTTP/1.1\r\n\r\n")
            assert reader.recv(100).startswith(b"HTTP/1.1 200 OK")
    finally:
        for sock in clients:
            sock.close()
        server.close()
