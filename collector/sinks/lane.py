"""One configured sink inside the service: its Sink (made, then prepared, on a worker thread), its worker threads
(a ThreadPoolExecutor of SINK_<NAME>_CONCURRENCY), its batches in flight. No database here: the service reads the
due entries and writes the verdicts on its own thread; a lane only hands batches to threads and gives back what
finished. A stop (`cut`) sends nothing more and cuts the requests still running at its cutoff (delivery.py)."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..textout import printable
from .delivery import Delivered, Fate, Verdict, backoff, deliver_batch, scrubber
from .sdk import AuthFailed, Batch, Sink, SinkConfig

log = logging.getLogger("collector.sinks")


@dataclass
class Turn:
    """What a lane can take in one round, asked once (`Lane.turn`): the batches it can take now (`slots`, 0: none,
    of `size` entries), the entries and batch ids in flight (its own and a retired lane's of the same sink: not
    formed again), its scrubber; and what the service writes of its prepare: why one failed (`failed`), or the
    refused credentials (`auth`: the sink is stopped)."""

    name: str
    slots: int = 0
    size: int = 0
    busy: list[Any] = field(default_factory=list)
    busy_batches: set[str] = field(default_factory=set)
    scrub: Callable[[str], str] = str
    failed: str = ""
    auth: str | None = None


@dataclass
class Flight:
    entries: list[dict]
    batch: str  # the batch's id
    future: Future[Delivered]


class Lane:
    def __init__(self, config: SinkConfig, make_sink: Callable[[SinkConfig], Sink], wakeup: threading.Event):
        self.config = config
        self.make_sink = make_sink
        self.wakeup = wakeup
        self.scrub = scrubber(config.secret_values)
        self.pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix=f"sink-{config.name}")
        self.sink: Sink | None = None
        self.flights: list[Flight] = []
        # its state, changed only here (the service asks: turn, stop, cut)
        self.halt = threading.Event()  # the service is stopping: nothing more is sent
        self.preparing: Future[None] | None = None
        self.ready = False
        self.stopped = False
        self.paused = False
        self.prepare_tries = 0
        self.prepare_at: datetime | None = None
        self.problem = ""  # why it is not ready (the last prepare failure), for the snapshot

    @property
    def name(self) -> str:
        return self.config.name

    def turn(
        self, doc: Mapping, now: datetime, rng: random.Random, cap: float, stopping: bool, retired: list[Lane]
    ) -> Turn:
        """The lane's part of a round, in one call: it follows its sink's document, looks at a prepare that
        finished (a failure tried again after a back-off, capped at `cap`), starts one when due, and says what it
        can take (nothing while stopped, paused, `stopping`, not ready, or with every thread busy). `retired`:
        the lanes of the same sink with settings since replaced, whose batches are still in flight."""
        self.follow(doc)
        if self.stopped or self.paused or stopping:
            return Turn(self.config.name)
        tries = self.prepare_tries
        auth = self.poll_prepare(now, rng, cap)
        failed = self.problem if self.prepare_tries > tries else ""  # a TLS failure, a refused template: failing
        if auth is not None:
            return Turn(self.config.name, failed=failed, auth=auth)
        self.start_prepare(now)
        slots = self.config.concurrency - len(self.flights) if self.ready else 0
        flights = [flight for lane in (self, *retired) for flight in lane.flights]
        return Turn(
            self.config.name,
            max(slots, 0),
            self.config.batch,
            [entry["_id"] for flight in flights for entry in flight.entries],
            {flight.batch for flight in flights},
            self.scrub,
            failed,
        )

    def follow(self, doc: Mapping) -> None:
        """The lane follows its sink's document: paused or not, stopped there (by an earlier service), or resumed
        by the operator (prepared again)."""
        self.paused = bool(doc.get("paused"))
        if doc.get("stopped") and not self.stopped:
            self.stop()
        elif self.stopped and doc and not doc.get("stopped"):
            self.reset()

    def stop(self) -> None:
        """The destination refused the credentials: nothing is delivered until a resume."""
        self.stopped, self.ready = True, False

    # --- prepare ----------------------------------------------------------------------------------------------------
    def start_prepare(self, now: datetime) -> None:
        """Make and prepare the Sink on a worker thread, when it is not ready and its back-off has passed."""
        if self.ready or self.stopped or self.preparing is not None:
            return
        if self.prepare_at is not None and now < self.prepare_at:
            return
        self.preparing = self.pool.submit(self._prepare)
        self.preparing.add_done_callback(lambda _: self.wakeup.set())

    def _prepare(self) -> None:
        if self.sink is None:
            self.sink = self.make_sink(self.config)
        if self.halt.is_set():  # stopping: nothing to prepare for (a prepare under way is cut with the rest)
            return
        self.sink.prepare()

    def poll_prepare(self, now: datetime, rng: random.Random, cap: float) -> str | None:
        """Look at a prepare that finished: ready, or tried again after a back-off. Returns the reason when the
        destination refused the credentials (the caller stops the sink)."""
        if self.preparing is None or not self.preparing.done():
            return None
        error = self.preparing.exception()
        self.preparing = None
        if error is None:
            self.ready, self.prepare_tries, self.problem = True, 0, ""
            return None
        reason = self.scrub(f"{type(error).__name__}: {error}")
        if isinstance(error, AuthFailed):
            return reason
        wait = backoff(self.prepare_tries, cap, rng)
        self.prepare_tries += 1
        self.prepare_at, self.problem = now + timedelta(seconds=wait), reason
        log.warning("sink %s cannot start (try %d): %s", self.name, self.prepare_tries, printable(reason))
        return None

    def reset(self) -> None:
        """After a resume: prepare again before the next delivery."""
        self.ready = self.stopped = False
        self.prepare_tries, self.prepare_at, self.problem = 0, None, ""

    # --- deliveries -------------------------------------------------------------------------------------------------
    def submit(self, planned: list[tuple[list[dict], Batch]]) -> None:
        """Deliver each batch (the documents of its entries, in their order) on a worker thread."""
        for entries, batch in planned:
            sink = self.sink
            if sink is None:  # pragma: no cover - the service submits to ready lanes only
                raise RuntimeError("the sink is not ready")
            future = self.pool.submit(deliver_batch, sink, batch, self.scrub, self.halt)
            future.add_done_callback(lambda _: self.wakeup.set())
            self.flights.append(Flight(entries, batch.id, future))

    def finished(self) -> list[tuple[list[dict], Delivered]]:
        """The batches that finished since the last call, with what became of them."""
        done: list[Flight] = []
        running: list[Flight] = []
        for flight in self.flights:  # one look at each: a batch finishing meanwhile is in exactly one of the two
            (done if flight.future.done() else running).append(flight)
        self.flights = running
        return [pair for f in done if (pair := _sent(f.entries, _delivered(f)))[0]]

    def cut(self, seconds: float) -> None:
        """The service is stopping: no run or half of a batch starts any more, and the requests of the lane's
        client still running `seconds` from now are cut (sinks/http.py SinkHttp.interrupt_after; a client without
        it, a plugin's own, is left to its own timeout)."""
        self.halt.set()
        interrupt = getattr(getattr(self.sink, "http", None), "interrupt_after", None)
        if callable(interrupt):
            interrupt(seconds)

    def wait(self, timeout: float) -> None:
        wait_for([f.future for f in self.flights], timeout=max(0.0, timeout))

    def close(self) -> None:
        """No more work: threads let go (those in flight finish on their own), the Sink and its client closed."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.sink is None:
            return
        http_close = getattr(self.sink.http, "close", None)  # the client is the service's: made by its factory
        for close in (self.sink.close, http_close):
            try:
                if callable(close):
                    close()
            except Exception as exc:  # a sink that fails to close is logged, never a crash
                log.warning("sink %s did not close cleanly: %s", self.name, printable(self.scrub(repr(exc))))


def _sent(entries: list[dict], delivered: Delivered) -> tuple[list[dict], Delivered]:
    """The entries of a batch with what became of them, less those a stop kept from being sent (or cut): those stay
    queued as they were, nothing written."""
    kept = [i for i, verdict in enumerate(delivered.verdicts) if verdict.outcome != Fate.CUT]
    verdicts = [delivered.verdicts[i] for i in kept]
    return [entries[i] for i in kept], Delivered(verdicts, [delivered.batches[i] for i in kept], delivered.splits)


def _delivered(flight: Flight) -> Delivered:
    try:
        return flight.future.result()
    except Exception as exc:  # deliver_batch() gives verdicts, never raises; a cancelled one is tried again
        verdict = Verdict(Fate.RETRY, f"refused: {type(exc).__name__}", "refused", whole=True)
        return Delivered([verdict] * len(flight.entries), [flight.batch] * len(flight.entries))
