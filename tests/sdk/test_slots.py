"""Request slots (collector/sdk/slots.py): requests out at once, in all and per service; a stop ends a wait."""

from __future__ import annotations

import threading
import time

import pytest

from collector.sdk.errors import Interrupted
from collector.sdk.http import Http
from collector.sdk.slots import Slots, serving
from collector.settings import settings_for_tests

from rawserver import RawServer, response


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
    thread.join(timeout=10)
    assert got and got[0] is not None
    got[0].release()
    assert slots.total.acquire(blocking=False)  # the slot came back


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
    thread.join(timeout=10)
    assert got and got[0] is not None
    got[0].release()


def test_the_stop_ends_a_wait_for_a_slot():
    slots = Slots(1, lambda service: 1)
    held = slots.take(lambda: None)
    cutoff: list[float] = []
    thread, got = take_in_thread(slots, "github", until=lambda: cutoff[0] if cutoff else None)
    thread.join(timeout=0.3)
    assert thread.is_alive() and not got
    cutoff.append(time.monotonic() + 3600)  # a stop whose cutoff is an hour away: no new exchange waits its turn
    thread.join(timeout=10)
    assert got == [None]
    held.release()
    with serving("github"):  # a free slot is still taken while stopping (as requests start until the cutoff)
        free = slots.take(lambda: time.monotonic() + 3600)
    assert free is not None
    free.release()


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
        thread.join(timeout=10)
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
