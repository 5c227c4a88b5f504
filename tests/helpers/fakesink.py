"""A sink that delivers into memory, for the sink service's tests (tests/sinks/): `FakeSink` (kind "fake") hands
every batch to its `Destination`, which the test scripts — refuse the next batches, refuse the credentials, reject
some documents, say a batch is too large, fail the prepare — and which counts what it received. The service gets
the destinations through its `http_factory` (the "HTTP client" of a fake sink is its destination), so no socket is
opened; a `FlakyDb` stands for a database that goes away in the middle of a round."""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import wait
from datetime import datetime, timedelta
from typing import Any

from pymongo.errors import AutoReconnect

from collector.settings import load_settings
from collector.sinks.registry import SinkRegistry
from collector.sinks.sdk import DONE, AuthFailed, BatchRefused, Option, Reject, Retry, Sink, TooLarge

from helpers import T0

SECRET = "s3cr3t-token-value"  # SINK_<NAME>_TOKEN: secret by its name too
SHADE = "innocent-looking-value"  # SINK_<NAME>_SHADE: secret only because the kind declares it so


class Destination:
    """What a fake sink delivers to. Thread-safe: the sink's worker threads call it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: Counter[str] = Counter()  # document id -> times it was taken (Done)
        self.bodies: dict[str, Any] = {}
        self.batches: list[int] = []  # sizes of the batches sent, in order
        self.refuse = 0  # refuse this many batches next (BatchRefused)
        self.retry_after: float | None = None
        self.auth = False  # refuse our credentials (AuthFailed)
        self.reject: set[str] = set()  # ids rejected every time (Reject "400 ...")
        self.retry: set[str] = set()  # ids given a Retry outcome every time
        self.too_large: set[str] = set()  # a batch holding one of these is too large (TooLarge)
        self.prepare_errors: list[Exception] = []  # raised by the next prepares, in order
        self.prepared = 0
        self.message = "down for maintenance"
        self.gate: threading.Event | None = None  # when set to an Event, a delivery waits for it first
        self.closed = 0  # times the service closed it (the destination stands for the sink's HTTP client)

    def close(self) -> None:
        self.closed += 1

    def prepare(self) -> None:
        with self.lock:
            if self.prepare_errors:
                raise self.prepare_errors.pop(0)
            self.prepared += 1

    def deliver(self, docs: list) -> list:
        if self.gate is not None:
            self.gate.wait(60)
        with self.lock:
            self.batches.append(len(docs))
            if self.auth:
                raise AuthFailed(f"401 from the fake destination ({self.message})")
            if self.refuse:
                self.refuse -= 1
                raise BatchRefused(f"503 {self.message}", self.retry_after)
            if any(doc.id in self.too_large for doc in docs):
                raise TooLarge("413 the batch is too large")
            outcomes = []
            for doc in docs:
                if doc.id in self.reject:
                    outcomes.append(Reject(f"400 mapper_parsing_exception for {doc.id} ({self.message})"))
                elif doc.id in self.retry:
                    outcomes.append(Retry("429 too many requests"))
                else:
                    self.received[doc.id] += 1
                    self.bodies[doc.id] = doc.body
                    outcomes.append(DONE)
            return outcomes


class FakeSink(Sink):
    kind = "fake"
    options = (
        Option("INDEX", "the index written", default="items"),
        Option("TOKEN", "a credential", secret=True),
        Option("SHADE", "a credential with an innocent name", secret=True),
    )
    max_batch_bytes = 1024 * 1024

    def prepare(self) -> None:
        self.http.prepare()

    def deliver(self, batch):
        return self.http.deliver(list(batch))


def registry() -> SinkRegistry:
    return SinkRegistry({"fake": FakeSink}, discover=False)


def sink_settings(*names: str, **extra: str):
    """Settings of the test environment with fake sinks `names` (each its URL, TOKEN and SHADE) and `extra`."""
    environ = {"SINKS": ",".join(names)}
    for name in names:
        prefix = f"SINK_{name.upper()}_"
        environ |= {prefix + "KIND": "fake", prefix + "URL": f"https://{name}.sink.test"}
        environ |= {prefix + "TOKEN": SECRET, prefix + "SHADE": SHADE}
    environ |= extra
    return load_settings(environ=environ, env="test", read_dotenv=False)


class Clock:
    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def service(db, settings, clock, destinations: dict[str, Destination], owner: str = "one", seed: int = 7, **kw):
    from collector.sinks.service import SinkService

    return SinkService(
        db,
        settings,
        owner=owner,
        registry=registry(),
        clock=clock,
        rng=random.Random(seed),
        http_factory=lambda config, _settings, _check: destinations[config.name],
        **kw,
    )


def settle(svc, timeout: float = 10.0) -> None:
    """Wait until the deliveries and prepares in flight have finished (their outcomes are written next round)."""
    for lane in [*svc.lanes.values(), *svc.retiring]:
        lane.wait(timeout)
        if lane.preparing is not None:
            wait([lane.preparing], timeout)


def run(svc, clock: Clock, rounds: int = 30, tick: float = 1.0) -> None:
    """`rounds` rounds, each settled, the clock advancing `tick` seconds between them."""
    for _ in range(rounds):
        svc.step()
        settle(svc)
        clock.advance(tick)


def add_items(db, count: int, marked: bool = True, service_name: str = "github", start: int = 0, date=T0) -> list:
    """Items as a collector stores them (marked for the sinks, unless `marked` is false)."""
    from collector.engine.store import item_key

    docs = []
    for i in range(start, start + count):
        doc = {
            "_id": item_key("ann@example.com", service_name, str(i)),
            "user": "ann@example.com",
            "type": service_name,
            "itemId": str(i),
            "title": f"item {i}",
            "date": date,
        }
        if marked:
            doc["sinkPending"] = True
        docs.append(doc)
    if docs:
        db.items.insert_many(docs)
    return [str(d["_id"]) for d in docs]


class FlakyDb:
    """A database that raises AutoReconnect while `down`, or from its `fail_at`-th call on (counted from when
    it is set) until it is cleared: the database going away in the middle of a round."""

    def __init__(self, db) -> None:
        self.db = db
        self.down = False
        self.calls = 0
        self.fail_at: int | None = None

    def __getitem__(self, name: str):
        return _FlakyCollection(self, self.db[name])

    def check(self) -> None:
        self.calls += 1
        if self.down or (self.fail_at is not None and self.calls >= self.fail_at):
            raise AutoReconnect("connection closed")


class _FlakyCollection:
    def __init__(self, owner: FlakyDb, collection) -> None:
        self.owner, self.collection = owner, collection

    def __getattr__(self, name: str):
        attribute = getattr(self.collection, name)
        if not callable(attribute):
            return attribute

        def call(*args, **kwargs):
            self.owner.check()
            return attribute(*args, **kwargs)

        return call
