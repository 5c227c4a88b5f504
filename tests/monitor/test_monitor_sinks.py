"""The monitor's Sinks table from the `sinks` documents, whatever they hold: one find per refresh, each sink's
state, backlog and lag as the service wrote them, a failing streak's since and reason masked and printable, the
service lease judged live, lapsed or stale."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from collector.monitor import reading, view
from collector.sdk.redaction import SECRETS

from helpers import T0

SECRET = "hunter2-sink-password-xyz"


@pytest.fixture
def known_secret():
    SECRETS.add([SECRET])
    yield
    SECRETS.remove([SECRET])


def test_a_failing_sink_a_paused_one_and_a_healthy_one(db, known_secret):
    db.sinks.insert_many(
        [
            {
                "_id": "hooks",
                "kind": "webhook",
                "stats": {"backlog": 12, "lagSeconds": 340.26},
                "counts": {"delivered": 7, "deadLettered": 2},
                "failing": {
                    "since": T0 - timedelta(minutes=9),
                    "at": T0,
                    "reason": f"refused: 500: \x1b[31mpassword {SECRET}\x1b[0m",
                },
            },
            {"_id": "search", "kind": "opensearch", "paused": {"at": T0, "by": "ops", "reason": "upgrade"}},
            {"_id": "typo", "kind": "typesense", "stats": {"backlog": 0, "lagSeconds": 0}},
            {"_id": "~service", "owner": "box-1", "host": "box", "leaseUntil": T0 + timedelta(seconds=20)},
        ]
    )
    shown = view.sinks(reading.read_sinks(db), T0)
    rows = {r["name"]: r for r in shown["rows"]}
    assert [r["name"] for r in shown["rows"]] == ["hooks", "search", "typo"]
    hooks = rows["hooks"]
    assert (hooks["state"], hooks["backlog"], hooks["lagS"], hooks["delivered"], hooks["deadLetters"]) == (
        "FAILING",
        12,
        340.3,
        7,
        2,
    )
    assert hooks["failing"]["since"] == T0 - timedelta(minutes=9) and hooks["failing"]["seconds"] == 540
    assert SECRET not in hooks["failing"]["reason"] and "\x1b" not in hooks["failing"]["reason"]
    assert rows["search"]["state"] == "paused" and rows["typo"]["state"] == "ok" and rows["typo"]["failing"] is None
    assert shown["service"] == {
        "owner": "box-1",
        "host": "box",
        "live": True,
        "stale": False,
        "leaseUntil": T0 + timedelta(seconds=20),
    }


@pytest.mark.parametrize(
    "junk",
    [
        {"failing": "yes", "stats": [1], "counts": "many"},
        {"failing": {"since": "yesterday", "reason": {"$gt": 1}}, "stats": {"backlog": -5, "lagSeconds": float("nan")}},
        {"failing": {"since": T0, "reason": None}, "kind": 42},
        {"failing": {"since": datetime(1, 1, 1), "reason": "x" * 100_000}},
    ],
)
def test_documents_of_any_shape_give_a_row_each(db, junk):
    db.sinks.insert_one({"_id": "odd", **junk})
    db.sinks.insert_one({"_id": "~service", "owner": ["x"], "leaseUntil": datetime(2099, 1, 1)})
    shown = view.sinks(reading.read_sinks(db), T0)
    (row,) = shown["rows"]
    assert row["backlog"] >= 0 and row["lagS"] == row["lagS"]
    assert row["failing"] is None or len(row["failing"]["reason"]) <= 400
    assert shown["service"]["stale"] and not shown["service"]["live"]


def test_no_sink_no_row(db):
    assert view.sinks(reading.read_sinks(db), T0) == {"rows": [], "service": None}
    assert view.work(reading.read_work(db, T0), T0)["sinks"] == {"rows": [], "service": None}
