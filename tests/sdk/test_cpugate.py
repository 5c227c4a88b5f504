"""The CPU gate: at most its places taken at once, and re-entrant per thread (a step inside another never waits
for a place of its own, so nesting cannot deadlock)."""

from __future__ import annotations

import threading

from collector.sdk.cpugate import CpuGate


def test_nested_steps_on_every_thread_take_one_place_each_and_never_deadlock():
    gate = CpuGate(places=2)
    inside, most, lock = [0], [0], threading.Lock()
    release = threading.Event()

    def work() -> None:
        with gate, gate:  # a step inside another
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            release.wait(5)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for _ in range(500):  # until two are inside (each waits there for the release)
        with lock:
            held = inside[0]
        if held == 2:
            break
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(10)
    assert held == 2 and most[0] == 2  # two inside, the four others waiting: none got in by nesting
    assert not any(thread.is_alive() for thread in threads)
    assert gate.places.acquire(blocking=False) and gate.places.acquire(blocking=False)  # both places given back
