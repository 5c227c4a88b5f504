"""`collector bench` on a tiny workload: it runs every part and reports consistent numbers (no timing asserts)."""

from __future__ import annotations

import io
import json

from collector.devtools import bench


def test_bench_reports_every_figure_on_a_tiny_workload():
    opts = bench.Options(
        networks=4,
        pages=2,
        latency=0.0,
        concurrency=4,
        quota_networks=2,
        quota=5,
        quota_window=1,
        quota_windows=1,
        quota_pages=20,
        soak_runs=60,
        soak_networks=5,
    )
    out = io.StringIO()
    assert bench.run(opts, out=out) == 0
    result = json.loads(out.getvalue())
    assert result["networks"] == 4 and result["requests"] == 8  # 4 networks x 2 pages, each asked once
    assert result["requests_over_quota"] == 0
    assert result["quota_requests_allowed"] == 10
    assert 0 < result["quota_requests_used"] <= 10
    assert result["soak_runs"] >= 60 and result["soak_not_modified"] >= 60  # normal polls answered 304
    for key in (
        "wall_s_series",
        "wall_s_concurrent",
        "speedup",
        "tasks_per_s",
        "cpu_ms_per_task_series",
        "db_ms_per_task",
        "rss_mb_start",
        "rss_mb_end",
    ):
        assert result[key] > 0
