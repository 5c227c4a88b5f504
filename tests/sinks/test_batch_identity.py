"""The batch a sink receives keeps its identity in MongoDB (collector/sinks/batches.py): the same id and documents
at every retry, a new one only after a split or when a document left it; a `batch` field anyone mangled is formed
anew, never a crash. An in-memory sink that records each Batch's id, on mongomock; the webhook sink's message a
function of the batch alone."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from collector.sinks.builtin.webhook import WebhookSink
from collector.sinks.registry import SinkRegistry
from collector.sinks.sdk import Answer, Batch, BatchRefused
from collector.sinks.service import SinkService
from collector.sinks.store import QUEUE
from collector.testing.sinkkit import item_docs, sink_config

from helpers import T0
from helpers.fakesink import Clock, Destination, FakeSink, add_items, run, sink_settings
from helpers.sinkservers import WEBHOOK_SECRET

TICK = 700.0  # past SINK_RETRY_MAX: every refused batch is due again at the next round


class Recording(Destination):
    """A destination that also keeps (batch id, document ids) of every batch sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, list[str]]] = []
        self.sent_lock = threading.Lock()


class IdSink(FakeSink):
    def deliver(self, batch):
        assert isinstance(batch, Batch)
        with self.http.sent_lock:
            self.http.sent.append((batch.id, [doc.id for doc in batch]))
        return self.http.deliver(list(batch))


def make(db, clock, destination, owner="one", **extra):
    return SinkService(
        db,
        sink_settings("a", **extra),
        owner=owner,
        registry=SinkRegistry({"fake": IdSink}, discover=False),
        clock=clock,
        rng=random.Random(5),
        http_factory=lambda config, _settings, _check: destination,
    )


def tries_by_id(destination: Recording) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for ident, ids in destination.sent:
        out.setdefault(ident, []).append(ids)
    return out


@pytest.mark.parametrize(("count", "size", "refusals"), [(5, 5, 3), (11, 4, 2), (3, 1, 4), (20, 7, 1)])
def test_every_try_of_a_refused_batch_has_its_id_and_documents(db, count, size, refusals):
    add_items(db, count)
    destination = Recording()
    destination.refuse = refusals
    clock = Clock()
    svc = make(db, clock, destination, SINK_A_BATCH=str(size), SINK_A_CONCURRENCY="1")
    run(svc, clock, rounds=2 * (refusals + -(-count // size)) + 3, tick=TICK)
    svc.stop(5)
    by_id = tries_by_id(destination)
    assert len(by_id) == -(-count // size) and all(ident for ident in by_id)
    for tries in by_id.values():
        assert all(ids == tries[0] for ids in tries)
    assert sum(len(tries) for tries in by_id.values()) == len(by_id) + refusals
    assert sorted(i for tries in by_id.values() for i in tries[0]) == sorted(destination.received)
    assert db[QUEUE].count_documents({}) == 0


@pytest.mark.parametrize("count", [2, 7])
def test_a_new_service_sends_the_kept_batch_under_its_id(db, count):
    add_items(db, count)
    destination = Recording()
    destination.refuse = 1
    clock = Clock()
    first = make(db, clock, destination)
    run(first, clock, rounds=2, tick=1)
    first.stop(5)
    clock.advance(TICK)
    second = make(db, clock, destination, owner="two")
    run(second, clock, rounds=3, tick=1)
    second.stop(5)
    ((ident, tries),) = tries_by_id(destination).items()
    assert len(tries) == 2 and tries[0] == tries[1] and len(tries[0]) == count


@pytest.mark.parametrize(("count", "too_large", "splits"), [(8, {0}, 3), (4, {1, 2}, 3), (6, {5}, 3), (2, {0}, 1)])
def test_a_too_large_batch_splits_into_parts_with_derived_ids_counted_once_each(db, count, too_large, splits):
    ids = add_items(db, count)
    ordered = sorted(ids)
    destination = Recording()
    destination.too_large = {ordered[i] for i in too_large}
    clock = Clock()
    svc = make(db, clock, destination)
    run(svc, clock, rounds=4, tick=1)  # one try (a rejected document is not due again within 30 s)
    svc.stop(5)
    first, *parts = [ident for ident, _ in destination.sent]
    assert len(parts) == 2 * splits and len(set(parts)) == len(parts)
    assert all(part.startswith(first + "-") and set(part[len(first) :].split("-")[1:]) <= {"a", "b"} for part in parts)
    assert svc.snapshot()["a"].failed["too_large"] == splits + len(too_large)  # the splits, and each one rejected
    assert db.sinks.find_one({"_id": "a"})["counts"]["failed"]["tooLarge"] == splits + len(too_large)


def test_a_batch_missing_an_entry_is_formed_anew_with_the_rest(db):
    """An entry gone from the queue (a service whose lease lapsed delivered it meanwhile): the batch is not sent
    under its id with fewer documents; the rest go in a new batch."""
    add_items(db, 5)
    destination = Recording()
    destination.refuse = 1
    clock = Clock()
    svc = make(db, clock, destination)
    run(svc, clock, rounds=3, tick=TICK)  # prepared, refused, the refusal written
    one = db[QUEUE].find_one()
    db[QUEUE].delete_one({"_id": one["_id"]})
    run(svc, clock, rounds=2, tick=TICK)
    svc.stop(5)
    (old, five), (new, four) = destination.sent
    assert old != new and len(five) == 5 and four == [i for i in five if i != str(one["item"])]


@pytest.mark.parametrize(
    "mangled",
    ["text", None, 7, {"id": 5, "n": 1}, {"id": "x", "n": "2", "at": "then"}, {"id": "", "n": 1}, ["a"]],
)
def test_a_batch_field_anyone_mangled_is_formed_anew(db, mangled):
    ids = add_items(db, 3)
    destination = Recording()
    destination.refuse = 1
    clock = Clock()
    svc = make(db, clock, destination)
    run(svc, clock, rounds=3, tick=TICK)  # prepared, refused, the refusal written
    assert db[QUEUE].count_documents({"batch.id": destination.sent[0][0]}) == 3
    db[QUEUE].update_many({}, {"$set": {"batch": mangled}})
    run(svc, clock, rounds=3, tick=TICK)
    svc.stop(5)
    (old, _), (new, again) = destination.sent
    assert old != new and sorted(again) == sorted(ids) and db[QUEUE].count_documents({}) == 0


class Capture:
    """An HTTP client that keeps each request and answers 503 (refused: the batch would be sent again)."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict, bytes]] = []

    def request(self, method, url, *, body=None, headers=None, keep_body=True):
        self.requests.append((dict(headers or {}), body or b""))
        return Answer(503)


@pytest.mark.parametrize("count", [1, 4, 9])
def test_a_webhook_retry_is_the_same_message_only_its_timestamp_and_signature_new(count):
    """The webhook-id and the body are the batch's alone: the try's clock changes only webhook-timestamp and the
    signature, and the reference library verifies every try."""
    http = Capture()
    sink = WebhookSink(
        sink_config(WebhookSink, "https://hooks.example.com/in", name="hook", SECRET=WEBHOOK_SECRET), http
    )
    batch = Batch(item_docs(count), "65f00000000000000000abcd", T0)
    for minutes in (0, 7, 31):
        sink.clock = lambda minutes=minutes: T0 + timedelta(minutes=minutes)
        with pytest.raises(BatchRefused):
            sink.deliver(batch)
    (first, body), *others = http.requests
    assert first["webhook-id"] == "msg_65f00000000000000000abcd"
    assert all(headers["webhook-id"] == first["webhook-id"] and again == body for headers, again in others)
    assert len({headers["webhook-timestamp"] for headers, _ in http.requests}) == 3
    assert b'"timestamp":"2026-06-01T12:00:00.000Z"' in body
    for headers, sent in http.requests:
        moment = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
        assert headers["webhook-signature"] == Webhook(WEBHOOK_SECRET).sign(
            headers["webhook-id"], moment, sent.decode()
        )
