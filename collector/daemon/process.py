"""The long-running process for one mode: the continuous dispatch loop (engine.Collector.serve), the recurring
jobs beside it (jobs.py: heartbeat, stats, housekeeping, gauges, the inactive sweep), --once; its signals, reload
and notify through the one process lifecycle (collector/lifecycle.py).

First SIGTERM/SIGINT: the jobs stop, networks in flight finish (their requests are cut after HTTP_TIMEOUT at
most) and are saved, claimed networks not started are given back, then the loop exits 0.
A second signal exits at once. With once=True: one pass, no jobs, exit 1 if that pass failed as a whole.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pymongo.errors import PyMongoError

from ..engine import Collector
from ..engine.events import Observer
from ..engine.sizing import seats
from ..engine.store import IndexRefused
from ..exitcodes import EXIT_DATABASE, EXIT_NO, EXIT_OK, EXIT_USAGE
from ..lifecycle import Lifecycle, Notifier, StartupSignals, StopDuringStartup, gc_spaced, restored_signals
from ..sdk.timeutil import utcnow
from ..settings import Settings, SettingsError, load_settings
from .systemd import Watchdog

if TYPE_CHECKING:  # pragma: no cover
    from .heartbeat import Heartbeat
    from .jobs import Jobs
    from .metrics import Metrics, MetricsServer

log = logging.getLogger("collector.daemon")
HOUSEKEEPING_SECONDS = 60.0
GAUGES_SECONDS = 30.0


class Daemon:
    """One collector's process: its loop, its jobs and its lifecycle (collector/lifecycle.py: signals, reload,
    notify). It gives the lifecycle's reload its settings, and /healthz and /readyz their status (Metrics)."""

    def __init__(self, collector: Collector, mode: str):
        self.collector = collector
        self.mode = mode
        # an idle loop looks again at once when woken: a stop, a reload, or a job waiting for it
        self.lifecycle = Lifecycle(on_stop=self.on_stop)
        self.metrics_server: MetricsServer | None = None
        self.metrics: Metrics | None = None
        self.jobs: Jobs | None = None
        self.heartbeat: Heartbeat | None = None
        self.load_settings: Callable[[], Settings] = load_settings
        self.configure_logging: Callable[[str, str], None] | None = None  # the CLI's: level and format
        self.on_idle: Callable[[], object] | None = None  # called before each idle wait (the demo stars something)
        self.before_exit: Callable[[], object] | None = None  # called after the loop, before the heartbeat goes

    # --- the lifecycle's parts, by their old names -----------------------------------------------------------------
    @property
    def stopping(self) -> threading.Event:
        return self.lifecycle.stopping

    @property
    def wakeup(self) -> threading.Event:
        return self.lifecycle.wakeup

    @property
    def notifier(self) -> Notifier:
        return self.lifecycle.notifier

    @property
    def reload_wanted(self) -> bool:
        return self.lifecycle.reload_wanted

    @reload_wanted.setter
    def reload_wanted(self, wanted: bool) -> None:
        self.lifecycle.reload_wanted = wanted

    def install_signal_handlers(self) -> dict[int, Any]:
        """The lifecycle's handlers; returns the ones found (the caller may give them back)."""
        return self.lifecycle.install()

    def on_signal(self, signum: int, frame: object = None) -> None:
        self.lifecycle.on_signal(signum, frame)

    def on_stop(self, signum: int) -> None:
        """The first SIGTERM or SIGINT: said, /readyz 503 from now on, requests still running after one deadline
        cut and no new one started (the stop is bounded)."""
        log.info(
            "%s received: finishing the networks in flight (at most %gs), then exiting",
            signal.Signals(signum).name,
            self.collector.settings.http_timeout,
        )
        if self.metrics is not None:
            self.metrics.stopping = True
        self.collector.cut_requests_after(self.collector.settings.http_timeout)

    # --- reload (lifecycle.Reloading) --------------------------------------------------------------------------------
    def reload(self) -> list[str]:
        """Read the settings again and apply what may change while running (lifecycle.reload); the engine first,
        then everyone who follows settings (observers). Returns the names applied."""
        return self.lifecycle.reload(self)

    @property
    def settings(self) -> Settings:
        return self.collector.settings

    def read_settings(self) -> Settings:
        return self.load_settings()

    def check_settings(self, new: Settings) -> None:
        """Nothing more than reading them checks: every collector setting is checked as it is read."""

    def apply_settings(self, merged: Settings) -> None:
        self.collector.apply_settings(merged)

    def refusal(self, exc: SettingsError) -> tuple[int, str]:
        return logging.ERROR, str(exc)

    def reconfigure_logging(self, settings: Settings) -> None:
        if self.configure_logging is not None:
            self.configure_logging(settings.log_level, settings.log_format)

    def idle(self, seconds: float) -> None:
        """The loop's wait when nothing is due: until `seconds` pass, a stop, or a job is handed to the loop."""
        if self.on_idle is not None:
            self.on_idle()
        if self.wakeup.wait(seconds):
            self.wakeup.clear()

    def start_jobs(self) -> Jobs:
        """The recurring jobs of this collector, on one APScheduler scheduler; they run on the loop's thread."""
        from .jobs import Jobs
        from .metrics import progress_bound
        from .sweep import InactiveSweep

        collector, settings = self.collector, self.collector.settings
        jobs = Jobs(progress_bound(settings), wake=self.wakeup.set, should_stop=self.stopping.is_set)
        heartbeat, metrics = self.heartbeat, self.metrics
        if heartbeat is not None:
            jobs.every("heartbeat", settings.heartbeat_seconds, lambda now: heartbeat.beat())
            jobs.every("stats", settings.stats_seconds, heartbeat.beat_stats, quiet=True)  # what the monitor reads
        jobs.every("housekeeping", HOUSEKEEPING_SECONDS, collector.housekeep)
        if metrics is not None:
            jobs.sinks.append(metrics.on_job)
            jobs.every(
                "gauges",
                GAUGES_SECONDS,
                lambda now: metrics.sample(collector.due(self.mode, now), collector.tokens_blocked(now)),
                first=utcnow(),
            )
        if self.mode == "initial":
            sweep = InactiveSweep(
                collector.db,
                collector.instance_id,
                lambda: collector.settings,
                retry=lambda at: jobs.once("inactive-sweep-retry", at, sweep),
            )
            jobs.cron("inactive-sweep", settings.inactive_sweep_cron, sweep)
        if metrics is not None:
            for name in jobs.plans:
                metrics.add_job(name)
        collector.observe(jobs)
        jobs.start()
        return jobs

    def start_metrics(self, version: str) -> MetricsServer | None:
        """With METRICS_PORT set: /metrics and /healthz. A port that cannot be bound is logged as an error and
        collection goes on without them (the scraper's `up == 0` shows it)."""
        settings = self.collector.settings
        if not settings.metrics_port:
            return None
        from .metrics import MetricsServer

        metrics = self.make_metrics(version)
        try:
            server = MetricsServer(metrics, settings.metrics_addr, settings.metrics_port)
        except OSError as exc:
            log.error(
                "metrics: cannot listen on %s:%d (%s); running without /metrics",
                settings.metrics_addr,
                settings.metrics_port,
                exc.strerror or exc,
            )
            return None
        self.collector.observe(metrics)
        self.metrics = metrics
        log.info("metrics: http://%s:%d/metrics and /healthz", settings.metrics_addr, server.port)
        return server

    def make_metrics(self, version: str) -> Metrics:
        """This collector's metrics: its registered services' counters at 0, liveness and readiness bounds from
        the settings, readiness from the collector's database health."""
        from ..engine.dbhealth import bound
        from .metrics import Metrics, progress_bound

        settings = self.collector.settings
        return Metrics(
            self.mode,
            self.collector.instance_id,
            version,
            progress_bound(settings),
            services=self.collector.services(),
            database=self.collector.health,
            database_bound=bound(settings),
            exhausted=lambda: self.collector.exhausted_at,
        )

    def run(self, once: bool = False) -> int:
        """The continuous dispatch loop and the jobs until a stop is requested (with once=True: one pass and no
        jobs, exit 1 if it failed). A loop that fails as a whole (a bug, the database lost for good) is logged and
        started again after LOOP_IDLE_PAUSE."""
        log.info("collector %s started", self.mode)
        if once:
            try:
                self.collector.run_pass(self.mode, should_stop=self.stopping.is_set)
            except Exception:
                log.exception("pass failed")
                return 1
            finally:
                log.info("collector %s stopped", self.mode)
            return 0
        self.start_up()
        try:
            while not self.stopping.is_set():
                try:
                    self.collector.serve(self.mode, should_stop=self.stopping.is_set, wait=self.idle)
                except Exception:
                    pause = self.collector.settings.loop_idle_pause
                    log.exception("dispatch loop failed; starting again in %gs", pause)
                    self.stopping.wait(pause)
        finally:
            self.shut_down()
        log.info("collector %s stopped", self.mode)
        return 0

    def start_up(self) -> None:
        """The one place a daemon is wired: heartbeat (and its first beat), READY=1, the watchdog, the reloader,
        /metrics, /healthz and /readyz, the recurring jobs. The CLI's daemon and the demo both come through here."""
        from .. import __version__
        from .heartbeat import Heartbeat

        settings = self.collector.settings
        self.heartbeat = Heartbeat(
            self.collector.store, self.collector.instance_id, self.mode, settings.heartbeat_seconds, __version__
        )
        self.heartbeat.stats_every = settings.stats_seconds
        self.heartbeat.served = self.collector.served
        self.heartbeat.runs_now = lambda: self.collector.running
        self.heartbeat.max_running = lambda: seats(self.collector.concurrency)  # a reload may change it
        self.collector.observe(self.heartbeat)
        self.first_beat()
        # MongoDB answered and the indexes exist (the Collector made them): ready
        self.lifecycle.ready(f"STATUS={self.mode}: started")
        self.collector.observe(Watchdog(self.notifier, self.mode, self.collector.health))
        self.collector.observe(Reloader(self))
        if self.metrics_server is None:  # (the demo serves them from its first pass on)
            self.metrics_server = self.start_metrics(__version__)
        self.jobs = self.start_jobs()
        jobs = self.jobs
        self.heartbeat.jobs = jobs.describe
        self.collector.notify("on_tick", 0)  # the start itself: the loop is alive (watchdog, /healthz)

    def shut_down(self) -> None:
        """Jobs stopped, metrics closed, the heartbeat removed (a clean exit: no longer listed)."""
        if self.before_exit is not None:
            self.before_exit()
        if self.jobs is not None:
            self.jobs.stop()
        if self.metrics_server is not None:
            self.metrics_server.close()
        try:
            if self.heartbeat is not None:
                self.heartbeat.close()
        except Exception as exc:
            log.warning("removing the heartbeat failed (%s); it expires", type(exc).__name__)

    def first_beat(self) -> None:
        """The first heartbeat, at once (the `heartbeat` job writes the next ones)."""
        assert self.heartbeat is not None
        try:
            self.heartbeat.beat()
        except Exception as exc:
            log.warning("the first heartbeat failed (%s); the heartbeat job tries again", type(exc).__name__)


class Reloader(Observer):
    """Applies a SIGHUP's reload on the dispatch loop's thread (it goes round at least every HEARTBEAT_SECONDS)."""

    def __init__(self, daemon: Daemon):
        self.daemon = daemon

    def on_tick(self, inflight: int) -> None:
        if self.daemon.reload_wanted:
            self.daemon.reload()


def serve(
    settings: Settings,
    mode: str,
    once: bool,
    concurrency: int | None = None,
    instance_id: str | None = None,
    env_file: str | None = None,
    services: tuple[str, ...] | None = None,
) -> int:
    """The daemon for `mode` (exit code), its signal handlers and garbage-collection thresholds restored when it
    returns."""
    with restored_signals(), gc_spaced():
        return _serve(settings, mode, once, concurrency, instance_id, env_file, services)


def _serve(
    settings: Settings,
    mode: str,
    once: bool,
    concurrency: int | None,
    instance_id: str | None,
    env_file: str | None,
    services: tuple[str, ...] | None,
) -> int:
    from functools import partial

    from ..engine import Collector
    from ..engine.store import connect, database_problem, short_error
    from ..sdk.redaction import SECRETS
    from ..settings import mask_text
    from ..sinks.config import load_checked
    from .logs import setup_logging

    log = logging.getLogger("collector")
    SECRETS.add(settings.secrets())
    early = StartupSignals().install()  # before the first blocking call: a SIGHUP then must not kill us
    try:
        client = connect(settings)
    except (PyMongoError, ValueError, TypeError) as exc:
        print(f"collector: setting MONGODB_URI: {mask_text(str(exc), settings.mongodb_uri)}", file=sys.stderr)
        return EXIT_USAGE
    log.info("waiting for MongoDB at %s", settings.mongodb_shown())  # said at once: the wait may be long
    try:
        collector = Collector(
            client.get_default_database("likeastore"),
            settings,
            concurrency=concurrency,
            instance_id=instance_id,
            services=services,
        )
    except IndexRefused as exc:  # without the unique key of items, items would be stored twice: no start
        log.error("cannot start: %s", short_error(exc, settings))
        client.close()
        return EXIT_NO
    except PyMongoError as exc:
        log.error("%s", database_problem(exc, settings))
        client.close()
        return EXIT_DATABASE
    except StopDuringStartup as stop:
        log.info("%s during start-up: exiting", stop)
        client.close()
        return EXIT_OK
    daemon = Daemon(collector, mode)
    daemon.configure_logging = setup_logging
    daemon.load_settings = partial(load_checked, env_file=env_file)  # a bad sink setting refuses it too
    try:
        with daemon.lifecycle.installed(early=early):  # a SIGHUP during start-up is applied at the loop's first round
            return daemon.run(once=once)
    finally:
        collector.close()
        client.close()
