"""`collector bench`'s sink workload without osmem-server: it delivers to a local webhook receiver instead, says so,
and every figure holds as with osmem-server (tests/system/test_bench.py runs it with osmem-server)."""

from __future__ import annotations

from collector.devtools import bench, destinations, sinkbench
from collector.devtools.options import Options

TINY = Options(networks=3, pages=2, series_networks=1, latencies="0", concurrency=4)


def test_without_osmem_server_the_sink_workload_delivers_to_a_webhook_receiver_and_says_so(monkeypatch):
    monkeypatch.setattr(destinations.Search, "start", classmethod(lambda cls: None))
    result = sinkbench.measure(TINY)
    assert result["sink"] == "webhook"
    assert result["sink_destination"] == "a local webhook receiver checking signatures (osmem-server is not installed)"
    assert result["sink_items"] == result["sink_delivered"] == result["sink_held"] == 3 * 2 * bench.PER_PAGE
    assert result["sink_left"] == {"queued": 0, "marked": 0, "dead_letters": 0}
    assert result["destination_cpu_ms_per_task_sink_on"] >= 0 and result["sink_cpu_ms_per_task_sink_on"] >= 0


def test_sink_off_runs_no_sink_workload():
    assert bench.measure_sink(Options(sink="off")) == {"sink": "off"}


def test_an_unknown_sink_is_refused_before_anything_runs():
    import pytest

    with pytest.raises(RuntimeError, match="--sink is one of opensearch, webhook, off"):
        sinkbench.measure(Options(sink="kafka"))
