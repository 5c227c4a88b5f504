"""A retry is the same batch (docs/sinks.md): a batch the destination refuses is sent again whole, under the same
`webhook-id`, with the same documents in the same order and the same body bytes, until it is done — by the same
service, after a restart, by another that took the lease over, after a 2xx that came too late. Only a split (413)
or a document leaving it (deleted, dead-lettered) makes new batches, and those keep their own ids in turn.

A real Standard Webhooks receiver on a socket, the sink service on mongomock."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from collector.settings import load_settings
from collector.sinks.service import SinkService
from collector.sinks.store import DEAD, QUEUE

from helpers.fakesink import Clock, add_items, run, service, settle, sink_settings
from helpers.fakesink import Destination as FakeDestination
from helpers.sinkservers import WEBHOOK_SECRET, Reply, WebhookReceiver

pytestmark = pytest.mark.system
TICK = 700.0  # seconds between rounds: past SINK_RETRY_MAX (600), every refused batch is due again


@pytest.fixture
def receiver():
    with WebhookReceiver() as running:
        yield running


def hook_settings(receiver, batch: int, concurrency: int = 1, timeout: float = 10.0):
    return load_settings(
        environ={
            "SINKS": "hooks",
            "SINK_HOOKS_KIND": "webhook",
            "SINK_HOOKS_URL": receiver.url,
            "SINK_HOOKS_SECRET": WEBHOOK_SECRET,
            "SINK_HOOKS_BATCH": str(batch),
            "SINK_HOOKS_CONCURRENCY": str(concurrency),
            "SINK_HOOKS_TIMEOUT": str(timeout),
            "ALLOW_PRIVATE_HOSTS": "true",
        },
        env="test",
        read_dotenv=False,
    )


def hook_service(db, settings, clock, owner: str = "one") -> SinkService:
    return SinkService(db, settings, owner=owner, clock=clock, rng=random.Random(11))


def sends(receiver) -> dict[str, list[dict]]:
    """Every message the receiver verified, by webhook-id, in the order they came."""
    by_id: dict[str, list[dict]] = defaultdict(list)
    for message in list(receiver.batches):
        by_id[message["id"]].append(message)
    return dict(by_id)


def items_of(message: dict) -> list[str]:
    return [doc["id"] for doc in message["payload"]["data"]]


def assert_each_id_one_batch(receiver) -> dict[str, list[dict]]:
    """Every try under one id carried the same body bytes (so the same items, in the same order), and no item was
    sent under two ids."""
    by_id = sends(receiver)
    seen: dict[str, str] = {}
    for ident, messages in by_id.items():
        assert {m["body"] for m in messages} == {messages[0]["body"]}, ident
        for item in items_of(messages[0]):
            assert seen.setdefault(item, ident) == ident, f"{item} sent under {seen[item]} and {ident}"
    return by_id


@pytest.mark.parametrize(
    ("count", "batch", "concurrency", "refusals"),
    [
        (7, 3, 1, [Reply(503)] * 3),
        (12, 5, 2, [Reply(429, {"Retry-After": "2"}), Reply(500), Reply(404, body=b"no route"), Reply(502)]),
        (4, 10, 1, [Reply(503)] * 5),
        (9, 1, 2, [Reply(500), Reply(308, {"Location": "https://elsewhere.test/"})] * 2),
    ],
)
def test_a_refused_batch_is_sent_again_whole_under_its_id(db, receiver, count, batch, concurrency, refusals):
    ids = add_items(db, count)
    receiver.replies = list(refusals)
    clock = Clock()
    svc = hook_service(db, hook_settings(receiver, batch, concurrency), clock)
    run(svc, clock, rounds=2 * (len(refusals) + -(-count // batch)) + 4, tick=TICK)  # a try, then its outcome
    svc.stop(5)
    figures = svc.snapshot()["hooks"]
    by_id = assert_each_id_one_batch(receiver)
    assert len(by_id) == -(-count // batch)  # as many ids as batches formed: none re-grouped
    assert sum(len(messages) for messages in by_id.values()) == -(-count // batch) + len(refusals)
    assert receiver.ids() == set(ids) and db[QUEUE].count_documents({}) == 0
    assert figures.failed["refused"] == len(refusals) and figures.delivered == count


@pytest.mark.parametrize("takeover", [False, True])
@pytest.mark.parametrize(("count", "batch"), [(5, 5), (8, 3)])
def test_another_service_sends_the_same_batch_under_the_same_id(db, receiver, takeover, count, batch):
    """The batch's identity is in MongoDB: a service started after a stop, or one that takes over the lease of one
    that went silent, sends the batches refused before with the same ids and the same bytes."""
    add_items(db, count)
    batches = -(-count // batch)
    receiver.replies = [Reply(503)] * batches
    clock = Clock()
    settings = hook_settings(receiver, batch, concurrency=batches)
    first = hook_service(db, settings, clock)
    run(first, clock, rounds=2, tick=1)  # formed, sent, refused, written
    refused = sends(receiver)
    assert len(refused) == batches and db[QUEUE].count_documents({"batch.id": {"$exists": True}}) == count
    if not takeover:
        first.stop(5)
    clock.advance(TICK)  # past the back-off and past the lease
    second = hook_service(db, settings, clock, owner="two")
    run(second, clock, rounds=3, tick=1)
    second.stop(5)
    first.stop(5)
    by_id = assert_each_id_one_batch(receiver)
    assert set(by_id) == set(refused) and all(len(messages) == 2 for messages in by_id.values())
    assert db[QUEUE].count_documents({}) == 0


@pytest.mark.parametrize("late", [1.6, 2.5])
def test_a_2xx_that_came_after_the_deadline_is_sent_again_under_the_same_id(db, receiver, late):
    ids = add_items(db, 4)
    receiver.replies = [Reply(204, delay=late)]
    clock = Clock()
    svc = hook_service(db, hook_settings(receiver, 10, timeout=1.0), clock)
    run(svc, clock, rounds=4, tick=TICK)
    svc.stop(5)
    figures = svc.snapshot()["hooks"]
    (messages,) = assert_each_id_one_batch(receiver).values()
    assert len(messages) == 2 and items_of(messages[0]) == sorted(ids)
    assert figures.failed["refused"] == 1 and db[QUEUE].count_documents({}) == 0


@pytest.mark.parametrize(
    ("count", "replies", "splits"),
    [
        (8, [Reply(413), Reply(503), Reply(503), Reply(503)], 1),  # the first half refused three times
        (6, [Reply(413), Reply(204), Reply(500), Reply(500)], 1),  # the second half refused twice
        (9, [Reply(413), Reply(413), Reply(503), Reply(204), Reply(503)], 2),  # a half split again
    ],
)
def test_a_413_splits_the_batch_into_halves_with_ids_of_their_own(db, receiver, count, replies, splits):
    ids = add_items(db, count)
    receiver.replies = list(replies)
    clock = Clock()
    svc = hook_service(db, hook_settings(receiver, count), clock)
    run(svc, clock, rounds=2 * len(replies) + 4, tick=TICK)
    svc.stop(5)
    figures = svc.snapshot()["hooks"]
    by_id = sends(receiver)
    whole = next(iter(by_id))  # the batch as formed: sent once, too large
    assert len(by_id[whole]) == 1 and sorted(items_of(by_id[whole][0])) == sorted(ids)
    parts = {ident: messages for ident, messages in by_id.items() if ident != whole}
    assert all(ident.startswith(whole + "-") for ident in parts)
    for messages in parts.values():  # each part's retries: its own id, the same bytes
        assert {m["body"] for m in messages} == {messages[0]["body"]}
    done = [
        items_of(messages[0]) for ident, messages in parts.items() if not any(p.startswith(ident + "-") for p in parts)
    ]
    assert sorted(item for run_ in done for item in run_) == sorted(ids)  # the last parts cover every item once
    assert figures.failed["too_large"] == splits and receiver.ids() == set(ids)
    assert db[QUEUE].count_documents({}) == 0


@pytest.mark.parametrize("how", ["deleted", "poisoned"])
@pytest.mark.parametrize("count", [3, 6])
def test_a_document_that_leaves_a_refused_batch_makes_a_new_batch_that_keeps_its_id(db, receiver, how, count):
    """An item deleted between two tries (counted gone), or one that can no longer be sent (dead-lettered): the
    rest is a new batch, under a new id, and that one is sent again under its own id when refused."""
    ids = add_items(db, count)
    receiver.replies = [Reply(503), Reply(503), Reply(503)]
    clock = Clock()
    svc = hook_service(db, hook_settings(receiver, count), clock)
    run(svc, clock, rounds=2, tick=TICK)  # formed, refused once
    (first,) = sends(receiver)
    leaving = min(db.items.find(), key=lambda item: str(item["_id"]))["_id"]
    if how == "deleted":
        db.items.delete_one({"_id": leaving})
    else:
        deep: dict = {}
        for _ in range(40):
            deep = {"x": deep}
        db.items.update_one({"_id": leaving}, {"$set": {"nested": deep}})
    run(svc, clock, rounds=8, tick=TICK)
    svc.stop(5)
    figures = svc.snapshot()["hooks"]
    by_id = assert_each_id_one_batch_but(receiver, first)
    (second,) = set(by_id) - {first}
    assert len(by_id[second]) == 3  # refused twice more, then done: the same id each time
    assert sorted(items_of(by_id[second][0])) == sorted(set(ids) - {str(leaving)})
    if how == "deleted":
        assert db[DEAD].count_documents({}) == 0
    else:
        assert figures.dead_lettered == 1 and db[DEAD].find_one()["item"] == leaving
    assert db[QUEUE].count_documents({}) == 0


def assert_each_id_one_batch_but(receiver, old: str) -> dict[str, list[dict]]:
    """As assert_each_id_one_batch, the batch `old` (whose items went on in a new batch) left out of the check."""
    by_id = sends(receiver)
    for ident, messages in by_id.items():
        assert {m["body"] for m in messages} == {messages[0]["body"]}, ident
    rest = [item for ident, messages in by_id.items() if ident != old for item in items_of(messages[0])]
    assert len(rest) == len(set(rest))
    return by_id


@pytest.mark.parametrize(("count", "size"), [(6, 6), (10, 4)])
def test_a_batch_with_outcomes_of_its_own_is_over_its_rest_forms_a_new_batch(db, count, size):
    """Some documents done, some to try again (a `_bulk` or Typesense answer): the rest leave the batch, and are
    sent in a new one; a batch refused as a whole keeps its entries' batch."""
    ids = add_items(db, count)
    destination = FakeDestination()
    clock = Clock()
    settings = sink_settings("a", SINK_A_BATCH=str(size), SINK_A_CONCURRENCY=str(-(-count // size)))
    svc = service(db, settings, clock, {"a": destination})
    destination.refuse = 1
    run(svc, clock, rounds=2, tick=1)  # formed, refused as a whole
    kept = {entry["item"]: entry["batch"]["id"] for entry in db[QUEUE].find()}
    assert len(kept) == count and len(set(kept.values())) == -(-count // size)
    destination.retry = set(ids[:2])
    run(svc, clock, rounds=1, tick=TICK)
    svc.step()
    settle(svc)
    svc.step()
    left = list(db[QUEUE].find())
    assert {str(e["item"]) for e in left} == set(ids[:2])
    assert all(e.get("batch", {}).get("id") not in set(kept.values()) for e in left)
    svc.stop(5)
