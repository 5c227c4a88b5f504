"""Request slots (collector/sdk/slots.py): requests out at once, in all and per service; a stop ends a wait; the
turn: one run at a time turns a large answer into items."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from collector.sdk import http as http_module
from collector.sdk import slots as slots_module
from collector.sdk.errors import Interrupted
from collector.sdk.http import TURN_BYTES, TURN_RAW_BYTES, Http
from collector.sdk.slots import Slots, serving, take_turn
from collector.settings import settings_for_tests

from helpers.proc import wait_until
from helpers.rawserver import RawServer, response


def take_in_thread(slots: Slots, service: str, until=lambda: None) -> tuple[threading.Thread, list]:
    got: list = []

    def wait() -> None:
        with serving(service):
            got.append(slots.take(until))

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, got


def test_a_request_waits_for_a_free_slot_and_gets_the_one_given_back():
    slots = Slots(1, lambda service: 5)
    first = slots.take(lambda: None)
    thread, got = take_in_thread(slots, "github")
    thread.join(timeout=0.3)
    assert thread.is_alive() and not got  # every slot is out
    first.release()
    thread.join(timeout=60)
    assert got and got[0] is not None
    got[0].release()
    assert slots.total.acquire()  # the slot came back


def test_a_run_waiting_for_its_service_holds_no_slot_of_the_whole():
    slots = Slots(2, lambda service: 1 if service == "capped" else 2)
    with serving("capped"):
        first = slots.take(lambda: None)
    thread, got = take_in_thread(slots, "capped")  # waits for capped's only slot
    thread.join(timeout=0.3)
    assert thread.is_alive() and not got
    with serving("free"):
        other = slots.take(lambda: time.monotonic())  # a cutoff already passed: only a free slot, no wait
    assert other is not None
    other.release()
    first.release()
    thread.join(timeout=60)
    assert got and got[0] is not None
    got[0].release()


def test_free_says_whether_a_poll_would_find_its_slots_without_taking_one():
    slots = Slots(2, lambda service: 1)
    assert slots.free("github") and slots.free(None)
    held = slots.try_take("github")
    assert held is not None
    assert not slots.free("github") and slots.free("gist") and slots.free(None)  # the service's one slot taken
    other = slots.try_take("gist")
    assert other is not None and not slots.free("mastodon") and not slots.free(None)  # the whole's two taken
    held.release()
    assert slots.free("github") and slots.free(None)
    assert slots.try_take("github") is not None  # a look took nothing


def test_the_stop_ends_a_wait_for_a_slot():
    slots = Slots(1, lambda service: 1)
    held = slots.take(lambda: None)
    cutoff: list[float] = []
    thread, got = take_in_thread(slots, "github", until=lambda: cutoff[0] if cutoff else None)
    thread.join(timeout=0.3)
    assert thread.is_alive() and not got
    cutoff.append(time.monotonic() + 3600)  # a stop whose cutoff is an hour away: no new exchange waits its turn
    thread.join(timeout=60)
    assert got == [None]
    held.release()
    with serving("github"):  # a free slot is still taken while stopping (as requests start until the cutoff)
        free = slots.take(lambda: time.monotonic() + 3600)
    assert free is not None
    free.release()


@pytest.mark.system
def test_a_request_waiting_for_a_slot_when_the_collector_stops_is_not_sent():
    with RawServer(lambda conn, request, server: conn.sendall(response(body=b"[]"))) as server:
        http = Http(settings_for_tests(allow_private_hosts=True))
        http.slots = Slots(1, lambda service: 1)
        held = http.slots.take(lambda: None)
        outcome: list = []

        def ask() -> None:
            try:
                http.get(f"{server.url}/user/starred")
            except Interrupted as error:
                outcome.append(str(error))

        thread = threading.Thread(target=ask, daemon=True)
        thread.start()
        http.interrupt_after(3600)  # the stop's cutoff is far away, yet a request waiting for a slot is not sent
        thread.join(timeout=60)
        held.release()
        http.close()
    assert outcome == ["collector stopping: GET 127.0.0.1/user/starred not started"]
    assert server.requests == []


@pytest.mark.parametrize("size", [0, -3])
def test_a_concurrency_below_one_still_gives_one_slot(size):
    slots = Slots(size, lambda service: 0)
    assert slots.size == 1
    with serving("github"):
        held = slots.take(lambda: time.monotonic())
    assert held is not None
    held.release()


def test_a_runs_service_holds_for_slots_a_reload_made_while_it_ran():
    with serving("capped"):  # the run starts under the slots of the time
        after = Slots(2, lambda service: 1)  # a reload while the run goes on
        first = after.take(lambda: None)
        assert after.take(lambda: time.monotonic()) is None  # capped's one slot is out: the run's service counts
    other = after.take(lambda: time.monotonic())  # no service said: a slot of the whole, free
    assert other is not None
    other.release()
    first.release()


def turn_in_thread(service: str) -> tuple[threading.Thread, list]:
    got: list = []

    def run() -> None:
        with serving(service):
            take_turn()
            got.append(True)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_outside_a_run_an_answer_takes_no_turn():
    take_turn()  # a tool calling a connector by hand, on this thread: nothing is held
    thread, got = turn_in_thread("github")
    thread.join(timeout=60)
    assert got == [True]


def holding_the_turn() -> tuple[threading.Thread, threading.Event]:
    """A run on its own thread that has taken the turn and keeps it until the event returned is set."""
    has_turn, run_ends = threading.Event(), threading.Event()

    def hold() -> None:
        with serving("github"):
            take_turn()
            has_turn.set()
            run_ends.wait(60)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert has_turn.wait(60)
    return holder, run_ends


def test_one_run_at_a_time_has_the_turn_until_its_run_ends():
    holder, run_ends = holding_the_turn()
    thread, got = turn_in_thread("other")  # any service: there is one turn
    thread.join(timeout=0.3)
    assert thread.is_alive() and not got
    run_ends.set()  # the first run ends: the turn is given back
    thread.join(timeout=60)
    holder.join(timeout=60)
    assert got == [True]


@pytest.mark.system
def test_a_run_gives_the_turn_back_when_it_asks_again():
    large = b"[" + b"1," * TURN_BYTES + b"1]"
    other_has_turn = threading.Event()
    order: list[str] = []

    def script(conn, request, server):
        if b"/second" in request:  # answered once the other run has had the turn (or after 10 s)
            other_has_turn.wait(60)
        conn.sendall(response(body=large))

    with RawServer(script) as server:
        http = Http(settings_for_tests(allow_private_hosts=True))

        def asks_twice() -> None:
            with serving("github"):
                http.get(f"{server.url}/first")  # a large answer: this run takes the turn
                order.append("first answer")
                http.get(f"{server.url}/second")  # and gives it back as it asks again
                order.append("second answer")

        def other() -> None:
            with serving("github"):
                take_turn()
                order.append("other has the turn")
                other_has_turn.set()

        first = threading.Thread(target=asks_twice, daemon=True)
        first.start()
        wait_until(lambda: order, timeout=120)
        second = threading.Thread(target=other, daemon=True)
        second.start()
        first.join(timeout=60)
        second.join(timeout=60)
        http.close()
    assert order == ["first answer", "other has the turn", "second answer"]


@pytest.mark.system
def test_a_requests_slot_is_given_back_before_its_body_is_decoded(monkeypatch):
    second_sent = threading.Event()
    seen_while_decoding: list[bool] = []
    decode = http_module.decode_body

    def script(conn, request, server):
        if b"/second" in request:
            second_sent.set()
        conn.sendall(response(body=b"[1, 2, 3]"))

    decodes = itertools.count()

    def slow_decode(chunks, encoding, cap):
        if next(decodes) == 0:  # the first body: decoded only once the other request has gone out (or 10 s)
            seen_while_decoding.append(second_sent.wait(60))
        return decode(chunks, encoding, cap)

    monkeypatch.setattr(http_module, "decode_body", slow_decode)
    with RawServer(script) as server:
        http = Http(settings_for_tests(allow_private_hosts=True))
        http.slots = Slots(1, lambda service: 1)  # one slot: the second request goes only once the first gave it
        first = threading.Thread(target=lambda: http.get(f"{server.url}/first"), daemon=True)
        first.start()
        wait_until(lambda: server.requests, timeout=120)
        second = threading.Thread(target=lambda: http.get(f"{server.url}/second"), daemon=True)
        second.start()
        first.join(timeout=60)
        second.join(timeout=60)
        http.close()
    assert seen_while_decoding == [True]


@pytest.mark.system
def test_large_bodies_are_decoded_one_at_a_time_and_small_ones_at_once(monkeypatch):
    decoding, peak = [0], {}
    lock = threading.Lock()
    decode = http_module.decode_body

    def gauged_decode(chunks, encoding, cap):
        size = "large" if sum(map(len, chunks)) >= TURN_RAW_BYTES else "small"
        with lock:
            decoding[0] += 1
            peak[size] = max(peak.get(size, 0), decoding[0])
        time.sleep(0.1)  # long enough for four threads to overlap here unless something keeps them apart
        with lock:
            decoding[0] -= 1
        return decode(chunks, encoding, cap)

    def script(conn, request, server):
        body = b"[" + b"1," * TURN_RAW_BYTES + b"1]" if b"/large" in request else b"[1]"
        conn.sendall(response(body=body))

    monkeypatch.setattr(http_module, "decode_body", gauged_decode)
    with RawServer(script) as server:
        http = Http(settings_for_tests(allow_private_hosts=True))
        for size in ("large", "small"):
            gate = threading.Barrier(4)

            def run(size: str = size, gate: threading.Barrier = gate) -> None:
                with serving("github"):
                    gate.wait(timeout=60)
                    http.get(f"{server.url}/{size}")

            threads = [threading.Thread(target=run, daemon=True) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
        http.close()
    assert peak["large"] == 1 and peak["small"] > 1


def test_a_run_stuck_with_the_turn_holds_up_the_others_only_so_long(monkeypatch):
    monkeypatch.setattr(slots_module, "TURN_WAIT", 0.2)
    holder, run_ends = holding_the_turn()  # stuck with it until run_ends is set
    thread, got = turn_in_thread("github")  # goes on without the turn once it waited TURN_WAIT
    thread.join(timeout=60)
    assert got == [True]
    assert slots_module._TURN.locked()  # and gave back nothing it did not have: the stuck run still holds it
    run_ends.set()
    holder.join(timeout=60)
    assert not slots_module._TURN.locked()
