"""`collector bench`'s claim workload (devtools/claimbench.py) on the mongowire stand-in in a process of its own,
as the bench runs it: every size gives its wall time, the collector's CPU, the stand-in's CPU apart and the
networks won (the due ones, whatever the size). No timing is asserted."""

from __future__ import annotations

from collector.devtools import bench, claimbench
from collector.devtools.options import Options


def test_the_claim_workload_reports_each_size_with_the_standin_apart():
    result = bench.measure_claim(Options(claim_networks="150,400"))
    assert result["claim_database"] == "standin"
    for n in (150, 400):
        assert result[f"claim_won_{n}"] == claimbench.DUE
        assert result[f"claim_ms_{n}"] > 0 and result[f"claim_cpu_ms_{n}"] >= 0
        assert result[f"claim_db_cpu_ms_{n}"] >= 0
        less = result[f"claim_ms_{n}"] - result[f"claim_db_cpu_ms_{n}"]
        assert abs(result[f"claim_ms_{n}_less_db"] - max(less, 0.0)) <= 0.02
    assert not any(k.startswith("explain_") for k in result)  # explain() needs a real MongoDB


def test_no_size_given_runs_nothing():
    assert bench.measure_claim(Options(claim_networks="")) == {}
