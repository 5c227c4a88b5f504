"""A stop sends nothing more: a batch in flight that the destination splits (413, halved again and again, or runs
split by bytes) sends no other request once the stop began, the stop cuts the requests of every lane's client still
running near its end, and what was not sent or was cut is not written — the entries stay queued as they were, to be
delivered again later."""

from __future__ import annotations

import threading

from collector.sinks.delivery import UNSENT, Fate, deliver, scrubber
from collector.sinks.sdk import DONE, Doc, TooLarge
from collector.sinks.store import DEAD, QUEUE

from helpers.fakesink import Clock, Destination, add_items, run, service, sink_settings


class Halving(Destination):
    """A destination whose body limit is one document (every larger batch is 413), whose first request waits for
    `gate`, and which records every request."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.arrived = threading.Event()
        self.gate = threading.Event()

    def deliver(self, docs: list) -> list:
        with self.lock:
            self.calls.append(len(docs))
        self.arrived.set()
        self.gate.wait(30)
        if len(docs) > 1:
            raise TooLarge("413 the batch is too large")
        return [DONE] * len(docs)


class Client:
    """A sink's HTTP client as the lane sees it: records the cutoffs it was given."""

    def __init__(self) -> None:
        self.cutoffs: list[float] = []

    def interrupt_after(self, seconds: float) -> None:
        self.cutoffs.append(seconds)


class HalvingSink:
    max_batch_bytes = 1024 * 1024

    def __init__(self, destination: Halving, halt: threading.Event | None = None):
        self.destination, self.halt = destination, halt

    def deliver(self, docs):
        try:
            return self.destination.deliver(list(docs))
        finally:
            if self.halt is not None:
                self.halt.set()  # the stop begins while this request runs


def docs(n: int) -> list[Doc]:
    return [Doc(f"{i:024x}", {"title": f"item {i}"}) for i in range(n)]


def test_a_split_batch_sends_no_half_once_the_stop_began():
    destination, halt = Halving(), threading.Event()
    destination.gate.set()
    verdicts = deliver(HalvingSink(destination, halt), docs(16), scrubber(()), halt)
    assert destination.calls == [16]  # the first request only: without the stop, 31 requests
    assert verdicts == [UNSENT] * 16 and UNSENT.outcome == Fate.CUT


def test_runs_split_by_bytes_after_the_first_are_not_sent_once_the_stop_began():
    destination, halt = Halving(), threading.Event()
    destination.gate.set()
    sink = HalvingSink(destination, halt)
    sink.max_batch_bytes = 100  # one document a run
    verdicts = deliver(sink, docs(5), scrubber(()), halt)
    assert destination.calls == [1] and verdicts[0].outcome == "done" and verdicts[1:] == [UNSENT] * 4


def test_a_batch_handed_to_a_thread_before_the_stop_sends_its_first_request():
    destination, halt = Halving(), threading.Event()
    destination.gate.set()
    halt.set()
    assert [v.outcome for v in deliver(HalvingSink(destination), docs(1), scrubber(()), halt)] == ["done"]


def test_the_stop_cuts_every_lane_and_writes_nothing_for_what_it_kept_from_being_sent(db):
    ids = add_items(db, 16)
    clock, destination = Clock(), Halving()
    destination.gate.set()  # the prepare (and nothing else) goes through at once
    settings = sink_settings("a", "b", SINK_A_CONCURRENCY="1", SINK_A_BATCH="16")
    svc = service(db, settings, clock, {"a": destination, "b": Destination()})
    run(svc, clock, rounds=1)  # prepared; sink b delivers its 16 at once
    destination.gate.clear()
    destination.arrived.clear()
    svc.step()  # the 16 of sink a handed to its thread: the first request waits at the destination
    assert destination.arrived.wait(60)
    clients = {name: Client() for name in svc.lanes}
    for name, lane in svc.lanes.items():
        assert lane.sink is not None
        lane.sink.http.interrupt_after = clients[name].interrupt_after  # what SinkHttp would be told
    stopping = threading.Thread(target=svc.stop, args=(20,))
    stopping.start()
    assert svc.lanes["a"].halt.wait(60)
    destination.gate.set()  # the first request ends: 413
    stopping.join(30)
    assert not stopping.is_alive()
    assert destination.calls[-1] == 16 and destination.calls.count(16) == 1  # no half was sent
    assert all(0 < seconds < 20 for client in clients.values() for seconds in client.cutoffs)
    assert set(clients) == {"a", "b"} and all(client.cutoffs for client in clients.values())
    entries = list(db[QUEUE].find({"sink": "a"}))
    assert sorted(str(e["item"]) for e in entries) == sorted(ids)  # every entry still queued for a
    assert all(e.get("tries", 0) == 0 and "lastError" not in e for e in entries)  # ... untouched
    assert db[DEAD].count_documents({}) == 0 and db[QUEUE].count_documents({"sink": "b"}) == 0
    counts = db.sinks.find_one({"_id": "a"}).get("counts", {})
    assert not any(counts.get("failed", {}).values()) and not counts.get("retried")
