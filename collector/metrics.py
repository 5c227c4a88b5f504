"""Prometheus metrics and a health check, served with prometheus_client when METRICS_PORT is set.

`Metrics` is an observer: the engine's hooks update the metrics on the engine's thread; the HTTP server thread
only reads them (prometheus_client's metrics are thread-safe). `/healthz` answers 200 while the dispatch loop
makes progress — a claim, a saved run, an idle wake-up or a loop round within `progress_bound(settings)` — and
503 with a one-line reason otherwise.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    make_wsgi_app,
)

from .observers import Observer, Saved

if TYPE_CHECKING:  # pragma: no cover
    from .run import RunResult
    from .settings import Settings

disable_created_metrics()  # no *_created series: they double the exposition and no dashboard uses them

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
BATCH_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def progress_bound(settings: Settings) -> float:
    """Seconds without progress after which the loop counts as stuck: the loop goes round at least every
    HEARTBEAT_SECONDS, and one database call or one save retry can hold it for about HTTP_TIMEOUT."""
    return 3 * settings.heartbeat_seconds + settings.http_timeout


class Metrics(Observer):
    def __init__(self, mode: str, instance: str, version: str, bound: float, clock: Callable[[], float] = time.time):
        self.mode, self.bound, self.clock = mode, bound, clock
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)  # process_resident_memory_bytes, process_cpu_seconds_total, ...
        PlatformCollector(registry=registry)
        Info("collector", "this collector", registry=registry).info(
            {"version": version, "mode": mode, "instance": instance}
        )
        self.runs = Counter("collector_runs", "network runs, by outcome", ["service", "status"], registry=registry)
        self.items = Counter("collector_items", "new items saved", ["service"], registry=registry)
        self.requests = Counter(
            "collector_api_requests",
            "API requests, by HTTP status (error: no response)",
            ["service", "code"],
            registry=registry,
        )
        self.quota_skips = Counter(
            "collector_quota_skips",
            "runs skipped because the token's quota was known spent",
            ["service"],
            registry=registry,
        )
        self.disabled = Counter(
            "collector_networks_disabled",
            "networks disabled (too many failures, or retired)",
            ["service"],
            registry=registry,
        )
        self.duration = Histogram(
            "collector_run_duration_seconds",
            "time one network run took",
            ["service"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.batch = Histogram(
            "collector_claim_batch_size", "networks leased by one claim", buckets=BATCH_BUCKETS, registry=registry
        )
        self.lag = Gauge(
            "collector_schedule_lag_seconds",
            "how overdue the most overdue network was at the last claim",
            ["mode"],
            registry=registry,
        )
        self.inflight = Gauge("collector_inflight", "networks running now", registry=registry)
        self.leases = Gauge("collector_leases_held", "networks this collector holds leases on", registry=registry)
        self.due = Gauge(
            "collector_networks_due",
            "networks of this mode due and not leased (the backlog), sampled by the gauges job",
            ["mode"],
            registry=registry,
        )
        self.quota_tokens = Gauge(
            "collector_quota_memory_tokens", "tokens this collector knows to be blocked", registry=registry
        )
        self.jobs = Counter(
            "collector_jobs",
            "runs of the collector's own recurring jobs, by outcome (ok, error, missed, skipped); the label is "
            "`name`, since `job` is Prometheus's scrape job",
            ["name", "outcome"],
            registry=registry,
        )
        self.job_success = Gauge(
            "collector_job_last_success_timestamp_seconds",
            "when each recurring job last ran without error (Unix time)",
            ["name"],
            registry=registry,
        )
        self.last_progress = Gauge(
            "collector_last_progress_timestamp_seconds",
            "when the dispatch loop last made progress (Unix time)",
            registry=registry,
        )
        self.progress()

    def progress(self) -> None:
        self.last = self.clock()
        self.last_progress.set(self.last)

    def on_claim(self, mode: str, claimed: int) -> None:
        self.batch.observe(claimed)
        self.progress()

    def on_lag(self, mode: str, seconds: float) -> None:
        self.lag.labels(mode).set(max(seconds, 0.0))

    def on_run(self, result: RunResult, saved: Saved) -> None:
        service = str(result.network.get("service"))[:40]
        status = str(result.status)
        self.runs.labels(service, status).inc()
        self.items.labels(service).inc(saved.new_items)
        for code, n in result.codes:
            self.requests.labels(service, code).inc(n)
        if status == "rateLimit" and not result.called:
            self.quota_skips.labels(service).inc()
        if result.update.values.get("disabled") is True and saved.state_saved and not saved.dropped:
            self.disabled.labels(service).inc()
        if result.called:
            self.duration.labels(service).observe(result.duration)
        self.progress()

    def on_idle(self, mode: str) -> None:
        self.progress()

    def on_tick(self, inflight: int) -> None:
        self.inflight.set(inflight)
        self.progress()

    def on_leases(self, held: int) -> None:
        self.leases.set(held)

    def sample(self, due: int, quota_tokens: int) -> None:
        """The periodic gauges (the `gauges` job)."""
        self.due.labels(self.mode).set(due)
        self.quota_tokens.set(quota_tokens)

    def on_job(self, job: str, outcome: str) -> None:
        """A sink of jobs.Jobs: every run, failure, miss and skip of a recurring job."""
        self.jobs.labels(job, outcome).inc()
        if outcome == "ok":
            self.job_success.labels(job).set(self.clock())

    def health(self) -> tuple[bool, str]:
        silent = self.clock() - self.last
        if silent > self.bound:
            return False, f"no progress for {silent:.0f}s (bound {self.bound:.0f}s)"
        return True, f"ok: last progress {silent:.0f}s ago"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes every 15 s are not news
        pass


def app(metrics: Metrics) -> Callable[[dict, Callable], Iterable[bytes]]:
    exposition = make_wsgi_app(metrics.registry)

    def serve(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            healthy, reason = metrics.health()
            start_response(
                "200 OK" if healthy else "503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")]
            )
            return [reason.encode() + b"\n"]
        return exposition(environ, start_response)

    return serve


class MetricsServer:
    """/metrics and /healthz on (addr, port) in a daemon thread; port 0 picks a free one (see .port)."""

    def __init__(self, metrics: Metrics, addr: str, port: int):
        server_class = _Server6 if ":" in addr else _Server
        self.server = make_server(addr, port, app(metrics), server_class=server_class, handler_class=_Quiet)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
