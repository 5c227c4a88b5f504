"""sinks/delivery.py and sinks/outcomes.py: a batch delivered on a worker thread — split before it is sent when
it would encode too large, split in halves on TooLarge down to one document rejected, each failure given its
verdict — and the verdicts written: done deleted, retry rescheduled with full-jitter back-off (bounded, seeded),
rejects dead-lettered after SINK_MAX_TRIES with their reason, the others delivered."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from collector.sinks.delivery import (
    Fate,
    Verdict,
    backoff,
    deliver,
    encoded_size,
    scrubber,
    split_by_bytes,
)
from collector.sinks.mover import entry_id
from collector.sinks.outcomes import Outcomes, counts_of
from collector.sinks.sdk import Doc, SinkConfig
from collector.sinks.store import DEAD, QUEUE, SinkStore

from helpers import T0
from helpers.fakesink import SECRET, Destination, FakeSink

CONFIG = SinkConfig(name="a", kind="fake", url="https://a.test", secret_values=(SECRET,))


def docs(count: int, size: int = 10) -> list[Doc]:
    return [Doc(id=f"d{i}", body={"text": "x" * size}) for i in range(count)]


def sink(destination: Destination, max_bytes: int | None = None) -> FakeSink:
    made = FakeSink(CONFIG, destination)
    if max_bytes is not None:
        made.max_batch_bytes = max_bytes  # type: ignore[misc]
    return made


SCRUB = scrubber((SECRET,))


def test_a_batch_is_delivered_and_every_document_done():
    destination = Destination()
    verdicts = deliver(sink(destination), docs(5), SCRUB)
    assert [v.outcome for v in verdicts] == [Fate.DONE] * 5 and destination.batches == [5]


def test_a_batch_that_would_encode_too_large_is_split_before_it_is_sent():
    batch = docs(10, size=100)
    each = encoded_size(batch[0])
    assert split_by_bytes(batch, each * 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert split_by_bytes(batch, 1) == [[i] for i in range(10)]  # one alone is sent: the destination decides
    destination = Destination()
    verdicts = deliver(sink(destination, max_bytes=each * 4), batch, SCRUB)
    assert destination.batches == [4, 4, 2] and all(v.outcome == Fate.DONE for v in verdicts)


def test_too_large_splits_in_halves_down_to_the_one_document_rejected():
    destination = Destination()
    destination.too_large = {"d5"}
    verdicts = deliver(sink(destination), docs(8), SCRUB)
    assert [v.outcome for v in verdicts] == [Fate.DONE] * 5 + [Fate.REJECT] + [Fate.DONE] * 2
    assert verdicts[5].kind == "tooLarge" and "too large" in verdicts[5].reason
    assert destination.batches == [8, 4, 4, 2, 1, 1, 2] and sorted(destination.received) == [
        f"d{i}" for i in range(8) if i != 5
    ]


def test_a_refused_batch_is_retried_whole_and_its_retry_after_kept():
    destination = Destination()
    destination.refuse, destination.retry_after = 1, 30.0
    verdicts = deliver(sink(destination, max_bytes=encoded_size(docs(1)[0]) * 2), docs(6), SCRUB)
    assert {(v.outcome, v.kind, v.retry_after, v.whole) for v in verdicts} == {(Fate.RETRY, "refused", 30.0, True)}
    assert destination.batches == [2]  # the rest of the split batch was not sent after a refusal
    assert counts_of(verdicts, 0) == {"retried": 6, "failed.refused": 1}


def test_auth_failure_and_odd_sinks_get_their_verdicts():
    destination = Destination()
    destination.auth = True
    verdicts = deliver(sink(destination), docs(3), SCRUB)
    assert {v.outcome for v in verdicts} == {Fate.AUTH} and "401" in verdicts[0].reason

    class Crashing(FakeSink):
        def deliver(self, batch):
            raise KeyError("oops")

    class Miscounting(FakeSink):
        def deliver(self, batch):
            return []

    class Wrong(FakeSink):
        def deliver(self, batch):
            return ["done"] * len(batch)

    for cls, words in ((Crashing, "KeyError"), (Miscounting, "0 outcomes for 2"), (Wrong, "not an Outcome")):
        verdicts = deliver(cls(CONFIG, Destination()), docs(2), SCRUB)
        assert {v.outcome for v in verdicts} == {Fate.RETRY} and words in verdicts[0].reason


def test_a_reason_never_holds_a_secret_and_is_clipped():
    destination = Destination()
    destination.refuse, destination.message = 1, f"bad token {SECRET} " + "z" * 2000
    (verdict, *_) = deliver(sink(destination), docs(1), SCRUB)
    assert SECRET not in verdict.reason and "***" in verdict.reason and len(verdict.reason) <= 500


@pytest.mark.parametrize("seed", range(5))
def test_backoff_is_full_jitter_doubling_from_one_second_up_to_the_cap(seed):
    rng = random.Random(seed)
    for tries in range(15):
        waits = [backoff(tries, 600.0, rng) for _ in range(50)]
        ceiling = min(600.0, 2.0**tries)
        assert all(0 <= w <= ceiling for w in waits)
        assert max(waits) > ceiling / 2 and min(waits) < ceiling / 2  # spread over the whole range
    assert backoff(3, 600.0, rng, retry_after=120.0) >= 120.0
    assert backoff(3, 60.0, rng, retry_after=3600.0) == 60.0  # the server's wait, bounded by the cap
    assert backoff(10**6, 5.0, rng) <= 5.0


# --- the verdicts written --------------------------------------------------------------------------------------------
def queue(db, count: int) -> list[dict]:
    store = SinkStore(db)
    entries = [
        {"_id": entry_id("a", f"d{i}"), "sink": "a", "item": f"d{i}", "date": T0, "at": T0, "nextAt": T0}
        | {"tries": 0, "rejects": 0}
        for i in range(count)
    ]
    store.enqueue(entries)
    return entries


def test_done_deletes_retry_reschedules_within_the_backoff(db):
    entries = queue(db, 3)
    SinkStore(db).register("a", "fake", False, "one", T0)
    outcomes = Outcomes(SinkStore(db), random.Random(3))
    refused = Verdict(Fate.RETRY, "503 busy", "refused", 10.0, whole=True)
    outcomes.add("a", entries, [Verdict(Fate.DONE), refused, Verdict(Fate.RETRY, "429", "refused")])
    assert outcomes.apply(T0, max_tries=3, cap=600.0) == {}
    outcomes.flush()
    left = {e["item"]: e for e in db[QUEUE].find()}
    assert set(left) == {"d1", "d2"}
    assert left["d1"]["nextAt"] >= T0 + timedelta(seconds=10) and left["d1"]["tries"] == 1
    assert T0 <= left["d2"]["nextAt"] <= T0 + timedelta(seconds=1)
    assert left["d1"]["lastError"] == {"kind": "refused", "message": "503 busy", "at": T0}
    counts = db.sinks.find_one({"_id": "a"})["counts"]
    assert (counts["delivered"], counts["retried"], counts["failed"]["refused"]) == (1, 2, 2)
    assert outcomes.totals["a"] == {"delivered": 1, "retried": 2, "failed.refused": 2}


def test_a_document_rejected_sink_max_tries_times_is_dead_lettered_the_others_delivered(db):
    queue(db, 3)
    store = SinkStore(db)
    store.register("a", "fake", False, "one", T0)
    outcomes = Outcomes(store, random.Random(1))
    reject = Verdict(Fate.REJECT, "400 mapper_parsing_exception", "rejected")
    now = T0
    for _ in range(3):
        due = store.due("a", now + timedelta(hours=1), 10)
        outcomes.add("a", due, [reject if e["item"] == "d1" else Verdict(Fate.DONE) for e in due])
        outcomes.apply(now, max_tries=3, cap=600.0)
        outcomes.flush()
        now += timedelta(hours=1)
    assert db[QUEUE].count_documents({}) == 0
    (letter,) = db[DEAD].find()
    assert (letter["item"], letter["reason"], letter["status"], letter["rejects"]) == ("d1", reject.reason, 400, 3)
    counts = store.sink_docs()["a"]["counts"]
    assert counts["delivered"] == 2 and counts["deadLettered"] == 1 and counts["failed"]["rejected"] == 3


def test_a_final_reject_is_dead_lettered_at_once_and_auth_leaves_the_entries(db):
    entries = queue(db, 2)
    outcomes = Outcomes(SinkStore(db), random.Random(1))
    outcomes.add("a", entries[:1], [Verdict(Fate.REJECT, "the item cannot be sent", "rejected", final=True)])
    outcomes.add("a", entries[1:], [Verdict(Fate.AUTH, "401", "auth", whole=True)])
    assert outcomes.apply(T0, max_tries=3, cap=600.0) == {"a": "401"}
    assert db[DEAD].count_documents({}) == 1
    assert db[QUEUE].find_one()["item"] == "d1" and db[QUEUE].find_one()["tries"] == 0  # waits for the resume
