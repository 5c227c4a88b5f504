"""The sink service's metrics: bounded labels, counters from 0, and the truth while things fail (an outage keeps
every figure and says how old it is, a stopped sink shows 1, a counter never goes down), linted by promtool."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collector.daemon.sinkmetrics import FAILURES, SinkMetrics


def samples(metrics: SinkMetrics) -> dict[tuple[str, tuple], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def figures(**values):
    base = {"delivered": 0, "failed": {}, "dead_lettered": 0, "backlog": 0, "lag_seconds": 0.0}
    return SimpleNamespace(**{**base, "stopped": False, "paused": False, **values})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_every_configured_sink_and_failure_kind_starts_at_zero_and_gauges_are_unknown_until_measured():
    s = samples(SinkMetrics(["search", "hook"], "1.0", "box-sink-1", bound=60))
    for sink in ("search", "hook"):
        assert s[("collector_sink_delivered_total", (("sink", sink),))] == 0
        assert s[("collector_sink_dead_lettered_total", (("sink", sink),))] == 0
        for kind in FAILURES:
            assert s[("collector_sink_failed_total", (("kind", kind), ("sink", sink)))] == 0
        assert math.isnan(s[("collector_sink_lag_seconds", (("sink", sink),))])
        assert s[("collector_sink_stopped", (("sink", sink),))] == 0
    assert {labels for name, labels in s if name == "collector_sink_failed_total"} == {
        (("kind", k), ("sink", n)) for k in FAILURES for n in ("search", "hook")
    }


def test_counters_follow_the_figures_up_never_down_and_unknown_sinks_and_kinds_get_no_series():
    metrics = SinkMetrics(["search"], "1.0", "x", bound=60)
    metrics.update(
        {
            "search": figures(delivered=10, failed={"refused": 2, "tooLarge": 1, "weird": 5}),
            "other": figures(delivered=9),
        },
        3,
        True,
    )
    metrics.update({"search": figures(delivered=25, failed={"refused": 2, "auth": 1}, dead_lettered=4)}, 0, True)
    metrics.update({"search": figures(delivered=5)}, 0, True)  # a figure that went down: a new baseline
    metrics.update({"search": figures(delivered=7)}, 0, True)
    s = samples(metrics)
    assert s[("collector_sink_delivered_total", (("sink", "search"),))] == 27
    assert s[("collector_sink_failed_total", (("kind", "refused"), ("sink", "search")))] == 2
    assert s[("collector_sink_failed_total", (("kind", "too_large"), ("sink", "search")))] == 1
    assert s[("collector_sink_failed_total", (("kind", "auth"), ("sink", "search")))] == 1
    assert s[("collector_sink_dead_lettered_total", (("sink", "search"),))] == 4
    assert not any(("sink", "other") in labels or ("kind", "weird") in labels for _, labels in s)


def test_an_outage_keeps_every_figure_and_says_how_old_they_are_and_a_stop_shows():
    clock = Clock()
    metrics = SinkMetrics(["search", "hook"], "1.0", "x", bound=60, clock=clock)
    metrics.update(
        {"search": figures(delivered=3, backlog=40, lag_seconds=1200.0), "hook": figures(stopped=True)}, 7, True
    )
    measured = clock.now
    clock.now += 45
    metrics.round_failed(database=True)
    s = samples(metrics)
    assert s[("collector_sink_database_up", ())] == 0
    assert s[("collector_sink_backlog", (("sink", "search"),))] == 40
    assert s[("collector_sink_lag_seconds", (("sink", "search"),))] == 1200
    assert s[("collector_sink_delivered_total", (("sink", "search"),))] == 3
    assert s[("collector_sink_stopped", (("sink", "hook"),))] == 1
    assert s[("collector_sink_outbox_pending", ())] == 7
    assert s[("collector_sink_stats_timestamp_seconds", ())] == measured  # 45 s old, visibly
    assert metrics.readiness()[0] is False and metrics.health()[0] is True
    clock.now += 61
    assert metrics.health()[0] is False  # no round for longer than the bound


def test_a_reload_adds_and_removes_sinks_series():
    metrics = SinkMetrics(["search", "hook"], "1.0", "x", bound=60)
    metrics.update({"hook": figures(stopped=True, delivered=2)}, 0, False)
    metrics.configure(["search", "third"])
    s = samples(metrics)
    assert not any(("sink", "hook") in labels for _, labels in s)  # no stale `stopped` left to alert on
    assert s[("collector_sink_delivered_total", (("sink", "third"),))] == 0
    assert s[("collector_sink_lease_held", ())] == 0


def test_a_process_standing_by_says_it_knows_no_backlog_lag_or_state_only_its_own_counts():
    metrics = SinkMetrics(["search"], "1.0", "x", bound=60)
    metrics.update({"search": figures(delivered=4, backlog=9, lag_seconds=50.0, stopped=True)}, 5, True)
    metrics.update({"search": figures(delivered=6, backlog=0, lag_seconds=0.0)}, 0, False)  # the lease went
    s = samples(metrics)
    assert s[("collector_sink_lease_held", ())] == 0
    assert s[("collector_sink_delivered_total", (("sink", "search"),))] == 6
    for name in ("collector_sink_backlog", "collector_sink_lag_seconds", "collector_sink_stopped"):
        assert math.isnan(s[(name, (("sink", "search"),))]), name
    assert math.isnan(s[("collector_sink_outbox_pending", ())])


@pytest.mark.system  # a real promtool process
def test_promtool_accepts_the_exposition():
    metrics = SinkMetrics(["search", "hook"], "1.0", "box-sink-1", bound=60)
    metrics.update({"search": figures(delivered=3, failed={"refused": 1}, backlog=4, lag_seconds=2.5)}, 1, True)
    promtool = shutil.which("promtool")
    if promtool is None:
        assert not os.environ.get("REQUIRE_PROMTOOL"), "promtool is required here (Debian's prometheus package)"
        return
    text = generate_latest(metrics.registry).decode()
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
