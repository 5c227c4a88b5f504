"""Prometheus /metrics and /healthz over a real loopback socket; the shipped alerts and dashboard name only
metrics the collector serves."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import socket
import threading
from pathlib import Path

import pytest
import yaml
from prometheus_client import Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collector.daemon import Daemon
from collector.daemon.httpserver import HEAD_LIMIT
from collector.daemon.metrics import Metrics, MetricsServer, progress_bound
from collector.devtools.fakeapi import make_stars
from collector.engine import Collector

from helpers import T0, TOKEN, GitHubStub, add_network, free_port
from helpers.proc import get, wait_until

ROOT = Path(__file__).resolve().parents[2]


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.system
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


@pytest.mark.system
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


@pytest.mark.system
def test_the_daemon_serves_metrics_while_it_runs_and_stops_serving_on_exit(db, settings):
    port = free_port()
    collector = Collector(db, settings.with_(metrics_port=port, heartbeat_seconds=0.05), instance_id="box-7")
    daemon = Daemon(collector, "normal")
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        wait_until(lambda: daemon.metrics_server is not None, timeout=120)
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
    """Every sample name the collector's registry, or the sink service's, can expose, labelled families included
    before first use."""
    from collector.daemon.sinkmetrics import SinkMetrics

    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}
    registries = (Metrics("normal", "x", "0", bound=60).registry, SinkMetrics(["s"], "0", "x", bound=60).registry)
    return {
        family.name + suffix
        for registry in registries
        for family in registry.collect()
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
    assert {"CollectorSinkLagging", "CollectorSinkStopped"} <= alerts
    dashboard = json.loads((ROOT / "contrib/grafana/collector.json").read_text())
    exprs += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    named = set().union(*(named_in(e) for e in exprs))
    assert len(named) >= 12
    assert named <= served, named - served


@pytest.mark.system
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
    assert len(memory) == 2 and memory.blocked(T0) == 2  # t2 has quota left: not kept
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
    metrics = Metrics("normal", "b", "0", bound=75, clock=lambda: now["t"], database=collector.health)
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
    assert collector.health.describe().startswith("unreachable since")
    collector.close()


@pytest.mark.system
def test_the_demo_serves_every_series_the_dashboard_reads_and_promtool_accepts_the_scrape(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    from helpers import free_port
    from helpers.proc import scrape, wait_until

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


@pytest.mark.system
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
    assert check.returncode == 0 and "SUCCESS: 13 rules found" in check.stdout, check.stdout + check.stderr
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


SAID = {  # what an idle client sent before it stalled
    "nothing": b"",
    "half a request line": b"GET /metr",
    "a partial header block": b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n",
}


def stalled_clients(port: int, count: int, said: bytes) -> list[socket.socket]:
    clients = []
    for _ in range(count):
        clients.append(socket.create_connection(("127.0.0.1", port)))
        if said:
            clients[-1].sendall(said)
    return clients


def still_open(sock: socket.socket) -> bool:
    """The server has neither closed this connection nor sent anything on it."""
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
    return False


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def exchange(port: int, request: bytes, host: str = "127.0.0.1") -> tuple[str, dict[str, str], bytes]:
    """One raw request; the answer read to the end of the stream (the server closes after each answer)."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}, body


def fixed_metrics() -> Metrics:
    return Metrics("normal", "box-4", "9.9", bound=60, clock=lambda: 1000.0)


HEALTHY = (200, "ok: loop alive, last progress 0s ago\n")


@pytest.mark.system
@pytest.mark.parametrize("said", list(SAID))
@pytest.mark.parametrize("count", [20, 200, "the budget", "past the budget"])
def test_stalled_clients_delay_neither_a_health_check_nor_a_scrape(count, said):
    server = MetricsServer(fixed_metrics(), "127.0.0.1", 0, timeout=600)  # here no connection lives out its time
    n = {"the budget": server.limit, "past the budget": server.limit + 50}.get(count, count)
    threads = threading.active_count()
    clients: list[socket.socket] = []
    try:
        clients = stalled_clients(server.port, n, SAID[said])
        wait_until(lambda: server.accepted == n, every=0.005)
        assert threading.active_count() <= threads  # no thread per connection
        assert get(server.port, "/healthz", timeout=5) == HEALTHY
        status, text = get(server.port, "/metrics", timeout=5)
        assert status == 200 and 'collector_info{instance_id="box-4"' in text
        # answered while the stalled ones still hold their connections: the answers waited for none of them;
        # each request took a place, and a full port closed its oldest connection for it
        held = min(n, server.limit - 1)
        assert [still_open(c) for c in clients[n - held :]] == [True] * held
        assert all(closed_by_server(c) for c in clients[: n - held])
        assert dict(server.closed) == ({"evicted": n - held} if n > held else {})
        assert threading.active_count() <= threads
    finally:
        for sock in clients:
            sock.close()
        server.close()


@pytest.mark.system
@pytest.mark.parametrize("budget", [1, 3, 16])
def test_a_full_port_closes_its_oldest_connection_for_each_new_one(budget):
    server = MetricsServer(fixed_metrics(), "127.0.0.1", 0, max_connections=budget, timeout=600)
    clients: list[socket.socket] = []
    try:
        clients = stalled_clients(server.port, budget + 2, b"GET /he")
        wait_until(lambda: server.accepted == budget + 2, every=0.005)
        assert all(closed_by_server(c) for c in clients[:2]) and all(still_open(c) for c in clients[2:])
        assert get(server.port, "/healthz", timeout=5) == HEALTHY
        assert closed_by_server(clients[2]) and all(still_open(c) for c in clients[3:])
        assert server.closed == {"evicted": 3}
    finally:
        for sock in clients:
            sock.close()
        server.close()


@pytest.mark.system
def test_clients_that_do_not_read_their_answers_hold_up_no_one_and_get_them_whole_when_they_read():
    metrics = fixed_metrics()
    padding = Gauge("padding", "bulk, so that /metrics outgrows the socket buffers", ["n"], registry=metrics.registry)
    for i in range(8_000):
        padding.labels(f"{i:08d}").set(i)
    server = MetricsServer(metrics, "127.0.0.1", 0, timeout=600)
    readers: list[socket.socket] = []
    try:
        for _ in range(3):
            before = server.unsent
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            readers.append(sock)
            wait_until(
                lambda before=before: server.unsent > before, every=0.005
            )  # its answer waits on a reader that does not read
        assert get(server.port, "/healthz", timeout=5) == HEALTHY
        status, text = get(server.port, "/metrics", timeout=30)
        assert status == 200 and 'padding{n="00007999"} 7999.0' in text
        for sock in readers:  # nothing lost: each answer arrives whole once its reader reads
            sock.settimeout(30)
            data = b""
            while chunk := sock.recv(1 << 20):
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK\r\n") and f"Content-Length: {len(body)}".encode() in head
            assert body.endswith(b'padding{n="00007999"} 7999.0\n')
        assert server.unsent == 0 and not server.closed
    finally:
        for sock in readers:
            sock.close()
        server.close()


@pytest.mark.system
@pytest.mark.parametrize(
    "size, ended, status",
    [
        (200, True, "200 OK"),
        (HEAD_LIMIT, True, "200 OK"),
        (HEAD_LIMIT + 1, True, "431 Request Header Fields Too Large"),
        (HEAD_LIMIT + 1, False, "431 Request Header Fields Too Large"),
        (4 * HEAD_LIMIT, False, "431 Request Header Fields Too Large"),
    ],
)
def test_a_request_head_is_bounded(size, ended, status):
    server = MetricsServer(fixed_metrics(), "127.0.0.1", 0)
    try:
        start, end = b"GET /healthz HTTP/1.1\r\nX-Pad: ", b"\r\n\r\n" if ended else b""
        request = start + b"a" * (size - len(start) - len(end)) + end
        assert len(request) == size
        got, headers, body = exchange(server.port, request)
        assert got == "HTTP/1.1 " + status and headers["connection"] == "close"
        assert body == (HEALTHY[1].encode() if status == "200 OK" else b"request head over 8192 bytes\n")
        assert server.closed == ({} if status == "200 OK" else {"refused": 1})
    finally:
        server.close()


@pytest.mark.system
def test_the_answers_to_every_kind_of_request(caplog):
    server = MetricsServer(fixed_metrics(), "127.0.0.1", 0)
    port = server.port
    try:
        status, headers, body = exchange(port, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, headers["content-length"], body) == ("HTTP/1.1 200 OK", "37", b"")
        status, headers, body = exchange(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert status == "HTTP/1.1 200 OK" and int(headers["content-length"]) > 1000 and body == b""
        status, headers, body = exchange(port, b"GET /metrics?name[]=collector_inflight HTTP/1.1\r\n\r\n")
        assert body == b"# HELP collector_inflight networks running now\n# TYPE collector_inflight gauge\n" + (
            b"collector_inflight 0.0\n"
        )
        status, headers, body = exchange(port, b"GET /metrics HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
        assert headers["content-encoding"] == "gzip" and b"collector_info{" in gzip.decompress(body)
        assert exchange(port, b"GET /readyz HTTP/1.0\n\n")[2] == b"ok: database answering\n"  # bare LF ends lines
        # any other path is the exposition, as prometheus_client has it
        assert b"collector_info{" in exchange(port, b"GET /elsewhere HTTP/1.1\r\n\r\n")[2]
        for bad in (b"garbage\r\n\r\n", b"GET /healthz\r\n\r\n", b"GET healthz HTTP/1.1\r\n\r\n"):
            assert exchange(port, bad)[0] == "HTTP/1.1 400 Bad Request"
        assert exchange(port, b"GET /healthz HTTP/1.1\r\nNo colon\r\n\r\n")[0] == "HTTP/1.1 400 Bad Request"
    finally:
        server.close()
    assert cut_short(caplog, r"refused \(malformed, or a head over 8192 bytes\)") == 4


def cut_short(caplog, what: str) -> int:
    """How many connections the server's lines say were cut short: no line per connection, one at once and the
    rest summed up at most a minute later (here: when the server stops)."""
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("metrics:")]
    counts = [re.fullmatch(r"metrics: connections cut short: (\d+) " + what, line) for line in lines]
    assert 1 <= len(lines) <= 2 and all(counts), lines
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.getMessage().startswith("metrics:"))
    return sum(int(m[1]) for m in counts if m)


@pytest.mark.system
def test_connections_that_outlive_their_time_are_closed_and_summed_up_in_one_line(caplog):
    server = MetricsServer(fixed_metrics(), "127.0.0.1", 0, timeout=0.2)
    clients: list[socket.socket] = []
    try:
        clients = stalled_clients(server.port, 1, b"") + stalled_clients(server.port, 1, b"GET /healthz HTTP/1.1\r\n")
        assert all(closed_by_server(c) for c in clients)
        assert server.closed == {"timeout": 2}
        assert get(server.port, "/healthz", timeout=5) == HEALTHY
    finally:
        for sock in clients:
            sock.close()
        server.close()
    assert cut_short(caplog, r"not done within 0.2s") == 2


@pytest.mark.system
def test_close_ends_every_connection_and_frees_the_port():
    threads = threading.active_count()
    server = MetricsServer(fixed_metrics(), "127.0.0.1", 0, timeout=600)
    clients = stalled_clients(server.port, 5, b"GET / HTTP/1.1\r\n")
    try:
        wait_until(lambda: server.accepted == 5, every=0.005)
        server.close()
        assert all(closed_by_server(c) for c in clients)
        assert not server.thread.is_alive() and threading.active_count() <= threads
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", server.port)) != 0
        server.close()  # a second close is harmless
    finally:
        for sock in clients:
            sock.close()


@pytest.mark.system
def test_an_ipv6_address_is_served():
    try:
        server = MetricsServer(fixed_metrics(), "::1", 0)
    except OSError as exc:
        if os.environ.get("REQUIRE_IPV6"):
            raise AssertionError(f"an IPv6 loopback is required here ({exc})") from exc
        pytest.skip(f"no IPv6 loopback here ({exc}); .ci/run requires one")
    try:
        status, _, body = exchange(server.port, b"GET /healthz HTTP/1.1\r\n\r\n", host="::1")
        assert (status, body) == ("HTTP/1.1 200 OK", HEALTHY[1].encode())
    finally:
        server.close()


STARVED = """
import json, resource, sys
from collector.daemon.metrics import Metrics, MetricsServer
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
metrics = Metrics("normal", "b", "0", bound=60, clock=lambda: 1000.0)
server = MetricsServer(metrics, "127.0.0.1", 0, max_connections=1000, timeout=600)
print(server.port, flush=True)
sys.stdin.readline()
server.close()
print(json.dumps(server.closed), flush=True)
"""


@pytest.mark.system
def test_a_process_out_of_descriptors_closes_its_oldest_connections_and_still_answers():
    import subprocess
    import sys

    server = subprocess.Popen(
        [sys.executable, "-c", STARVED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    clients: list[socket.socket] = []
    try:
        assert server.stdout is not None and server.stdin is not None
        port = int(server.stdout.readline())
        clients = stalled_clients(port, 200, b"")  # more than the 64 descriptors the server's process may hold
        assert get(port, "/healthz", timeout=5) == HEALTHY
        held = [still_open(c) for c in clients]
        assert 0 < held.count(True) < 64 and held == sorted(held)  # the oldest were closed, the newest kept
        server.stdin.write("stop\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline()) == {"starved": held.count(False)}
        assert server.wait(30) == 0
        assert "closed to free a file descriptor (the process had none left)" in server.stderr.read()
    finally:
        for sock in clients:
            sock.close()
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.mark.system
@pytest.mark.parametrize(
    "broken",
    ["never starts its answer", "raises", "a header that is not Latin-1", "a status that is no status"],
)
def test_a_failure_answering_one_connection_ends_that_connection_alone(broken, caplog):
    """Whatever goes wrong making one answer, that connection is closed and the server answers the next one."""
    from collector.daemon.httpserver import HttpServer

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/ok":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"fine\n"]
        if broken == "raises":
            raise RuntimeError("app bug")
        if broken == "a header that is not Latin-1":
            start_response("200 OK", [("X-Name", "\u2603 snowman")])
        elif broken == "a status that is no status":
            start_response(None, [])
        return [b"body"]

    server = HttpServer(app, "127.0.0.1", 0)
    try:
        for _ in range(3):
            try:
                exchange(server.port, b"GET /broken HTTP/1.1\r\n\r\n")
            except (ConnectionError, ValueError, OSError):
                pass  # an answer cut off is what a broken app may give; the server must live on
            status, _, body = exchange(server.port, b"GET /ok HTTP/1.1\r\n\r\n")
            assert (status, body) == ("HTTP/1.1 200 OK", b"fine\n")
        assert server.thread.is_alive()
    finally:
        server.close()


@pytest.mark.system
@pytest.mark.parametrize("query", ["u=http://evil.example/x", "next=https://a/b/c", "x=://"])
def test_a_url_in_the_query_leaves_the_path_as_it_is(query):
    server = MetricsServer(fixed_metrics(), "127.0.0.1", 0)
    try:
        status, _, body = exchange(server.port, f"GET /healthz?{query} HTTP/1.1\r\n\r\n".encode())
    finally:
        server.close()
    assert status == "HTTP/1.1 200 OK" and body.startswith(b"ok")
