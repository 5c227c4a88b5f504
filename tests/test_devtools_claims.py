"""The claim's figures in `collector bench` (devtools/claimbench.py): what `explain("executionStats")` answers,
in the shapes MongoDB gives it (the classic engine's find, a count, an aggregation's `$cursor`, a slot-based plan,
a collection scan), turned into keys and documents examined per document returned; and the fleet it claims from.
The bench itself was not run against a real MongoDB here (none can be installed): these answers are shaped like
the server's documented output."""

from __future__ import annotations

from datetime import UTC, datetime

import mongomock
import pytest

from collector.devtools import claimbench
from collector.engine.store import Store, due_query

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def ixscan(name: str, keys: dict) -> dict:
    return {"stage": "IXSCAN", "keyPattern": keys, "indexName": name, "direction": "forward"}


CLASSIC_FIND = {
    "explainVersion": "1",
    "queryPlanner": {
        "namespace": "likeastore.networks",
        "winningPlan": {
            "stage": "LIMIT",
            "limitAmount": 192,
            "inputStage": {
                "stage": "FETCH",
                "inputStage": ixscan("mode_1_scheduledTo_1", {"mode": 1, "scheduledTo": 1}),
            },
        },
        "rejectedPlans": [{"stage": "FETCH", "inputStage": ixscan("leaseToken_1", {"leaseToken": 1})}],
    },
    "executionStats": {
        "executionSuccess": True,
        "nReturned": 96,
        "executionTimeMillis": 1,
        "totalKeysExamined": 97,
        "totalDocsExamined": 96,
        "executionStages": {"stage": "LIMIT", "nReturned": 96},
    },
    "ok": 1.0,
}
COUNT = {
    "queryPlanner": {"winningPlan": {"stage": "COUNT", "inputStage": ixscan("mode_1_scheduledTo_1", {})}},
    "executionStats": {
        "nReturned": 0,
        "totalKeysExamined": 120,
        "totalDocsExamined": 120,
        "executionStages": {"stage": "COUNT", "nCounted": 100, "inputStage": {"stage": "FETCH", "nReturned": 100}},
    },
    "ok": 1.0,
}
AGGREGATE = {
    "stages": [
        {
            "$cursor": {
                "queryPlanner": {"winningPlan": {"stage": "FETCH", "inputStage": ixscan("errors_1", {"errors": 1})}},
                "executionStats": {"nReturned": 4, "totalKeysExamined": 4, "totalDocsExamined": 4},
            }
        },
        {"$group": {"_id": "$service"}},
    ],
    "ok": 1.0,
}
SLOT_BASED = {
    "explainVersion": "2",
    "queryPlanner": {
        "winningPlan": {
            "queryPlan": {"stage": "FETCH", "inputStage": ixscan("mode_1_service_1_scheduledTo_1", {})},
            "slotBasedPlan": {"slots": "...", "stages": "..."},
        }
    },
    "executionStats": {"nReturned": 10, "totalKeysExamined": 10, "totalDocsExamined": 10},
}
SCAN = {
    "queryPlanner": {"winningPlan": {"stage": "SORT", "inputStage": {"stage": "COLLSCAN", "direction": "forward"}}},
    "executionStats": {"nReturned": 192, "totalKeysExamined": 0, "totalDocsExamined": 100_000},
}


@pytest.mark.parametrize(
    ("explained", "returned", "keys", "docs", "per", "index"),
    [
        (CLASSIC_FIND, 96, 97, 96, 1.01, "mode_1_scheduledTo_1"),
        (COUNT, 100, 120, 120, 1.2, "mode_1_scheduledTo_1"),
        (AGGREGATE, 4, 4, 4, 1.0, "errors_1"),
        (SLOT_BASED, 10, 10, 10, 1.0, "mode_1_service_1_scheduledTo_1"),
        (SCAN, 192, 0, 100_000, 520.83, "none (a collection scan)"),
        ({"ok": 1.0}, 0, 0, 0, 0.0, "none (a collection scan)"),
    ],
)
def test_explain_figures_read_every_shape_of_the_servers_answer(explained, returned, keys, docs, per, index):
    figures = claimbench.explain_figures("q", explained)
    assert figures == {
        "explain_q_returned": returned,
        "explain_q_keys": keys,
        "explain_q_docs": docs,
        "explain_q_examined_per_returned": per,
        "explain_q_index": index,
    }


def test_the_explained_queries_are_the_codes_own_and_run_as_commands():
    queries = dict(claimbench.recurring(NOW))
    assert set(queries) == {"claim", "count_due", "count_due_undated", "behind", "repair"}
    assert queries["count_due"]["query"] == due_query("normal", NOW, 300.0)
    assert queries["claim"]["sort"] == {"scheduledTo": 1} and queries["claim"]["limit"] == claimbench.LIMIT


@pytest.mark.parametrize("n", [100, 250, 1200])
def test_the_fleet_has_the_due_networks_and_a_claim_takes_exactly_them(n):
    db = mongomock.MongoClient(tz_aware=True)["fleet"]
    claimbench.fill(db, n, NOW, batch=97)
    assert db.networks.count_documents({}) == n
    won = Store(db).claim("normal", NOW, claimbench.LIMIT, claimbench.OWNER, NOW.replace(hour=13))
    assert len(won) == min(claimbench.DUE, n)
    claimbench.put_back(db, NOW)
    assert Store(db).count_due("normal", NOW) == min(claimbench.DUE, n)


class ExplainingDatabase:
    """Answers pymongo's `Database.command("explain", ...)` as a server would, and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict, dict]] = []

    def command(self, name: str, value: dict, **kwargs: object) -> dict:
        self.asked.append((name, value, kwargs))
        return COUNT if "count" in value else CLASSIC_FIND


def test_every_recurring_read_is_explained_with_execution_stats():
    db = ExplainingDatabase()
    figures = claimbench.explain_all(db, NOW)
    assert [a[0] for a in db.asked] == ["explain"] * 5
    assert all(a[2] == {"verbosity": "executionStats"} for a in db.asked)
    assert [next(iter(a[1])) for a in db.asked] == ["find", "count", "count", "find", "find"]
    assert figures["explain_claim_examined_per_returned"] == 1.01
    assert figures["explain_count_due_returned"] == 100 and figures["explain_behind_index"] == "mode_1_scheduledTo_1"
