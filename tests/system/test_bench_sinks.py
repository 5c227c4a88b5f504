"""`collector bench`'s sink workload without osmem-server: it delivers to a local webhook receiver instead, says so,
and every figure holds as with osmem-server (tests/system/test_bench.py runs it with osmem-server)."""

from __future__ import annotations

from collector.devtools import bench, destinations, sinkbench
from collector.devtools.options import Options

TINY = Options(networks=3, pages=2, series_networks=1, latencies="0", concurrency=4, sink_networks=2)


def test_without_osmem_server_the_sink_workload_delivers_to_a_webhook_receiver_and_says_so(monkeypatch):
    monkeypatch.setattr(destinations.Search, "start", classmethod(lambda cls: None))
    result = sinkbench.measure(TINY)
    assert result["sink"] == "webhook"
    assert result["sink_destination"] == "a local webhook receiver checking signatures (osmem-server is not installed)"
    assert result["sink_items"] == result["sink_delivered"] == result["sink_held"] == 2 * 2 * bench.PER_PAGE
    assert result["sink_walk_items"] == 3 * 2 * bench.PER_PAGE
    assert result["sink_left"] == {"queued": 0, "marked": 0, "dead_letters": 0}
    assert result["destination_cpu_ms_per_task_sink_on"] >= 0 and result["sink_cpu_ms_per_task_sink_on"] >= 0


def test_sink_off_runs_no_sink_workload():
    assert bench.measure_sink(Options(sink="off")) == {"sink": "off"}


def test_an_unknown_sink_is_refused_before_anything_runs():
    import pytest

    with pytest.raises(RuntimeError, match="--sink is one of opensearch, webhook, stalled, off"):
        sinkbench.measure(Options(sink="kafka"))


def test_the_stand_in_answers_pymongos_counts_and_a_sink_queues_writes():
    """What a sink service asks of the stand-in: counts (with a limit), `{s, i}` ids inserted and found again."""
    import pytest
    from pymongo import MongoClient
    from pymongo.errors import BulkWriteError

    from collector.devtools.mongowire import WireServer

    with WireServer(quick_inserts=True) as wire:
        db = MongoClient(wire.uri).get_default_database()
        db.items.insert_many([{"_id": f"i{k}", "sinkPending": True} for k in range(5)] + [{"_id": "i9"}])
        assert db.items.count_documents({"sinkPending": True}) == 5
        assert db.items.count_documents({"sinkPending": True}, limit=2) == 2
        assert db.items.count_documents({"sinkPending": False}) == 0
        entries = [{"_id": {"s": "bench", "i": f"i{k}"}, "sink": "bench"} for k in range(3)]
        db.sinkQueue.insert_many(entries, ordered=False)
        with pytest.raises(BulkWriteError) as again:
            db.sinkQueue.insert_many(entries, ordered=False)
        assert {e["code"] for e in again.value.details["writeErrors"]} == {11000}
        assert db.sinkQueue.count_documents({"sink": "bench"}) == 3
        db.sinkQueue.delete_many({"_id": {"$in": [e["_id"] for e in entries[:2]]}})
        assert [e["_id"]["i"] for e in db.sinkQueue.find()] == ["i2"]


def test_beside_a_stalled_sink_nothing_arrives_and_the_walks_are_measured_on_both_sides():
    result = sinkbench.measure(Options(**{**TINY.__dict__, "sink": "stalled"}))
    assert result["sink"] == "stalled" and result["sink_destination"].startswith("a destination that never answers")
    assert result["sink_delivered_during_walk"] == 0 and result["sink_walk_items"] == 3 * 2 * bench.PER_PAGE
    assert result["engine_cpu_ms_per_page_apart_sink_on"] > 0 and result["efficiency_apart_sink_off"] > 0
    assert "sink_items_per_s" not in result  # nothing to measure: nothing arrives
