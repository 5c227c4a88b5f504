"""Every metric the collector exports, declared once: its name, help text, labels and buckets, in the order of the
exposition. `declare` registers them on a registry (with the process and platform collectors and the `collector`
info) and hands them back as an `Instruments`; `daemon/metrics.py`'s observer updates them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, PlatformCollector

from .procmetrics import SandboxProcessCollector

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
BATCH_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
DATABASE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


@dataclass(frozen=True)
class Declared:
    """One metric: what it is called and says, its label names, and a histogram's buckets."""

    kind: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()  # a histogram's (each histogram here names its own)

    def register(self, registry: CollectorRegistry) -> Any:
        if self.kind is Histogram:
            return Histogram(self.name, self.help, self.labels, registry=registry, buckets=self.buckets)
        return self.kind(self.name, self.help, self.labels, registry=registry)


DECLARED: dict[str, Declared] = {  # attribute of Instruments -> the metric
    "runs": Declared(Counter, "collector_runs", "network runs, by outcome", ("service", "status")),
    "items": Declared(Counter, "collector_items", "new items saved", ("service",)),
    "requests": Declared(
        Counter, "collector_api_requests", "API requests, by HTTP status (error: no response)", ("service", "code")
    ),
    "quota_skips": Declared(
        Counter, "collector_quota_skips", "runs skipped because the token's quota was known spent", ("service",)
    ),
    "disabled": Declared(
        Counter, "collector_networks_disabled", "networks disabled (too many failures, or retired)", ("service",)
    ),
    "duration": Declared(
        Histogram, "collector_run_duration_seconds", "time one network run took", ("service",), DURATION_BUCKETS
    ),
    "batch": Declared(Histogram, "collector_claim_batch_size", "networks leased by one claim", (), BATCH_BUCKETS),
    "lag": Declared(
        Gauge, "collector_schedule_lag_seconds", "how overdue the most overdue network was at the last claim", ("mode",)
    ),
    "inflight": Declared(Gauge, "collector_inflight", "networks running now"),
    "leases": Declared(Gauge, "collector_leases_held", "networks this collector holds leases on"),
    "due": Declared(
        Gauge,
        "collector_networks_due",
        "networks of this mode due and not leased (the backlog), sampled by the gauges job",
        ("mode",),
    ),
    "quota_tokens": Declared(
        Gauge,
        "collector_quota_memory_tokens",
        "tokens this collector knows to be blocked now (sampled by the gauges job)",
    ),
    "jobs": Declared(
        Counter,
        "collector_jobs",
        "runs of the collector's own recurring jobs, by outcome (ok, error, missed, skipped); the label is "
        "`name`, since `job` is Prometheus's scrape job",
        ("name", "outcome"),
    ),
    "job_success": Declared(
        Gauge,
        "collector_job_last_success_timestamp_seconds",
        "when each recurring job last ran without error (Unix time)",
        ("name",),
    ),
    "last_progress": Declared(
        Gauge,
        "collector_last_progress_timestamp_seconds",
        "when the dispatch loop last did work: a claim the database answered, a saved run, an idle wait after "
        "the database said nothing is due (Unix time)",
    ),
    "database_up": Declared(
        Gauge, "collector_database_up", "1 while MongoDB answers this collector, 0 while it cannot be reached"
    ),
    "database_errors": Declared(
        Counter, "collector_database_errors", "database operations that raised an error, by operation", ("operation",)
    ),
    "database_seconds": Declared(
        Histogram,
        "collector_database_seconds",
        "time one database operation took, by operation",
        ("operation",),
        DATABASE_BUCKETS,
    ),
    "paused": Declared(
        Gauge,
        "collector_paused",
        "1 while an operator's pause holds this collector's mode (service * = the whole mode) back from claims",
        ("mode", "service"),
    ),
}


@dataclass(frozen=True)
class Instruments:
    """The registered metrics, one attribute each, named as in DECLARED (a name in one and not the other fails
    `declare`)."""

    runs: Counter
    items: Counter
    requests: Counter
    quota_skips: Counter
    disabled: Counter
    duration: Histogram
    batch: Histogram
    lag: Gauge
    inflight: Gauge
    leases: Gauge
    due: Gauge
    quota_tokens: Gauge
    jobs: Counter
    job_success: Gauge
    last_progress: Gauge
    database_up: Gauge
    database_errors: Counter
    database_seconds: Histogram
    paused: Gauge


def declare(registry: CollectorRegistry, version: str, mode: str, instance: str) -> Instruments:
    """Register every metric on `registry`: the process and platform collectors, the `collector` info, then
    DECLARED in its order."""
    SandboxProcessCollector(registry=registry)  # process_* under the unit's ProcSubset=pid too
    PlatformCollector(registry=registry)
    # `instance` and `job` belong to Prometheus (the scrape target): this collector's own name is instance_id
    Info("collector", "this collector", registry=registry).info(
        {"version": version, "mode": mode, "instance_id": instance}
    )
    return Instruments(**{attr: declared.register(registry) for attr, declared in DECLARED.items()})
