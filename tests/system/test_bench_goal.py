"""The bench's goal figures (devtools/goal.py): the run line by secrets held, the polls with the daemon's own
observers, the scaling cycles and `processes_for_10M` — every figure reported, consistently, on a tiny workload (no
timing asserts); the arithmetic of the goal; the window that feeds the stand-in a scaling cycle's networks."""

from __future__ import annotations

import math
from datetime import timedelta

import mongomock
import pytest

from collector.devtools import goal
from collector.devtools.options import Options
from collector.sdk import utcnow

TINY = Options(
    polls=40,
    poll_networks=8,
    poll_latency=0.0,
    concurrency=4,
    goal_concurrency=4,
    scale_networks="30,90",
    scale_latency=0.0,
    run_lines=50,
    floor_polls=20,
)


@pytest.mark.parametrize(
    ("engine", "all_in", "share", "floor", "processes", "full_core"),
    [
        (0.40, 1.07, 1.0, 0.40, 12, 12),  # within the budget: 1.08 ms per poll on a whole core
        (0.80, 1.50, 0.75, 0.40, 23, 17),
        (1.20, 2.00, 0.50, 0.30, 45, 23),
    ],
)
def test_processes_for_10m_follow_from_the_cpu_per_poll_and_the_share_of_a_core(
    engine, all_in, share, floor, processes, full_core
):
    observed = {
        "engine_cpu_ms_per_poll_apart_observed": engine,
        "all_in_cpu_ms_per_poll_observed": all_in,
        "core_share_observed": share,
        "polls_per_s_observed_whole": share / all_in * 1000 * 0.9,  # the start and the stop in the whole run
    }
    figures = goal.goal_figures(observed, floor)
    assert figures["engine_vs_bench_floor_poll_observed"] == round(engine / floor, 2)
    assert figures["goal_polls_per_s"] == round(10_000_000 / 900, 1)
    assert figures["polls_per_s_per_process_goal"] == round(share / all_in * 1000, 1)
    assert figures["processes_for_10M"] == processes
    assert figures["processes_for_10M_full_core"] == full_core
    assert figures["processes_for_10M_whole"] == math.ceil(10_000_000 / 900 / observed["polls_per_s_observed_whole"])


def test_each_run_is_compared_with_the_floor_measured_beside_it():
    """A run on a slow minute over that minute's floor: the median of the ratios (1.5, 0.8, 1.1: 1.1), not the
    median engine over the median floor (0.30 / 0.25 = 1.2)."""
    assert goal.paired([0.20, 0.30, 0.45], [0.20, 0.30, 0.45]) == 1.0
    assert goal.paired([0.30, 0.20, 0.33], [0.20, 0.25, 0.30]) == 1.1  # 1.5, 0.8, 1.1
    with pytest.raises(ValueError):
        goal.paired([0.3, 0.2], [0.2])


@pytest.mark.parametrize(("total", "window", "start"), [(10, 4, 0), (25, 8, 0), (7, 16, 0), (10, 4, 30)])
def test_the_window_feeds_every_network_once_and_takes_out_those_polled(total, window, start):
    db = mongomock.MongoClient(tz_aware=True)["goal_window"]
    now = utcnow()
    feeder = goal.Window(db, total, now, window, start)
    seen: set[str] = set()
    polled_at = now + timedelta(seconds=goal.INTERVAL_S)
    while True:
        feeder.top_up()
        present = list(db.networks.find({"scheduledTo": {"$lte": now}}))
        assert db.networks.count_documents({}) <= window
        if not present:
            break
        first = present[0]  # one network polled: due again only in a day
        assert first["accessToken"] not in seen
        seen.add(first["accessToken"])
        db.networks.update_one({"_id": first["_id"]}, {"$set": {"scheduledTo": polled_at}})
    assert seen == {f"bench-token-{i}" for i in range(start, start + total)} and feeder.fed == total
    assert db.users.count_documents({}) == total


def test_every_scaling_cycle_polls_networks_whose_tokens_are_new_to_the_process(monkeypatch):
    """Five short cycles in one process: each brings tokens the secret set does not mask already, as a fleet's claims
    do (with the same tokens again, every cycle after the first found them all known)."""
    taken: list[tuple[int, int]] = []
    cycle = goal.scaling_cycle

    def noted(opts, dbs, networks, first=0):
        measured = cycle(opts, dbs, networks, first)
        taken.append((first, first + networks))
        return measured

    monkeypatch.setattr(goal, "scaling_cycle", noted)
    result = goal.scaling_apart(TINY)
    assert goal.SHORT_REPEATS == 5 and 90 < goal.SHORT  # five cycles of each size, one after the other
    assert taken == [(first, first + 30) for first in range(0, 150, 30)] + [
        (first, first + 90) for first in range(150, 600, 90)
    ]
    assert result["engine_cpu_ms_per_network_30"] > 0 and result["engine_cpu_ms_per_network_90"] > 0


def test_the_goal_figures_are_all_reported_consistently_on_a_tiny_workload():
    result = goal.measure(TINY, floor_ms_per_poll=0.4)
    for count in goal.RUN_LINE_HELD:
        assert result[f"run_line_us_{count}"] > 0
    assert result["run_line_churn_us_4096"] > 0 and result["secret_automata_4096"] >= 1
    assert result["secrets_held_observed"] == goal.HELD and result["goal_concurrency"] == 4
    engine, all_in = result["engine_cpu_ms_per_poll_apart_observed"], result["all_in_cpu_ms_per_poll_observed"]
    assert engine > 0 and all_in > 0 and 0 < result["core_share_observed"]
    assert result["polls_per_s_observed_whole"] > 0 and result["all_in_cpu_ms_per_poll_observed_whole"] > 0
    assert abs(result["engine_vs_bench_floor_poll_observed"] - engine / 0.4) < 0.01
    assert result["floor_ms_per_poll_observed"] > 0 and result["engine_vs_floor_poll_observed"] > 0
    per_process = result["polls_per_s_per_process_goal"]  # rounded to 0.1: the figure lies between the two bounds
    needed = 10_000_000 / 900
    assert (
        math.ceil(needed / (per_process + 0.05))
        <= result["processes_for_10M"]
        <= math.ceil(needed / (per_process - 0.05))
    )
    assert result["scale_networks"] == [30, 90]
    low, high = result["engine_cpu_ms_per_network_30"], result["engine_cpu_ms_per_network_90"]
    assert low > 0 and high > 0 and result["scale_wall_s_90"] > 0
    assert abs(result["engine_cpu_per_network_largest_vs_smallest"] - high / low) < 0.01 * high / low + 0.001


def test_the_meter_times_the_steady_part_from_its_warm_mark_to_its_target():
    from collector.devtools.meter import Meter

    meter = Meter(10, warm=2)
    for _ in range(5):
        meter.count()
    with pytest.raises(RuntimeError, match="not timed"):
        meter.steady()  # the target not reached yet
    for _ in range(6):
        meter.count()  # past the target: no third mark
    steady = meter.steady()
    assert steady["steady_polls"] == 8 and steady["steady_wall_s"] >= 0 and steady["steady_cpu_s"] >= 0
    assert meter.done.is_set() and len(meter.marks) == 2
    single = Meter(1, warm=1)
    single.count()
    with pytest.raises(RuntimeError, match="no steady part"):
        single.steady()  # a one-run workload: said, not divided by nothing
    plain = Meter(3)
    for _ in range(3):
        plain.count()
    assert plain.marks == [] and plain.done.is_set()
