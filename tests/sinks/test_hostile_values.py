"""The sink service against values it did not write (review 2, findings 2 and 5): a reject reason starting with
Unicode "digits", queue entries and sink documents a mongo shell edited. Each bad value is scoped to its document
or its sink — dead-lettered with a reason, mended, or logged once — and every round goes through: no round raises,
the other sinks go on."""

from __future__ import annotations

import logging
import random

import orjson
import pytest
from pymongo.errors import WriteError

from collector.settings import load_settings
from collector.sinks.delivery import Fate, Verdict
from collector.sinks.http import Answer
from collector.sinks.outcomes import _status
from collector.sinks.sdk import Reject
from collector.sinks.service import SinkService
from collector.sinks.store import COUNTS, DEAD, FAILED, QUEUE, SinkStore

from helpers.fakesink import Clock, Destination, add_items, service, settle, sink_settings


def rounds(svc, clock: Clock, count: int, tick: float = 5.0) -> list[str]:
    """`count` rounds, settled, the clock advancing; the errors any round raised (the daemon would log each)."""
    errors = []
    for _ in range(count):
        try:
            svc.step()
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        settle(svc)
        clock.advance(tick)
    return errors


class SuperscriptDestination(Destination):
    """Rejects every document with a reason that starts with characters `str.isdigit` takes and `int` refuses."""

    def deliver(self, docs):
        self.batches.append(len(docs))
        return [Reject("²³⁴ hostile error text") for _ in docs]


@pytest.mark.parametrize(
    ("reason", "status"),
    [("400 bad", 400), ("404: not found", 404), ("²³⁴ no", None), ("٤٠٠ arabic digits", None), ("4000 x", None)],
)
def test_a_dead_letters_status_is_read_from_ascii_digits_only(reason, status):
    assert _status(Verdict(Fate.REJECT, reason)) == status


def test_a_reject_reason_starting_with_superscript_digits_is_dead_lettered_and_the_other_sink_goes_on(db):
    add_items(db, 3)
    clock = Clock()
    good = Destination()
    svc = service(
        db, sink_settings("bad", "good", SINK_MAX_TRIES="1"), clock, {"bad": SuperscriptDestination(), "good": good}
    )
    errors = rounds(svc, clock, 10)
    add_items(db, 3, start=100)
    errors += rounds(svc, clock, 5)
    assert not errors, errors[:1]
    letters = list(db[DEAD].find({"sink": "bad"}))
    assert len(letters) == 6 and all("status" not in letter for letter in letters)
    assert len(good.received) == 6


def test_a_typesense_error_line_without_code_starting_with_superscripts_is_dead_lettered(db):
    class Hostile:
        def request(self, method, url, *, body=None, headers=None, keep_body=True):
            if method == "GET":
                return Answer(200, {}, b"{}")
            lines = len(body.splitlines())
            return Answer(200, {}, b"\n".join([orjson.dumps({"success": False, "error": "²³⁴ no"})] * lines))

        def close(self):
            pass

    add_items(db, 2)
    environ = {"SINKS": "ts", "SINK_TS_KIND": "typesense", "SINK_TS_URL": "http://ts.test"}
    environ |= {"SINK_TS_API_KEY": "k" * 12, "SINK_MAX_TRIES": "1"}
    settings = load_settings(environ=environ, env="test", read_dotenv=False)
    clock = Clock()
    svc = SinkService(
        db, settings, owner="one", clock=clock, rng=random.Random(1), http_factory=lambda c, s, k: Hostile()
    )
    assert not rounds(svc, clock, 6)
    assert db[DEAD].count_documents({}) == 2


def test_a_queue_entry_whose_tries_a_shell_made_text_is_tried_again_and_delivered(db):
    add_items(db, 3)
    clock = Clock()
    dest = Destination()
    dest.refuse = 1
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    svc.step()  # queued, the first batch refused (in flight)
    db[QUEUE].update_many({}, {"$set": {"tries": "three", "rejects": [1]}})
    assert not rounds(svc, clock, 6)
    assert len(dest.received) == 3


def test_queue_entries_without_an_item_or_naming_it_by_a_document_are_dead_lettered_the_rest_delivered(db):
    add_items(db, 3)
    clock = Clock()
    dest = Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    db[QUEUE].insert_one({"_id": {"s": "a", "i": "x"}, "sink": "a", "nextAt": clock.now})  # no item
    db[QUEUE].insert_one({"_id": {"s": "a", "i": "y"}, "sink": "a", "item": {"a": 1}, "nextAt": clock.now})
    assert not rounds(svc, clock, 4)
    assert len(dest.received) == 3
    reasons = {letter["_id"]["i"]: letter["reason"] for letter in db[DEAD].find({"sink": "a"})}
    assert set(reasons) == {"x", "y"} and all("names no item" in r for r in reasons.values())
    assert db[QUEUE].count_documents({}) == 0


# on real MongoDB `counts: null` or `counts.failed: "none"` fail the same `$inc` (mongomock applies those in part)
@pytest.mark.parametrize("edit", [{"counts.delivered": "0"}])
def test_a_sink_document_with_hand_edited_counters_is_mended_and_starves_no_sink(db, edit):
    clock = Clock()
    dests = {"a": Destination(), "b": Destination()}
    svc = service(db, sink_settings("a", "b"), clock, dests)
    svc.step()
    settle(svc)
    db["sinks"].update_one({"_id": "a"}, {"$set": edit})
    first = add_items(db, 4)
    errors = rounds(svc, clock, 6, tick=6)
    later = add_items(db, 4, start=50)
    errors += rounds(svc, clock, 6, tick=6)
    svc.stop(5)
    assert not errors, errors[:1]
    assert set(first + later) <= set(dests["a"].received) and set(first + later) <= set(dests["b"].received)
    counts = db["sinks"].find_one({"_id": "a"})["counts"]
    assert counts["delivered"] == 8 and counts["failed"]["refused"] == 0


@pytest.mark.parametrize("counts", [None, "none", {"delivered": "0", "failed": None, "gone": 2}])
def test_counters_mongodb_cannot_increment_are_set_again_whole(db, monkeypatch, counts):
    store = SinkStore(db)
    db["sinks"].insert_one({"_id": "a", "counts": counts})
    update_one = store.sinks.update_one

    def as_mongodb(query, update, **kwargs):  # what MongoDB says to `$inc` on text or below a null
        if "$inc" in update:
            raise WriteError("Cannot apply $inc to a value of non-numeric type", 14)
        return update_one(query, update, **kwargs)

    monkeypatch.setattr(store.sinks, "update_one", as_mongodb)
    store.add_counts("a", {"delivered": 3, "failed.refused": 1})
    mended = db["sinks"].find_one({"_id": "a"})["counts"]
    gone = 2 if isinstance(counts, dict) else 0
    assert mended == {**dict.fromkeys(COUNTS, 0), "delivered": 3, "gone": gone} | {
        "failed": {**dict.fromkeys(FAILED, 0), "refused": 1}
    }


def test_a_sink_document_a_shell_gave_an_id_that_is_no_text_is_left_out(db):
    add_items(db, 2)
    clock = Clock()
    dest = Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    db["sinks"].insert_one({"_id": {"odd": 1}, "kind": "fake"})
    assert not rounds(svc, clock, 4)
    assert len(dest.received) == 2


def test_a_batch_whose_writes_fail_on_a_bad_value_is_dropped_logged_once_and_the_round_goes_on(db, monkeypatch, caplog):
    add_items(db, 3)
    clock = Clock()
    dests = {"a": Destination(), "b": Destination()}
    dests["a"].reject = set(add_items(db, 1, start=10))
    svc = service(db, sink_settings("a", "b", SINK_MAX_TRIES="1"), clock, dests)

    def broken(entry, *args, **kwargs):
        raise ValueError("a value the database cannot take")

    monkeypatch.setattr(svc.store, "dead_letter", broken)
    with caplog.at_level(logging.ERROR, logger="collector.sinks"):
        errors = rounds(svc, clock, 6)
    assert not errors, errors[:1]
    assert len(dests["b"].received) == 4 and len(dests["a"].received) == 3
    lines = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(lines) == 1 and "sink a" in lines[0]


def test_one_sinks_deliveries_failing_on_a_bad_value_leave_the_others_going_and_are_logged_once(
    db, monkeypatch, caplog
):
    add_items(db, 3)
    clock = Clock()
    dests = {"a": Destination(), "b": Destination()}
    svc = service(db, sink_settings("a", "b"), clock, dests)
    due = svc.store.due

    def due_failing_for_a(name, *args, **kwargs):
        if name == "a":
            raise TypeError("a hand-edited value")
        return due(name, *args, **kwargs)

    monkeypatch.setattr(svc.store, "due", due_failing_for_a)
    with caplog.at_level(logging.ERROR, logger="collector.sinks"):
        errors = rounds(svc, clock, 5)
    assert not errors, errors[:1]
    assert len(dests["b"].received) == 3 and not dests["a"].received
    lines = [r.getMessage() for r in caplog.records if "sink a's deliveries failed" in r.getMessage()]
    assert len(lines) == 1
    monkeypatch.setattr(svc.store, "due", due)
    assert not rounds(svc, clock, 3)
    assert len(dests["a"].received) == 3


@pytest.mark.parametrize("until", ["tomorrow", None, 5])
def test_a_lease_document_whose_lease_until_a_shell_made_no_date_is_taken_over(db, until):
    add_items(db, 2)
    db["sinks"].insert_one({"_id": "~service", "owner": "gone", "leaseUntil": until})
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    assert not rounds(svc, clock, 3)
    assert svc.holds_lease and len(dest.received) == 2


def test_an_item_that_fails_to_become_a_doc_for_an_unforeseen_reason_is_dead_lettered_alone(db, monkeypatch):
    from collector.sinks import batches as service_module

    ids = add_items(db, 3)
    as_doc = service_module.as_doc

    def fragile(item):
        if item.get("itemId") == "1":
            raise RecursionError("a value no one foresaw")
        return as_doc(item)

    monkeypatch.setattr(service_module, "as_doc", fragile)
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    assert not rounds(svc, clock, 3)
    assert set(dest.received) == {ids[0], ids[2]}
    (letter,) = db[DEAD].find({"sink": "a"})
    assert letter["reason"] == "the item cannot be sent: RecursionError: a value no one foresaw"
