"""The sink service's lease is held only by a living holder: an end further ahead than the lease's length (plus
LEASE_SKEW) was written by no service that renews it, and a newcomer takes it over and says so in one line;
`collector sinks status` and `status --check` say it is stale. Two services on one database, time passed in."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from collector.engine.store import LEASE_SKEW
from collector.ops import sinks as ops_sinks
from collector.ops import sinksview, statuscheck
from collector.sinks.store import SERVICE_ID, SERVICE_LEASE_SECONDS, SINKS, lease_doc

from helpers import T0
from helpers.fakesink import Clock, Destination, run, service, sink_settings

BOUND = SERVICE_LEASE_SECONDS + LEASE_SKEW

# (the lease's end a holder long gone (or a shell) left, whether a newcomer takes it at T0, what its line says)
ENDS = [
    (datetime(2099, 1, 1, tzinfo=T0.tzinfo), True, "further ahead than a lease reaches"),
    (T0 + timedelta(days=3), True, "further ahead than a lease reaches"),
    (T0 + timedelta(seconds=BOUND + 1), True, "further ahead than a lease reaches"),
    (T0 + timedelta(seconds=BOUND - 1), False, None),
    (T0 + timedelta(seconds=5), False, None),
    (T0 - timedelta(seconds=1), True, "it lapsed at"),
    ("next year", True, "its end was no date"),
    ([T0], True, "its end was no date"),
]


def ghost_lease(db, until) -> None:
    db[SINKS].insert_one(
        {"_id": SERVICE_ID, "owner": "ghost\x1b[2J", "host": "old-box", "pid": 4242, "leaseUntil": until, "epoch": 7}
    )


@pytest.mark.parametrize(("until", "taken", "said"), ENDS)
def test_a_newcomer_takes_a_lease_no_live_holder_keeps_and_says_so_once(db, caplog, until, taken, said):
    ghost_lease(db, until)
    clock = Clock(T0)
    caplog.set_level(logging.INFO, logger="collector.sinks")
    svc = service(db, sink_settings("a"), clock, {"a": Destination()}, owner="newcomer")
    run(svc, clock, rounds=3, tick=1.0)
    assert svc.holds_lease == taken
    lease = lease_doc(db)
    assert lease["owner"] == ("newcomer" if taken else "ghost\x1b[2J")
    lines = [r.getMessage() for r in caplog.records if "service lease" in r.getMessage()]
    if taken:
        assert lease["epoch"] == 8 and lease["leaseUntil"] == T0 + timedelta(seconds=SERVICE_LEASE_SECONDS)
        (line,) = [m for m in lines if "took" in m]
        assert line.startswith("sinks: took over the service lease from ghost") and said in line
        assert "old-box" in line and "4242" in line and "\x1b" not in line
    else:
        assert lines == []  # standing by from the start, as before: nothing to say
    svc.stop(5)


def test_two_services_one_stops_its_lease_left_years_ahead_and_the_other_takes_over(db, caplog):
    clock = Clock(T0)
    settings = sink_settings("a")
    one = service(db, settings, clock, {"a": Destination()}, owner="one")
    two = service(db, settings, clock, {"a": Destination()}, owner="two")
    for _ in range(3):
        one.step(), two.step()
        clock.advance(10)
    assert one.holds_lease and not two.holds_lease
    # `one` stops for good (never stepped again) with a lease a wrong clock or a shell pushed years ahead
    db[SINKS].update_one({"_id": SERVICE_ID}, {"$set": {"leaseUntil": datetime(2031, 5, 1, tzinfo=T0.tzinfo)}})
    caplog.set_level(logging.INFO, logger="collector.sinks")
    caplog.clear()  # what `one` said when it took the lease at first (when INFO was already on)
    two.step()
    assert two.holds_lease and lease_doc(db)["owner"] == "two"
    assert sum("took over the service lease from one" in r.getMessage() for r in caplog.records) == 1
    for _ in range(5):  # renewed from then on, no other line
        clock.advance(10)
        two.step()
    assert sum("service lease" in r.getMessage() for r in caplog.records) == 1
    one.stop(1), two.stop(1)


def test_while_the_holder_renews_the_other_stands_by(db):
    clock = Clock(T0)
    settings = sink_settings("a")
    one = service(db, settings, clock, {"a": Destination()}, owner="one")
    two = service(db, settings, clock, {"a": Destination()}, owner="two")
    for _ in range(20):
        one.step(), two.step()
        clock.advance(4)
    assert one.holds_lease and not two.holds_lease and lease_doc(db)["owner"] == "one"
    one.stop(1), two.stop(1)


@pytest.mark.parametrize("until", [datetime(2099, 1, 1, tzinfo=T0.tzinfo), T0 + timedelta(seconds=BOUND + 30), "x"])
def test_sinks_status_and_check_say_a_stale_lease(db, until):
    ghost_lease(db, until)
    settings = sink_settings("a")
    report = ops_sinks.gather(db, T0, settings.sinks)
    assert report["service"]["stale"] and not report["service"]["live"]
    text = sinksview.render_status(report)
    assert "lease STALE" in text and "the next sink service takes it over" in text and "\x1b" not in text
    code, line = statuscheck.check({"modes": {}, "instances": [], "sinks": report}, settings)
    assert code == statuscheck.WARNING
    assert "the sink service lease of ghost" in line and "is stale" in line
    assert "no sink service holds the lease" not in line  # said once, as what it is


def test_a_live_lease_is_not_called_stale(db):
    ghost_lease(db, T0 + timedelta(seconds=20))
    report = ops_sinks.gather(db, T0, ["a"])
    assert report["service"]["live"] and not report["service"]["stale"]
    assert "STALE" not in sinksview.render_status(report)
