"""`collector_sink_lease_held` is 1 only in the process that works, and only while it can confirm it: a process cut
off from MongoDB, or one whose rounds keep failing past the lease, says 0 — never two processes saying 1 at once
(the one cut off and the one that took the lapsed lease over)."""

from __future__ import annotations

from prometheus_client import generate_latest

from collector.daemon.sinkmetrics import SinkMetrics
from collector.daemon.sinkprocess import SinkProcess

from helpers.fakesink import Clock, Destination, FlakyDb, service, sink_settings


def held(metrics: SinkMetrics) -> float:
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith("collector_sink_lease_held "):
            return float(line.split()[1])
    raise AssertionError("no collector_sink_lease_held")


class Seconds:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_process_cut_off_from_mongodb_says_0_while_the_one_that_took_over_says_1(db):
    clock, dests, settings = Clock(), {"a": Destination()}, sink_settings("a")
    flaky = FlakyDb(db)
    first = SinkProcess(service(flaky, settings, clock, dests, owner="one"), settings, [])
    first.metrics = SinkMetrics(["a"], "t", "one", 300)
    first.round()
    assert held(first.metrics) == 1
    flaky.down = True
    clock.advance(120)  # the lease (30 s) lapsed long ago
    second = SinkProcess(service(db, settings, clock, dests, owner="two"), settings, [])
    second.metrics = SinkMetrics(["a"], "t", "two", 300)
    second.round()
    first.round()
    assert (held(first.metrics), held(second.metrics)) == (0, 1)
    flaky.down = False  # back: the first finds the lease taken and stands by
    first.round()
    assert (held(first.metrics), held(second.metrics)) == (0, 1)


def test_a_database_error_of_the_round_itself_says_0_at_once():
    metrics = SinkMetrics(["a"], "t", "one", 300, clock=Seconds())
    metrics.update({}, 0, True)
    metrics.round_failed(database=True)
    assert held(metrics) == 0
    metrics.update({}, 0, True)
    assert held(metrics) == 1


def test_rounds_failing_on_something_else_say_1_only_as_long_as_the_lease_surely_lasts():
    seconds = Seconds()
    metrics = SinkMetrics(["a"], "t", "one", 300, clock=seconds, lease_seconds=30)
    metrics.update({}, 0, True)  # the lease seen held: renewed 5 s ago at most, so it lasts 25 s more at least
    seconds.now += 20
    metrics.round_failed(database=False)
    assert held(metrics) == 1
    seconds.now += 5  # no round has seen it since: another process may hold it by now
    assert held(metrics) == 0
    metrics.update({}, 0, True)
    assert held(metrics) == 1
    metrics.update({}, 0, False)  # standing by
    assert held(metrics) == 0


def test_a_process_whose_loop_is_stuck_says_0_once_the_lease_may_have_lapsed():
    seconds = Seconds()
    metrics = SinkMetrics(["a"], "t", "one", 300, clock=seconds, lease_seconds=60)
    metrics.update({}, 0, True)
    seconds.now += 49
    assert held(metrics) == 1
    seconds.now += 1  # no round at all: scraped all the same
    assert held(metrics) == 0
