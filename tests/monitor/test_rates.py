"""Rates from the collectors' cumulative counters: differences over their own clock, restarts and counters that go
back start afresh, a silent collector stops counting, the history is bounded in time and in points."""

from __future__ import annotations

from datetime import timedelta

from collector.monitor.rates import HISTORY_SECONDS, MAX_POINTS, STALE_AFTER, Rates, counters

from helpers import T0


def doc(name, at_s, runs=None, items=0, requests=0, not_modified=0, cpu=0.0, started=T0):
    return {
        "_id": name,
        "startedAt": started,
        "statsAt": T0 + timedelta(seconds=at_s),
        "sinceStart": {"runs": runs or {}, "newItems": items, "requests": requests, "notModified": not_modified},
        "process": {"cpuSeconds": cpu},
    }


def test_a_rate_is_the_difference_of_two_writes_over_their_own_clock():
    rates = Rates()
    first = rates.update([doc("a", 0, {"ok": 10}, items=100, requests=20, cpu=1.0)], now=1000.0)
    assert first["total"]["runs"] == 0  # one write is no rate yet
    point = rates.update(
        [doc("a", 2, {"ok": 14, "rateLimit": 2, "network": 2}, items=110, requests=30, not_modified=4, cpu=1.5)],
        now=1001.0,
    )
    assert point["by"]["a"] == {
        "runs": 4.0,
        "newItems": 5.0,
        "requests": 5.0,
        "notModified": 2.0,
        "errors": 1.0,
        "rateLimited": 1.0,
    }
    assert point["total"] == point["by"]["a"]
    assert point["kinds"] == {"network": 1.0}
    assert point["cpu"] == {"a": 25.0}  # half a CPU second over two seconds


def test_totals_add_up_collectors_and_a_missed_read_costs_nothing():
    rates = Rates()
    rates.update([doc("a", 0, {"ok": 0}), doc("b", 0, {"ok": 0})], now=0.0)
    # three seconds later (two reads missed): the difference covers them
    point = rates.update([doc("a", 3, {"ok": 30}), doc("b", 3, {"ok": 3})], now=3.0)
    assert point["by"]["a"]["runs"] == 10.0 and point["by"]["b"]["runs"] == 1.0
    assert point["total"]["runs"] == 11.0


def test_a_restart_or_counters_going_back_start_afresh_instead_of_a_negative_rate():
    rates = Rates()
    rates.update([doc("a", 0, {"ok": 100})], now=0.0)
    restarted = rates.update([doc("a", 1, {"ok": 3}, started=T0 + timedelta(seconds=1))], now=1.0)
    assert restarted["by"]["a"]["runs"] == 0.0
    assert rates.update([doc("a", 2, {"ok": 5}, started=T0 + timedelta(seconds=1))], now=2.0)["by"]["a"]["runs"] == 2
    back = rates.update([doc("a", 3, {"ok": 1}, started=T0 + timedelta(seconds=1))], now=3.0)
    assert back["by"]["a"]["runs"] == 0.0 and all(v >= 0 for v in back["total"].values())


def test_a_collector_that_stops_writing_stops_counting_and_one_gone_is_forgotten():
    rates = Rates()
    rates.update([doc("a", 0, {"ok": 0})], now=0.0)
    assert rates.update([doc("a", 1, {"ok": 5})], now=1.0)["total"]["runs"] == 5.0
    still = rates.update([doc("a", 1, {"ok": 5})], now=1.0 + STALE_AFTER - 0.5)  # not written again: the rate stands
    assert still["total"]["runs"] == 5.0
    silent = rates.update([doc("a", 1, {"ok": 5})], now=1.0 + STALE_AFTER + 0.5)
    assert silent["total"]["runs"] == 0.0
    assert rates.update([], now=20.0)["by"] == {}


def test_the_history_keeps_fifteen_minutes_and_a_bounded_number_of_points():
    rates = Rates()
    for second in range(int(HISTORY_SECONDS) + 120):
        rates.update([doc("a", second, {"ok": second})], now=float(second))
    points = rates.history()
    assert points[0]["t"] >= points[-1]["t"] - HISTORY_SECONDS and len(points) <= HISTORY_SECONDS + 1
    fast = Rates()
    for k in range(MAX_POINTS + 500):
        fast.update([], now=k / 10)
    assert len(fast.history()) == MAX_POINTS


def test_counters_of_any_document_are_finite_non_negative_numbers():
    hostile = {
        "sinceStart": {"runs": {"ok": "9", "x" * 500: float("inf"), "network": -4, "timeout": True}, "newItems": None},
        "process": ["cpu"],
    }
    values = counters(hostile)
    assert values["runs"] == 0 and values["errors"] == 0 and values["cpuSeconds"] == 0
    assert all(len(k) <= 46 for k in values)
    assert counters({"sinceStart": "junk"})["runs"] == 0
    many = {"sinceStart": {"runs": {f"kind{n}": 1 for n in range(1000)}}}
    assert counters(many)["runs"] == 20  # at most MAX_KINDS kinds followed


def test_the_history_keeps_lines_for_a_bounded_number_of_collectors_and_every_one_in_the_totals():
    from collector.monitor.rates import MAX_LINES

    rates = Rates()
    many = 300
    rates.update([doc(f"c{n:03}", 0, {"ok": 0}) for n in range(many)], now=0.0)
    point = rates.update([doc(f"c{n:03}", 1, {"ok": 1}) for n in range(many)], now=1.0)
    assert point["total"]["runs"] == many and len(point["by"]) == many
    (kept,) = rates.history()[-1:]
    assert len(kept["by"]) == MAX_LINES and kept["total"]["runs"] == many


def test_bursty_work_gives_a_steady_rate_over_the_window():
    from collector.monitor.rates import WINDOW

    rates = Rates()
    runs, seen = 0, []
    for second in range(30):
        runs += 40 if second % 5 == 0 else 0  # a burst of 40 runs every five seconds: 8 runs a second
        point = rates.update([doc("a", second, {"ok": runs})], now=float(second))
        if second > WINDOW:
            seen.append(point["total"]["runs"])
    assert seen and all(r == 8.0 for r in seen)
