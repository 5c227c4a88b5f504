"""`collector status` and `status --check` on the sinks: a configured sink stopped, paused or lagging past
SINK_LAG_WARN, and sinks configured with no sink service holding the lease, are warnings; backlog and lag are
performance data; a sink no longer configured is not judged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bson import ObjectId

from collector.ops.status import gather, render
from collector.ops.statuscheck import OK, WARNING, check
from collector.sdk.timeutil import utcnow
from collector.settings import settings_for_tests

from helpers import TOKEN


@pytest.fixture
def now():
    return utcnow()


def base(db, now) -> None:
    """A fleet with nothing to warn about: a live normal collector, no due network."""
    db.collectors.insert_one({"_id": "c1", "mode": "normal", "heartbeatAt": now, "heartbeatSeconds": 15})
    db.collectors.insert_one({"_id": "c2", "mode": "initial", "heartbeatAt": now, "heartbeatSeconds": 15})
    db.networks.insert_one({"service": "github", "user": "a@x.test", "accessToken": TOKEN, "mode": "normal"})


def live_lease(db, now) -> None:
    db.sinks.insert_one(
        {"_id": "~service", "owner": "box-sink-1", "leaseUntil": now + timedelta(seconds=30), "beatAt": now}
    )


def queue(db, sink: str, minutes: float, n: int = 1) -> None:
    for _ in range(n):
        item = ObjectId()
        date = utcnow() - timedelta(minutes=minutes)
        db.sinkQueue.insert_one({"_id": {"s": sink, "i": item}, "sink": sink, "item": item, "date": date, "at": date})


def verdict(db, now, **settings):
    return check(gather(db, now, 15), settings_for_tests(**settings))


def test_healthy_sinks_are_ok_with_their_backlog_and_lag_as_performance_data(db, now):
    base(db, now)
    live_lease(db, now)
    db.sinks.insert_one({"_id": "search", "kind": "opensearch"})
    queue(db, "search", 2, n=3)
    code, line = verdict(db, now, sinks=("search",))
    assert code == OK, line
    assert "sink_search_backlog=3;;;0" in line and "sink_search_lag=120s;900;;0" in line


def test_a_stopped_a_paused_and_a_lagging_sink_each_warn(db, now):
    base(db, now)
    live_lease(db, now)
    db.sinks.insert_many(
        [
            {"_id": "hook", "stopped": {"at": now, "reason": "401 from hooks.example|/in"}},
            {"_id": "search", "paused": {"at": now, "by": "ann@box", "reason": "reindexing"}},
            {"_id": "tsense"},
            {"_id": "gone", "stopped": {"at": now, "reason": "old"}},  # not configured any more: not judged
        ]
    )
    queue(db, "tsense", 20)
    queue(db, "search", 60)  # paused: its lag grows by design, the pause is the warning
    code, line = verdict(db, now, sinks=("hook", "search", "tsense"), sink_lag_warn=900.0)
    assert code == WARNING
    text, perf = line.split(" | ")
    assert "sink hook stopped since" in text and "401 from hooks.example//in" in text  # a | would start the perf data
    assert "sink search paused since" in text and "by ann@box: reindexing" in text
    assert "sink tsense: lag 1200s over 900s (1 queued)" in text
    assert "gone" not in line and "sink search: lag" not in text
    assert line.count("|") == 1


def test_sinks_configured_and_no_service_holding_the_lease_warns(db, now):
    base(db, now)
    code, line = verdict(db, now, sinks=("search",))
    assert code == WARNING and "no sink service holds the lease" in line
    db.sinks.insert_one({"_id": "~service", "owner": "old", "leaseUntil": now - timedelta(minutes=3)})
    code, line = verdict(db, now, sinks=("search",))
    assert code == WARNING and "lease expired" in line
    code, line = verdict(db, now)  # no sink configured: nothing to say about sinks
    assert code == OK and "sink" not in line


def test_plain_status_prints_a_sinks_line(db, now):
    base(db, now)
    live_lease(db, now)
    db.sinks.insert_many([{"_id": "search", "kind": "opensearch"}, {"_id": "hook", "stopped": {"at": now}}])
    queue(db, "search", 3, n=2)
    text = render(gather(db, now, 15))
    line = text.splitlines()[-1]
    assert line.startswith("sinks: ") and "hook STOPPED" in line and "search 2 queued, lag 3m" in line
    assert "service box-sink-1" in line
    empty = render(gather(db.client["other"], now, 15))
    assert empty.splitlines()[-1] == "sinks: none"
