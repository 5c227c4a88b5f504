"""The worker threads (collector/engine/workers.py): results by ticket, errors carried, threads made as needed."""

from __future__ import annotations

import queue
import threading

import pytest

from collector.engine.workers import Finished, Workers


def collect(done: queue.SimpleQueue, count: int) -> dict[int, Finished]:
    return {finished.ticket: finished for finished in (done.get(timeout=60) for _ in range(count))}


def test_each_result_comes_back_with_its_ticket():
    workers, done = Workers(4), queue.SimpleQueue()
    tickets = {workers.submit(pow, (k, 2), done.put): k for k in range(10)}
    finished = collect(done, 10)
    assert {ticket: f.value() for ticket, f in finished.items()} == {t: k * k for t, k in tickets.items()}
    workers.shutdown()


def test_an_exception_is_carried_to_whoever_takes_the_result():
    workers, done = Workers(2), queue.SimpleQueue()

    def boom() -> None:
        raise ValueError("the run's own bug")

    ticket = workers.submit(boom, (), done.put)
    finished = done.get(timeout=60)
    assert finished.ticket == ticket and isinstance(finished.error, ValueError)
    with pytest.raises(ValueError, match="the run's own bug"):
        finished.value()
    workers.shutdown()


def test_a_thread_that_is_free_again_takes_the_next_task_rather_than_a_new_thread():
    workers, done = Workers(8), queue.SimpleQueue()
    for k in range(20):  # one at a time: the thread that ran the last one is idle when the next comes
        workers.submit(abs, (-k,), done.put)
        assert done.get(timeout=60).value() == k
    assert len(workers.threads) == 1
    workers.shutdown()


def test_never_more_threads_than_its_size_and_every_task_runs():
    workers, done, gate = Workers(3), queue.SimpleQueue(), threading.Event()
    for k in range(10):
        workers.submit(lambda k=k: gate.wait(60) and k, (), done.put)
    assert len(workers.threads) == 3  # the other seven wait for a thread
    gate.set()
    assert sorted(f.value() for f in collect(done, 10).values()) == list(range(10))
    assert len(workers.threads) == 3
    workers.shutdown()


def test_shutdown_waits_for_the_tasks_given_and_refuses_new_ones():
    workers, done, gate = Workers(2), queue.SimpleQueue(), threading.Event()
    for _ in range(4):
        workers.submit(gate.wait, (10,), done.put)
    releaser = threading.Timer(0.2, gate.set)
    releaser.start()
    workers.shutdown(wait=True)  # returns once all four ran: none is dropped
    assert done.qsize() == 4 and all(f.value() is True for f in collect(done, 4).values())
    assert not any(thread.is_alive() for thread in workers.threads)
    with pytest.raises(RuntimeError, match="shut down"):
        workers.submit(abs, (1,), done.put)


def test_drain_takes_in_the_ends_that_arrive_while_it_gathers(monkeypatch):
    from collector.engine import workers

    completions: queue.SimpleQueue[Finished] = queue.SimpleQueue()
    completions.put(Finished(1, "first", None))
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # two more runs end while it gathers
        slept.append(seconds)
        completions.put(Finished(2, "second", None))
        completions.put(Finished(3, "third", None))

    monkeypatch.setattr(workers.time, "sleep", sleep)
    assert [f.ticket for f in workers.drain(completions, 1.0, 0.005)] == [1, 2, 3] and slept == [0.005]
    completions.put(Finished(4, "fourth", None))
    assert [f.ticket for f in workers.drain(completions, 1.0)] == [4] and slept == [0.005]  # no gathering asked
    assert workers.drain(completions, 0.0, 0.005) == [] and slept == [0.005]  # nothing ended: no wait either
