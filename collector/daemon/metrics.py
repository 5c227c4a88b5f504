"""Prometheus metrics, liveness and readiness, served with prometheus_client when METRICS_PORT is set.

`Metrics` is an observer: the engine's hooks update the metrics on the engine's thread; the HTTP server thread
only reads them (prometheus_client's metrics are thread-safe).

- `/healthz` is liveness: 200 while the dispatch loop goes round (it does at least every HEARTBEAT_SECONDS,
  whatever it is doing), 503 once it has been silent longer than `progress_bound(settings)`.
- `/readyz` is readiness: 503 with the reason while MongoDB has not answered for longer than
  `dbhealth.bound(settings)`, or once a stop was requested; else 200.
- `collector_last_progress_timestamp_seconds` moves only with work: a claim the database answered, a saved run,
  an idle wait after the database said nothing is due. A loop round that only failed is not progress.

Label values come from bounded sets: registered services by name, anything else as `other`; the counters of every
known (service, status), job and database operation start at 0, so `rate()` and `increase()` see the first event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, disable_created_metrics, make_wsgi_app

from ..engine.events import Observer, Saved
from ..engine.run import Status
from ..engine.store import OPERATIONS, unavailable
from ..lifecycle import health_routes
from .httpserver import HttpServer
from .instruments import declare

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.dbhealth import DatabaseHealth
    from ..engine.run import RunResult
    from ..settings import Settings


disable_created_metrics()  # no *_created series: they double the exposition and no dashboard uses them

OTHER = "other"  # the label of every service no connector is registered for
NAN = float("nan")
DESCRIPTORS_RECENT = 60.0  # /readyz answers 503 this long after the process ran out of file descriptors


def progress_bound(settings: Settings) -> float:
    """Seconds without progress after which the loop counts as stuck: the loop goes round at least every
    HEARTBEAT_SECONDS, and one database call or one save retry can hold it for about HTTP_TIMEOUT."""
    return 3 * settings.heartbeat_seconds + settings.http_timeout


class Metrics(Observer):
    """The collector's metrics and its health status (lifecycle.HealthStatus). `bound`: seconds of loop silence
    after which /healthz fails; `database`: the health /readyz reports; `services` and `jobs`: the label values
    whose counters start at 0."""

    def __init__(
        self,
        mode: str,
        instance: str,
        version: str,
        bound: float,
        clock: Callable[[], float] = time.time,
        services: Iterable[str] = (),
        database: DatabaseHealth | None = None,
        database_bound: float = 30.0,
        jobs: Iterable[str] = (),
        exhausted: Callable[[], float | None] = lambda: None,
    ):
        self.mode, self.bound, self.clock = mode, bound, clock
        self.exhausted = exhausted  # when the process last ran out of file descriptors (Unix time), or None
        self.database, self.database_bound = database, database_bound
        self.services = frozenset(services)
        self.stopping = False
        self.registry = CollectorRegistry()
        self.instruments = declare(self.registry, version, mode, instance)  # the metrics (daemon/instruments.py)
        self.paused_scopes: set[tuple[str, str]] = set()
        self.children: dict[tuple[int, tuple[str, ...]], Any] = {}  # `child`
        self.instruments.database_up.set(1)
        self.zero(jobs)
        self.last = self.alive = self.clock()
        self.instruments.last_progress.set(self.last)

    def on_settings(self, old: Settings, new: Settings) -> None:
        """A reload: the bounds of /healthz and /readyz follow the new settings."""
        from ..engine.dbhealth import bound

        self.bound, self.database_bound = progress_bound(new), bound(new)

    def zero(self, jobs: Iterable[str]) -> None:
        """Counters of every known label value start at 0, so the first event is an increase."""
        for service in sorted(self.services):
            for status in Status:
                self.instruments.runs.labels(service, str(status))
            for counter in (self.instruments.items, self.instruments.quota_skips, self.instruments.disabled):
                counter.labels(service)
        for name in jobs:
            self.add_job(name)
        for operation in OPERATIONS:
            self.instruments.database_errors.labels(operation)
        self.instruments.paused.labels(self.mode, "*").set(0)

    def add_job(self, name: str) -> None:
        for outcome in ("ok", "error", "missed", "skipped"):
            self.instruments.jobs.labels(name, outcome)

    def service(self, network_service: object) -> str:
        """The label of a network's service: its name if a connector is registered for it, else `other`."""
        if isinstance(network_service, str) and (network_service in self.services or not self.services):
            return network_service[:40]
        return OTHER

    def progress(self) -> None:
        self.last = self.clock()
        self.instruments.last_progress.set(self.last)

    def on_claim(self, mode: str, claimed: int) -> None:
        self.instruments.batch.observe(claimed)
        self.progress()

    def on_pauses(self, mode: str, pauses: list) -> None:
        now = {(mode, p.service if p.service in self.services or p.service == "*" else OTHER) for p in pauses}
        for labels in self.paused_scopes - now:
            self.instruments.paused.labels(*labels).set(0)
        for labels in now:
            self.instruments.paused.labels(*labels).set(1)
        self.paused_scopes |= now

    def on_database(self, operation: str, seconds: float, error: BaseException | None) -> None:
        self.instruments.database_seconds.labels(operation).observe(seconds)
        if error is not None:
            self.instruments.database_errors.labels(operation).inc()
        if error is not None and unavailable(error):
            self.instruments.database_up.set(0)
            # what the database last said is no longer known: unknown, not frozen at an old value
            self.instruments.lag.labels(self.mode).set(NAN)
            self.instruments.due.labels(self.mode).set(NAN)
        elif self.database is None or self.database.up:
            self.instruments.database_up.set(1)

    def on_lag(self, mode: str, seconds: float) -> None:
        self.instruments.lag.labels(mode).set(max(seconds, 0.0))

    def on_run(self, result: RunResult, saved: Saved) -> None:
        service = self.service(result.network.get("service"))
        status = str(result.status)
        instruments, child = self.instruments, self.child
        child(instruments.runs, service, status).inc()
        child(instruments.items, service).inc(saved.new_items)
        for code, n in result.codes:
            child(instruments.requests, service, code).inc(n)
        if status == "rateLimit" and not result.called:
            instruments.quota_skips.labels(service).inc()
        if result.update.values.get("disabled") is True and saved.state_saved and not saved.dropped:
            instruments.disabled.labels(service).inc()
        if result.called:
            child(instruments.duration, service).observe(result.duration)
        if not saved.dropped:
            self.progress()

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered for the run's own series (every run looks them up again; no series
        of theirs is ever removed, and their labels are bounded: services, statuses, HTTP status codes)."""
        key = (id(metric), labels)
        found = self.children.get(key)
        if found is None:
            found = self.children[key] = metric.labels(*labels)
        return found

    def on_idle(self, mode: str) -> None:
        self.progress()  # the engine says idle only after the database answered "nothing due"

    def on_tick(self, inflight: int) -> None:
        self.instruments.inflight.set(inflight)
        self.alive = self.clock()  # liveness: the loop goes round

    def on_leases(self, held: int) -> None:
        self.instruments.leases.set(held)

    def sample(self, due: int, quota_tokens: int) -> None:
        """The periodic gauges (the `gauges` job)."""
        self.instruments.due.labels(self.mode).set(due)
        self.instruments.quota_tokens.set(quota_tokens)

    def on_job(self, job: str, outcome: str) -> None:
        """A sink of jobs.Jobs: every run, failure, miss and skip of a recurring job."""
        self.instruments.jobs.labels(job, outcome).inc()
        if outcome == "ok":
            self.instruments.job_success.labels(job).set(self.clock())

    def health(self) -> tuple[bool, str]:
        """Liveness: the loop went round within the bound. The body also says how work and the database go."""
        now = self.clock()
        silent = now - self.alive
        if silent > self.bound:
            return False, f"loop silent for {silent:.0f}s (bound {self.bound:.0f}s)"
        text = f"ok: loop alive, last progress {now - self.last:.0f}s ago"
        if self.database is not None and not self.database.up:
            text += f"; database {self.database.describe()} (see /readyz)"
        return True, text

    def readiness(self) -> tuple[bool, str]:
        """Readiness: MongoDB answered within `database_bound`, and no stop was requested."""
        if self.stopping:
            return False, "stopping: finishing the networks in flight"
        exhausted = self.exhausted()
        if exhausted is not None and self.clock() - exhausted < DESCRIPTORS_RECENT:
            return False, f"out of file descriptors {self.clock() - exhausted:.0f}s ago (runs put back, none charged)"
        if self.database is not None:
            silent = self.database.silent_for()
            if silent > self.database_bound:
                return False, (
                    f"database not answering for {silent:.0f}s (bound {self.database_bound:.0f}s): "
                    f"{self.database.describe()}"
                )
            if not self.database.up:
                return True, f"ok: database {self.database.describe()}, {silent:.0f}s within the bound"
        return True, "ok: database answering"


def app(metrics: Metrics) -> Callable[[dict, Callable], Iterable[bytes]]:
    """/healthz and /readyz from the metrics' typed status (the lifecycle's health routing), /metrics beside."""
    return health_routes(metrics, make_wsgi_app(metrics.registry))


class MetricsServer(HttpServer):
    """/metrics, /healthz and /readyz on (addr, port): `app(metrics)` served by an HttpServer (daemon/httpserver.py)."""

    def __init__(
        self, metrics: Metrics, addr: str, port: int, max_connections: int | None = None, timeout: float | None = None
    ):
        super().__init__(app(metrics), addr, port, max_connections, timeout)
