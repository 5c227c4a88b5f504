"""The sink service's Prometheus metrics, /healthz and /readyz (`collector sink --metrics-port`), served by the
daemon's HttpServer.

Label values are bounded: `sink` is a name from the SINKS setting (a reload adds and removes them), `kind` one of
FAILURES. Every counter of every configured sink and kind starts at 0, so the first failure is an increase.

They tell the truth when things fail:
- the counters only go up: a database outage or a round that failed changes none of them;
- `collector_sink_backlog`, `collector_sink_lag_seconds` and `collector_sink_outbox_pending` are what the database
  last said, and `collector_sink_stats_timestamp_seconds` says when that was (an outage makes them age, visibly,
  with `collector_sink_database_up` 0);
- `collector_sink_stopped` is 1 for a sink stopped by its destination (refused credentials) until an operator
  resumes it; `collector_sink_lease_held` is 1 only in the process that works, and only while it can confirm it:
  a round MongoDB did not answer makes it 0 at once, and so does the lease's time passing with no round since
  that saw it held (a process cut off or stuck never says 1 beside the one that took the lapsed lease over). A
  process standing by measures nothing: its gauges of each sink are NaN (unknown), which `max by (sink)` over every
  process leaves out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Info, PlatformCollector, make_wsgi_app

from ..lifecycle import health_routes
from .httpserver import HttpServer
from .procmetrics import SandboxProcessCollector

LEASE_SECONDS = 30.0  # the service lease's length (sinks/service.py LEASE_SECONDS), unless told
FAILURES = ("refused", "too_large", "rejected", "auth")  # the `kind` label of collector_sink_failed_total
KIND_ALIASES = {"tooLarge": "too_large", "too_large": "too_large", "refused": "refused", "rejected": "rejected"}
KIND_ALIASES |= {"auth": "auth", "reject": "rejected", "authFailed": "auth"}
NAN = float("nan")


def number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def figure(figures: Any, *names: str) -> Any:
    """A field of one sink's figures, by the first of `names` it has (an object's attribute or a mapping's key)."""
    for name in names:
        value = figures.get(name) if isinstance(figures, Mapping) else getattr(figures, name, None)
        if value is not None:
            return value
    return None


class SinkMetrics:
    """The metrics and health status (lifecycle.HealthStatus) of one `collector sink` process. `bound`: seconds
    without a loop round after which /healthz fails; `clock`: Unix time; `lease_seconds`: the service lease's
    length (sinks/service.py)."""

    def __init__(
        self,
        sinks: Iterable[str],
        version: str,
        instance: str,
        bound: float,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = LEASE_SECONDS,
    ):
        self.bound, self.clock = bound, clock
        # a round that saw the lease held: it was renewed a sixth of its length ago at most (the service renews it
        # then), so it surely lasts five sixths of its length from that round
        self.lease_confirmed = lease_seconds * 5 / 6
        self.lease_until: float | None = None  # (clock) until when this process surely holds the lease
        self.registry = CollectorRegistry()
        SandboxProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        Info("collector_sink", "this sink service", registry=self.registry).info(
            {"version": version, "instance_id": instance}
        )
        self.declare(self.registry)
        self.sinks: tuple[str, ...] = ()
        self.seen: dict[tuple[str, str], float] = {}  # the cumulative figures already counted
        self.stopping = False
        self.up = True
        self.alive = self.clock()
        self.database_up.set(1)
        self.outbox.set(NAN)
        self.configure(sinks)

    def declare(self, r: CollectorRegistry) -> None:
        """The counters and gauges of the sinks, in `r`."""
        self.delivered = Counter(
            "collector_sink_delivered", "documents the destination took (done), by sink", ("sink",), registry=r
        )
        self.failed = Counter(
            "collector_sink_failed",
            "failed deliveries by kind: refused (a batch retried later), too_large (a batch split), rejected (a "
            "document the destination refused), auth (credentials refused: the sink stops)",
            ("sink", "kind"),
            registry=r,
        )
        self.dead_lettered = Counter(
            "collector_sink_dead_lettered", "documents given up after SINK_MAX_TRIES rejections", ("sink",), registry=r
        )
        self.backlog = Gauge(
            "collector_sink_backlog",
            "items queued for the sink, not delivered yet (last measured)",
            ("sink",),
            registry=r,
        )
        self.lag = Gauge(
            "collector_sink_lag_seconds",
            "age of the oldest item queued for the sink, 0 when none waits (last measured)",
            ("sink",),
            registry=r,
        )
        self.stopped = Gauge(
            "collector_sink_stopped",
            "1 while the sink is stopped (its credentials refused) until resumed",
            ("sink",),
            registry=r,
        )
        self.paused = Gauge(
            "collector_sink_paused", "1 while an operator's pause holds the sink", ("sink",), registry=r
        )
        self.outbox = Gauge(
            "collector_sink_outbox_pending", "items stored and not yet queued for the sinks (last measured)", registry=r
        )
        self.lease = Gauge(
            "collector_sink_lease_held",
            "1 while this process holds the service lease (and works), 0 standing by or unable to confirm it",
            registry=r,
        )
        self.lease.set_function(self.lease_held)
        self.measured = Gauge(
            "collector_sink_stats_timestamp_seconds",
            "when backlog, lag and outbox were last read from MongoDB (Unix time)",
            registry=r,
        )
        self.database_up = Gauge(
            "collector_sink_database_up",
            "1 while MongoDB answers the sink service, 0 after a round it failed",
            registry=r,
        )

    def configure(self, sinks: Iterable[str]) -> None:
        """The configured sinks (at the start and after a reload): the new ones' series start at 0 (their gauges
        unknown until measured), the ones no longer configured are removed."""
        names = tuple(sorted(set(sinks)))
        for gone in set(self.sinks) - set(names):
            for metric in (self.delivered, self.dead_lettered, self.backlog, self.lag, self.stopped, self.paused):
                metric.remove(gone)
            for kind in FAILURES:
                self.failed.remove(gone, kind)
            self.seen = {key: n for key, n in self.seen.items() if key[0] != gone}
        for name in set(names) - set(self.sinks):
            self.delivered.labels(name)
            self.dead_lettered.labels(name)
            for kind in FAILURES:
                self.failed.labels(name, kind)
            self.backlog.labels(name).set(NAN)
            self.lag.labels(name).set(NAN)
            self.stopped.labels(name).set(0)
            self.paused.labels(name).set(0)
        self.sinks = names

    def update(
        self, snapshot: Mapping[str, Any], outbox_pending: Any, holds_lease: bool, measured: float | None = None
    ) -> None:
        """After a round the database answered: the service's figures per sink (service.snapshot()); `measured`,
        when the backlog and lag in them were counted (Unix time; default now). A process standing by counts
        nothing: its backlog, lag, outbox, stopped and paused are unknown here (NaN, which `max by (sink)` over
        every process leaves out), the lease holder's are the truth."""
        self.alive = self.clock()
        self.up = True
        self.database_up.set(1)
        self.lease_until = self.alive + self.lease_confirmed if holds_lease else None
        for name, figures in snapshot.items():
            if name in self.sinks:  # a sink no longer configured: no series for it
                self.count_figures(name, figures)
                self.gauges(name, figures if holds_lease else None)
        self.outbox.set(max(number(outbox_pending), 0.0) if holds_lease and outbox_pending is not None else NAN)
        if holds_lease:
            self.measured.set(self.alive if measured is None else measured)

    def count_figures(self, name: str, figures: Any) -> None:
        self.count(self.delivered.labels(name), (name, "delivered"), figure(figures, "delivered", "done"))
        self.count(
            self.dead_lettered.labels(name), (name, "dead_lettered"), figure(figures, "dead_lettered", "deadLettered")
        )
        failed = figure(figures, "failed")
        for kind, n in failed.items() if isinstance(failed, Mapping) else ():
            label = KIND_ALIASES.get(str(kind))
            if label is not None:
                self.count(self.failed.labels(name, label), (name, "failed:" + label), n)

    def gauges(self, name: str, figures: Any) -> None:
        """A sink's gauges from the lease holder's figures; None: unknown in this process (NaN)."""
        if figures is None:
            for gauge in (self.backlog, self.lag, self.stopped, self.paused):
                gauge.labels(name).set(NAN)
            return
        backlog, lag = figure(figures, "backlog"), figure(figures, "lag_seconds", "lagSeconds", "lag")
        if backlog is not None:
            self.backlog.labels(name).set(max(number(backlog), 0.0))
        if lag is not None:
            self.lag.labels(name).set(max(number(lag), 0.0))
        self.stopped.labels(name).set(1 if figure(figures, "stopped") else 0)
        self.paused.labels(name).set(1 if figure(figures, "paused") else 0)

    def count(self, counter: Counter, key: tuple[str, str], total: Any) -> None:
        """A counter follows a cumulative figure: it goes up by what the figure grew since last seen, never down
        (a figure that went down, a service made anew, starts a new baseline)."""
        if total is None:
            return
        value = number(total)
        last = self.seen.get(key, 0.0)
        if value > last:
            counter.inc(value - last)
        self.seen[key] = value

    def round_failed(self, database: bool) -> None:
        """A round that raised: the loop is alive; with `database`, MongoDB did not answer (figures kept; the
        lease cannot be confirmed: another process may take it over)."""
        self.alive = self.clock()
        if database:
            self.up = False
            self.database_up.set(0)
            self.lease_until = None

    def lease_held(self) -> float:
        """collector_sink_lease_held, when scraped: 1 until the time the last round that saw the lease held
        confirms it for."""
        until = self.lease_until
        return 1.0 if until is not None and self.clock() < until else 0.0

    def health(self) -> tuple[bool, str]:
        silent = self.clock() - self.alive
        if silent > self.bound:
            return False, f"loop silent for {silent:.0f}s (bound {self.bound:.0f}s)"
        return True, "ok: loop alive"

    def readiness(self) -> tuple[bool, str]:
        if self.stopping:
            return False, "stopping: finishing the deliveries in flight"
        if not self.up:
            return False, "database not answering (the last round failed on MongoDB)"
        return True, "ok: database answering"


def app(metrics: SinkMetrics) -> Callable[[dict, Callable], Iterable[bytes]]:
    """/healthz and /readyz from the metrics' typed status (the lifecycle's health routing), /metrics beside."""
    return health_routes(metrics, make_wsgi_app(metrics.registry))


class SinkMetricsServer(HttpServer):
    """/metrics, /healthz and /readyz of the sink service on (addr, port)."""

    def __init__(self, metrics: SinkMetrics, addr: str, port: int):
        super().__init__(app(metrics), addr, port)
