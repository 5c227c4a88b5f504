"""Prometheus /metrics and /healthz over a real loopback socket; the shipped alerts and dashboard name only
metrics the collector serves."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collector.daemon import Daemon
from collector.daemon.metrics import Metrics, MetricsServer, progress_bound
from collector.devtools.fakeapi import make_stars
from collector.engine import Collector

from helpers import T0, TOKEN, GitHubStub, add_network
from proc import get

ROOT = Path(__file__).resolve().parents[2]


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_runs_items_requests_and_durations_of_a_real_pass(db, settings, http_mock):
    GitHubStub(http_mock, stars=make_stars(150, seed=2))
    add_network(db)
    now = {"t": 1000.0}
    metrics = Metrics("initial", "box-9", "9.9", bound=60, clock=lambda: now["t"])
    server = MetricsServer(metrics, "127.0.0.1", 0)
    try:
        collector = Collector(db, settings)
        collector.observers.add(metrics)
        collector.run_pass("initial", now=T0)
        status, text = get(server.port, "/metrics")
        assert status == 200
        got = samples(text)
        assert got[("collector_runs_total", (("service", "github"), ("status", "ok")))] == 1
        assert got[("collector_items_total", (("service", "github"),))] == 100
        assert got[("collector_api_requests_total", (("code", "200"), ("service", "github")))] == 1
        assert got[("collector_run_duration_seconds_count", (("service", "github"),))] == 1
        assert got[("collector_claim_batch_size_count", ())] == 1
        assert got[("collector_claim_batch_size_sum", ())] == 1
        assert ("collector_schedule_lag_seconds", (("mode", "initial"),)) in got
        assert got[("collector_info", (("instance_id", "box-9"), ("mode", "initial"), ("version", "9.9")))] == 1
        assert got[("collector_last_progress_timestamp_seconds", ())] == 1000.0
        assert got[("process_resident_memory_bytes", ())] > 0
        assert TOKEN not in text
    finally:
        server.close()


def test_healthz_is_200_while_the_loop_goes_round_and_503_with_a_reason_when_it_stalls():
    now = {"t": 1000.0}
    metrics = Metrics("normal", "box-8", "9.9", bound=75, clock=lambda: now["t"])
    server = MetricsServer(metrics, "127.0.0.1", 0)
    try:
        now["t"] += 70
        assert get(server.port, "/healthz") == (200, "ok: loop alive, last progress 70s ago\n")
        now["t"] += 10
        status, body = get(server.port, "/healthz")
        assert status == 503 and body == "loop silent for 80s (bound 75s)\n"
        metrics.on_tick(2)  # the loop went round: alive, though no work was done
        assert get(server.port, "/healthz") == (200, "ok: loop alive, last progress 80s ago\n")
        assert samples(get(server.port, "/metrics")[1])[("collector_last_progress_timestamp_seconds", ())] == 1000
    finally:
        server.close()


def test_the_bound_follows_the_settings(settings):
    assert progress_bound(settings.with_(heartbeat_seconds=15, http_timeout=30)) == 75


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_daemon_serves_metrics_while_it_runs_and_stops_serving_on_exit(db, settings):
    port = free_port()
    collector = Collector(db, settings.with_(metrics_port=port, heartbeat_seconds=0.05), instance_id="box-7")
    daemon = Daemon(collector, "normal")
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        for _ in range(200):
            if daemon.metrics_server is not None:
                break
            time.sleep(0.02)
        assert get(port, "/healthz")[0] == 200
        text = get(port, "/metrics")[1]
        assert 'collector_info{instance_id="box-7",mode="normal"' in text
    finally:
        daemon.stopping.set()
        thread.join(30)
    assert not thread.is_alive()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0  # no longer listening


def served_names() -> set[str]:
    """Every sample name the collector's registry can expose, labelled families included before first use."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}
    return {
        family.name + suffix
        for family in Metrics("normal", "x", "0", bound=60).registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


def named_in(expr: str) -> set[str]:
    return set(re.findall(r"\b((?:collector|process)_[a-z_]+)\b", expr))


def test_every_metric_the_alerts_and_the_dashboard_name_is_served():
    served = served_names()
    rules = yaml.safe_load((ROOT / "contrib/prometheus/alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {"CollectorNoProgress", "CollectorScheduleLagHigh", "CollectorErrorRateHigh"} <= alerts
    assert {"CollectorDisabledNetworksGrowing", "CollectorJobFailing"} <= alerts
    dashboard = json.loads((ROOT / "contrib/grafana/collector.json").read_text())
    exprs += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    named = set().union(*(named_in(e) for e in exprs))
    assert len(named) >= 12
    assert named <= served, named - served


def test_a_port_in_use_is_logged_and_collection_goes_on_without_metrics(db, settings, caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        collector = Collector(db, settings.with_(metrics_port=port), instance_id="box-6")
        daemon = Daemon(collector, "normal")
        assert daemon.start_metrics("9.9") is None
    assert any("cannot listen" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)
    assert not any(type(o).__name__ == "Metrics" for o in collector.observers.observers)


def test_labels_are_bounded_counters_start_at_zero_and_no_label_is_prometheus_own():
    from collector.engine.registry import Registry
    from collector.engine.run import Status

    services = Registry().names()
    metrics = Metrics("normal", "box-5", "9.9", bound=60, services=services, jobs=["heartbeat"])
    got = samples(generate_latest(metrics.registry).decode())
    for service in services:
        for status in Status:
            assert got[("collector_runs_total", (("service", service), ("status", str(status))))] == 0
        assert got[("collector_networks_disabled_total", (("service", service),))] == 0
    assert got[("collector_jobs_total", (("name", "heartbeat"), ("outcome", "error")))] == 0
    assert got[("collector_database_errors_total", (("operation", "claim"),))] == 0
    assert got[("collector_database_up", ())] == 1
    assert all("instance" not in dict(labels) and "job" not in dict(labels) for _, labels in got)
    # a service string nobody registered, however many, is one `other` series
    for name in ("pocket", "x" * 500, "new\nline", None, 42):
        assert metrics.service(name) == "other"
    assert metrics.service("github") == "github"


def test_the_quota_gauge_counts_tokens_blocked_now_only():
    from datetime import timedelta

    from collector.engine.quota import QuotaMemory
    from collector.sdk.errors import Quota

    memory = QuotaMemory()
    memory.remember("github", "t1", Quota(remaining=0, limit=10, reset=T0 + timedelta(minutes=5)), None)
    memory.remember("github", "t2", Quota(remaining=9, limit=10, reset=T0 + timedelta(minutes=5)), None)
    memory.remember("github", "t3", None, T0 + timedelta(seconds=30))
    assert len(memory) == 3 and memory.blocked(T0) == 2  # t2 has quota left: known, not blocked
    assert memory.blocked(T0 + timedelta(minutes=1)) == 1 and memory.blocked(T0 + timedelta(hours=1)) == 0


def test_readiness_follows_the_database_and_a_stop_and_reloads_move_both_bounds(settings):
    from pymongo.errors import AutoReconnect, DuplicateKeyError

    from collector.engine.dbhealth import DatabaseHealth

    now = {"t": 1000.0}
    database = DatabaseHealth(clock=lambda: now["t"])
    metrics = Metrics("normal", "b", "0", bound=75, clock=lambda: now["t"], database=database, database_bound=30)
    assert metrics.readiness() == (True, "ok: database answering")
    database.record("claim", 0.5, DuplicateKeyError("dup"))  # a refused document: the database answered
    metrics.on_database("claim", 0.5, DuplicateKeyError("dup"))
    assert database.up and metrics.readiness()[0]
    database.record("claim", 1.0, AutoReconnect("connection refused"))
    metrics.on_database("claim", 1.0, AutoReconnect("connection refused"))
    now["t"] += 20
    assert metrics.readiness()[0] and "within the bound" in metrics.readiness()[1]
    now["t"] += 15
    ready, reason = metrics.readiness()
    assert not ready and reason.startswith("database not answering for 35s (bound 30s): unreachable since")
    got = samples(generate_latest(metrics.registry).decode())
    assert (
        got[("collector_database_up", ())] == 0
        and got[("collector_database_errors_total", (("operation", "claim"),))] == 2
    )
    metrics.on_settings(settings, settings.with_(heartbeat_seconds=20, http_timeout=10))
    assert (metrics.bound, metrics.database_bound) == (70, 40) and metrics.readiness()[0]
    database.record("beat", 0.01, None)
    metrics.stopping = True
    assert metrics.readiness() == (False, "stopping: finishing the networks in flight")


def test_a_failed_claim_round_is_no_progress_and_leaves_no_frozen_gauge(db, settings):
    from pymongo.errors import ServerSelectionTimeoutError

    now = {"t": 1000.0}
    collector = Collector(db, settings)
    metrics = Metrics("normal", "b", "0", bound=75, clock=lambda: now["t"], database=collector.database)
    collector.observers.add(metrics)
    metrics.sample(12, 0)
    metrics.on_lag("normal", 40)

    def down(*args, **kwargs):
        raise ServerSelectionTimeoutError("db:27017: [Errno 111] Connection refused")

    collector.store.networks.find = down  # the claim's first read
    now["t"] += 100
    stop = iter([False, True])
    collector.serve("normal", should_stop=lambda: next(stop, True), wait=lambda s: None)
    got = samples(generate_latest(metrics.registry).decode())
    assert got[("collector_last_progress_timestamp_seconds", ())] == 1000  # a round that only failed
    assert got[("collector_database_up", ())] == 0
    assert (
        got[("collector_networks_due", (("mode", "normal"),))] != got[("collector_networks_due", (("mode", "normal"),))]
    )
    assert (
        got[("collector_schedule_lag_seconds", (("mode", "normal"),))]
        != got[("collector_schedule_lag_seconds", (("mode", "normal"),))]
    )
    assert collector.database.describe().startswith("unreachable since")
    collector.close()


@pytest.mark.system
def test_the_demo_serves_every_series_the_dashboard_reads_and_promtool_accepts_the_scrape(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    from proc import free_port, scrape, wait_until

    port = free_port()
    demo = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from collector.cli import main; sys.exit(main())",
            "demo",
            "--metrics-port",
            str(port),
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        dashboard = json.loads((ROOT / "contrib/grafana/collector.json").read_text())
        wanted = set().union(*(named_in(t["expr"]) for p in dashboard["panels"] for t in p["targets"]))

        def all_served():
            names = {name for name, _ in scrape(port)}
            return names if {n for n in wanted if not n.endswith("_bucket")} <= names else None

        names = wait_until(all_served, timeout=90)
        text = get(port, "/metrics")[1]
    finally:
        demo.terminate()
        demo.wait(60)
    assert {n for n in wanted if n.endswith("_bucket")} <= names
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("REQUIRE_PROMTOOL"):
            raise AssertionError("promtool is required here (Debian's prometheus package)")
        return
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_promtool_checks_the_rules_and_proves_each_alert(tmp_path):
    import os
    import shutil
    import subprocess

    import pytest

    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("REQUIRE_PROMTOOL"):
            raise AssertionError("promtool is required here (Debian's prometheus package)")
        pytest.skip("promtool not installed (apt-get install prometheus); .ci/run installs it and requires it")
    rules = ROOT / "contrib/prometheus"
    check = subprocess.run([promtool, "check", "rules", "alerts.yml"], cwd=rules, capture_output=True, text=True)
    assert check.returncode == 0 and "SUCCESS: 11 rules found" in check.stdout, check.stdout + check.stderr
    proof = subprocess.run([promtool, "test", "rules", "alerts.test.yml"], cwd=rules, capture_output=True, text=True)
    assert proof.returncode == 0, proof.stdout + proof.stderr
    tested = {
        t["alertname"]
        for test in yaml.safe_load((rules / "alerts.test.yml").read_text())["tests"]
        for t in test["alert_rule_test"]
    }
    alerts = {r["alert"] for g in yaml.safe_load((rules / "alerts.yml").read_text())["groups"] for r in g["rules"]}
    assert (
        tested == alerts
        and {"CollectorAbsent", "CollectorDatabaseDown", "CollectorHeartbeatStale", "CollectorBacklogGrowing"} <= alerts
    )


@pytest.mark.system
def test_the_metrics_server_bounds_its_connections_and_closes_silent_ones(monkeypatch):
    import threading

    from collector.daemon import metrics as module

    monkeypatch.setattr(module._Quiet, "timeout", 0.5)
    server = MetricsServer(Metrics("normal", "b", "0", bound=60), "127.0.0.1", 0)
    threads_before = threading.active_count()
    silent = []
    try:
        for _ in range(120):  # connections that never say a word
            silent.append(socket.create_connection(("127.0.0.1", server.port)))
        time.sleep(0.3)
        assert threading.active_count() - threads_before <= module.MAX_CONNECTIONS
        deadline = time.monotonic() + 30
        while get_or_none(server.port) is None:  # the silent ones time out and free their slots
            assert time.monotonic() < deadline, "the server never served again"
            time.sleep(0.2)
        assert threading.active_count() - threads_before <= module.MAX_CONNECTIONS
    finally:
        for sock in silent:
            sock.close()
        server.close()


def get_or_none(port: int):
    try:
        return get(port, "/healthz")
    except OSError:
        return None
