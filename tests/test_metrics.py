"""Prometheus /metrics and /healthz over a real loopback socket; the shipped alerts and dashboard name only
metrics the collector serves."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from collector.daemon import Daemon
from collector.devtools.fakeapi import make_stars
from collector.engine import Collector
from collector.metrics import Metrics, MetricsServer, progress_bound

from helpers import T0, TOKEN, GitHubStub, add_network

ROOT = Path(__file__).resolve().parent.parent


def get(port: int, path: str) -> tuple[int, str]:
    """urllib, not requests: the `responses` mock intercepts requests' adapters, not the socket."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


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
