"""sinks/health.py on its own: which batches make a failing streak, the WARNING said once per streak and at most
once per FAILING_LOG_EVERY (a sink that flaps is not a line per batch), the `failing` field written at most every
FAILING_WRITE_EVERY (keeping the `since` a service before this one wrote), unset at the recovery; and the line a
service says when it takes the service lease. Time passed in."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from collector.sinks.delivery import DELIVERED, UNSENT, VANISHED, Fate, Verdict
from collector.sinks.health import FAILING_LOG_EVERY, FAILING_WRITE_EVERY, Health, judged, taken_over
from collector.sinks.store import SINKS

from helpers import T0

REFUSED = Verdict(Fate.RETRY, "refused: 503: batch refused: POST host/hook", "refused", whole=True)
REJECTED = Verdict(Fate.REJECT, "400: mapper_parsing_exception", "rejected")


@pytest.mark.parametrize(
    ("verdicts", "kind", "reason"),
    [
        ([REFUSED] * 3, "failed", REFUSED.reason),
        ([REJECTED, REJECTED], "failed", REJECTED.reason),
        ([REJECTED, REFUSED], "failed", REFUSED.reason),  # the whole-batch failure's reason first
        (
            [Verdict(Fate.AUTH, "authentication refused: 401", "auth", whole=True)],
            "failed",
            "authentication refused: 401",
        ),
        ([Verdict(Fate.RETRY, "", "refused")], "failed", "refused"),
        ([DELIVERED, REJECTED], "done", ""),  # something went through: the destination takes deliveries
        ([DELIVERED], "done", ""),
        ([REJECTED, VANISHED], "", ""),  # not every document failed: no verdict on the sink
        ([UNSENT, UNSENT], "", ""),
        ([], "", ""),
    ],
)
def test_which_batches_make_a_streak(verdicts, kind, reason):
    assert judged(verdicts) == (kind, reason)


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "is failing" in r.getMessage()]


def infos(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "recovered" in r.getMessage()]


def test_a_long_streak_is_said_once_and_its_recovery_once(caplog):
    caplog.set_level(logging.INFO, logger="collector.sinks")
    health = Health()
    for k in range(50):
        health.note("a", [REFUSED], T0 + timedelta(seconds=10 * k))
    assert len(warnings(caplog)) == 1 and "2026-06-01 12:00:00 UTC" in warnings(caplog)[0]
    health.note("a", [DELIVERED], T0 + timedelta(seconds=600))
    (line,) = infos(caplog)
    assert line == "sink a recovered: delivering again after 50 failed batches in 600s"
    health.note("a", [DELIVERED], T0 + timedelta(seconds=610))
    assert len(infos(caplog)) == 1


def test_a_flapping_sink_is_said_at_most_once_per_bound(caplog):
    caplog.set_level(logging.INFO, logger="collector.sinks")
    health = Health()
    now = T0
    for _ in range(30):  # a failure then a delivery, every 20 s, for 10 minutes
        health.note("a", [REFUSED], now)
        health.note("a", [DELIVERED], now + timedelta(seconds=10))
        now += timedelta(seconds=20)
    said = warnings(caplog)
    assert 1 <= len(said) <= 600 / FAILING_LOG_EVERY + 1
    assert len(infos(caplog)) == len(said)  # a recovery is said only of a failure that was said


def test_a_streak_that_starts_within_the_bound_is_said_once_the_bound_passed(caplog):
    caplog.set_level(logging.INFO, logger="collector.sinks")
    health = Health()
    health.note("a", [REFUSED], T0)
    health.note("a", [DELIVERED], T0 + timedelta(seconds=5))
    health.note("a", [REFUSED], T0 + timedelta(seconds=10))  # a new streak, too soon to say again
    assert len(warnings(caplog)) == 1
    health.note("a", [REFUSED], T0 + timedelta(seconds=FAILING_LOG_EVERY + 1))  # it lasts: said now
    assert len(warnings(caplog)) == 2


def test_each_sink_has_its_own_streak(caplog):
    caplog.set_level(logging.INFO, logger="collector.sinks")
    health = Health()
    health.note("a", [REFUSED], T0)
    health.note("b", [REJECTED], T0)
    health.note("a", [DELIVERED], T0 + timedelta(seconds=1))
    assert [w.split(" ")[1] for w in warnings(caplog)] == ["a", "b"]
    assert set(health.streaks) == {"b"}


def test_the_document_is_written_at_the_start_on_a_new_reason_and_then_at_most_every_bound(db):
    db[SINKS].insert_one({"_id": "a"})
    health, writes = Health(), []
    real = db[SINKS].update_one

    def counted(*args, **kwargs):
        writes.append(args)
        return real(*args, **kwargs)

    db[SINKS].update_one = counted
    for k in range(20):  # a refused batch a second, flushed every round
        now = T0 + timedelta(seconds=k)
        health.note("a", [REFUSED], now)
        health.flush(db[SINKS], now)
    assert 1 <= len(writes) <= 2 + 20 / FAILING_WRITE_EVERY * 2
    doc = db[SINKS].find_one({"_id": "a"})
    assert doc["failing"]["since"] == T0 and doc["failing"]["reason"] == REFUSED.reason
    health.note("a", [REJECTED], T0 + timedelta(seconds=21))  # a new reason: written at once
    health.flush(db[SINKS], T0 + timedelta(seconds=21))
    assert db[SINKS].find_one({"_id": "a"})["failing"]["reason"] == REJECTED.reason
    later = T0 + timedelta(seconds=21 + FAILING_WRITE_EVERY)
    health.note("a", [REJECTED], later)
    health.flush(db[SINKS], later)
    assert db[SINKS].find_one({"_id": "a"})["failing"]["at"] == later
    health.note("a", [DELIVERED], later + timedelta(seconds=1))
    health.flush(db[SINKS], later + timedelta(seconds=1))
    assert "failing" not in db[SINKS].find_one({"_id": "a"})


@pytest.mark.parametrize("old", [{"since": T0 - timedelta(hours=3), "at": T0, "reason": "x"}, "junk", 7, None, []])
def test_a_streak_a_service_before_saw_start_keeps_its_since_and_junk_is_replaced(db, old):
    db[SINKS].insert_one({"_id": "a", "failing": old})
    health = Health()
    health.note("a", [REFUSED], T0 + timedelta(minutes=1))
    health.flush(db[SINKS], T0 + timedelta(minutes=1))
    failing = db[SINKS].find_one({"_id": "a"})["failing"]
    kept = isinstance(old, dict)
    assert failing["since"] == (T0 - timedelta(hours=3) if kept else T0 + timedelta(minutes=1))
    assert failing["reason"] == REFUSED.reason and failing["at"] == T0 + timedelta(minutes=1)


def test_a_new_service_clears_a_streak_left_by_the_one_before_at_its_first_delivery(db):
    db[SINKS].insert_one({"_id": "a", "failing": {"since": T0, "at": T0, "reason": "old"}})
    health = Health()
    health.note("a", [DELIVERED], T0 + timedelta(minutes=5))
    health.flush(db[SINKS], T0 + timedelta(minutes=5))
    assert "failing" not in db[SINKS].find_one({"_id": "a"})


def test_a_database_away_keeps_what_is_to_write(db):
    db[SINKS].insert_one({"_id": "a"})
    health = Health()
    health.note("a", [REFUSED], T0)

    class Away:
        def update_one(self, *args, **kwargs):
            raise ConnectionError("away")

    with pytest.raises(ConnectionError):
        health.flush(Away(), T0)
    health.flush(db[SINKS], T0 + timedelta(seconds=1))
    assert db[SINKS].find_one({"_id": "a"})["failing"]["since"] == T0


@pytest.mark.parametrize(
    ("before", "said"),
    [
        (None, "sinks: took the service lease"),
        ({"owner": "me", "leaseUntil": T0}, "sinks: took the service lease"),
        ({"owner": "old", "host": "h", "pid": 9, "leaseUntil": T0 - timedelta(seconds=3)}, "it lapsed at"),
        ({"owner": "old", "host": "h", "pid": 9, "leaseUntil": datetime(2099, 1, 1, tzinfo=T0.tzinfo)}, "2099-01-01"),
        ({"owner": "old", "host": "h", "pid": 9, "leaseUntil": "soon"}, "its end was no date"),
        ({"owner": "old\x1b[2J\n", "host": "h\r", "pid": [1], "leaseUntil": None}, "it had no end"),
    ],
)
def test_the_takeover_line_says_from_whom_and_why(before, said):
    line = taken_over(before, "me", T0, 30.0)
    assert said in line and "\x1b" not in line and "\n" not in line and "\r" not in line


# --- through the service, with the in-memory sink (tests/helpers/fakesink.py) ----------------------------------------
def test_a_sink_that_cannot_start_is_failing_until_its_first_delivery(db, caplog):
    from collector.sinks.sdk import BatchRefused

    from helpers.fakesink import SECRET, Clock, Destination, add_items, run, service, sink_settings

    caplog.set_level(logging.INFO, logger="collector.sinks")
    add_items(db, 3)
    clock, destination = Clock(), Destination()
    destination.prepare_errors = [BatchRefused(f"certificate verify failed: self-signed ({SECRET})")] * 4
    svc = service(db, sink_settings("a"), clock, {"a": destination})
    run(svc, clock, rounds=3, tick=700)
    assert destination.prepared == 0 and destination.prepare_errors  # still failing to start
    failing = db[SINKS].find_one({"_id": "a"})["failing"]
    assert "certificate verify failed" in failing["reason"] and SECRET not in failing["reason"]
    assert len(warnings(caplog)) == 1 and SECRET not in warnings(caplog)[0]
    run(svc, clock, rounds=20, tick=700)
    assert destination.prepared == 1 and len(destination.received) == 3
    assert "failing" not in db[SINKS].find_one({"_id": "a"}) and len(infos(caplog)) == 1
    svc.stop(5)


@pytest.mark.parametrize("refusals", [1, 3, 6])
def test_the_service_writes_the_streak_and_clears_it_at_the_first_delivery(db, caplog, refusals):
    from helpers.fakesink import Clock, Destination, add_items, run, service, sink_settings

    caplog.set_level(logging.INFO, logger="collector.sinks")
    add_items(db, 4)
    clock, destination = Clock(), Destination()
    destination.refuse = refusals
    svc = service(db, sink_settings("a"), clock, {"a": destination})
    seen = []
    for _ in range(2 * refusals + 4):
        run(svc, clock, rounds=1, tick=700)
        doc = db[SINKS].find_one({"_id": "a"}) or {}
        seen.append(doc.get("failing", {}).get("since"))
    assert len(destination.received) == 4
    sinces = {s for s in seen if s is not None}
    assert len(sinces) == 1  # one streak, one `since`, however many batches it refused
    assert seen[-1] is None and len(warnings(caplog)) == 1 and len(infos(caplog)) == 1
    assert "503 down for maintenance" in warnings(caplog)[0]
    svc.stop(5)
