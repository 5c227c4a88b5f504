"""The long-running process for one mode: the continuous dispatch loop (engine.Collector.serve), signals, --once.

First SIGTERM/SIGINT: networks in flight finish (their requests are cut after HTTP_TIMEOUT at most) and are
saved, claimed networks not started are given back, then the loop exits 0.
A second signal exits at once. With once=True: one pass, exit 1 if that pass failed as a whole.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .engine import Collector
from .notify import Notifier, Watchdog
from .observers import Observer
from .reload import changed, merge
from .settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:  # pragma: no cover
    from .metrics import MetricsServer

log = logging.getLogger("collector.daemon")


class Daemon:
    def __init__(self, collector: Collector, mode: str):
        self.collector = collector
        self.mode = mode
        self.stopping = threading.Event()
        self.signals = 0
        self.notifier = Notifier()
        self.metrics_server: MetricsServer | None = None
        self.reload_wanted = False
        self.load_settings: Callable[[], Settings] = load_settings
        self.configure_logging: Callable[[str, str], None] | None = None  # the CLI's: level and format

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGHUP, self.on_hangup)

    def on_hangup(self, signum: int, frame=None) -> None:
        self.reload_wanted = True  # applied on the dispatch loop's thread, at its next round

    def reload(self) -> list[str]:
        """Read the settings again and apply what may change while running; returns the names applied. A bad
        value keeps every old setting (one error line); the daemon never stops over a reload."""
        self.reload_wanted = False
        old = self.collector.settings
        try:
            new = self.load_settings()
        except SettingsError as exc:
            log.error("reload refused, settings unchanged: %s", exc)
            return []
        merged, kept = merge(old, new)
        if kept:
            log.warning("reload: %s cannot change while running; kept until a restart", ", ".join(kept))
        applied = changed(old, merged)
        self.collector.apply_settings(merged)
        if self.configure_logging is not None and {"LOG_LEVEL", "LOG_FORMAT"} & set(applied):
            self.configure_logging(merged.log_level, merged.log_format)
        log.info("reload: %s", "applied " + ", ".join(applied) if applied else "no change")
        return applied

    def on_signal(self, signum: int, frame=None) -> None:
        self.signals += 1
        if self.signals > 1:
            sys.stderr.write(f"collector: second {signal.Signals(signum).name}, exiting now\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        log.info(
            "%s received: finishing the networks in flight (at most %gs), then exiting",
            signal.Signals(signum).name,
            self.collector.settings.http_timeout,
        )
        self.stopping.set()
        self.notifier.send("STOPPING=1")
        # requests still running after one deadline are cut and no new one starts: the stop is bounded
        self.collector.http.interrupt_after(self.collector.settings.http_timeout)

    def start_metrics(self, version: str) -> MetricsServer | None:
        """With METRICS_PORT set: /metrics and /healthz. A port that cannot be bound is logged as an error and
        collection goes on without them (the scraper's `up == 0` shows it)."""
        settings = self.collector.settings
        if not settings.metrics_port:
            return None
        from .metrics import Metrics, MetricsServer, progress_bound

        metrics = Metrics(self.mode, self.collector.instance_id, version, progress_bound(settings))
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
        self.collector.observers.add(metrics)
        log.info("metrics: http://%s:%d/metrics and /healthz", settings.metrics_addr, server.port)
        return server

    def run(self, once: bool = False) -> int:
        """The continuous dispatch loop until a stop is requested (with once=True: one pass, exit 1 if it
        failed). A loop that fails as a whole (a bug, the database lost for good) is logged and started again
        after LOOP_IDLE_PAUSE."""
        log.info("collector %s started", self.mode)
        heartbeat = None
        if not once:
            from . import __version__
            from .heartbeat import Heartbeat

            heartbeat = Heartbeat(
                self.collector.store,
                self.collector.instance_id,
                self.mode,
                self.collector.settings.heartbeat_seconds,
                __version__,
            )
            self.collector.observers.add(heartbeat)
            # MongoDB answered and the indexes exist (the Collector made them): ready
            self.notifier.send("READY=1", f"STATUS={self.mode}: started")
            self.collector.observers.add(Watchdog(self.notifier, self.mode))
            self.collector.observers.add(Reloader(self))
            if self.mode == "initial":
                from .sweep import InactiveSweep

                self.collector.observers.add(
                    InactiveSweep(self.collector.store.db, self.collector.instance_id, lambda: self.collector.settings)
                )
            self.metrics_server = self.start_metrics(__version__)
            self.collector.observers.notify("on_tick", 0)  # the first heartbeat, at once
        if once:
            try:
                self.collector.run_pass(self.mode, should_stop=self.stopping.is_set)
            except Exception:
                log.exception("pass failed")
                return 1
            finally:
                log.info("collector %s stopped", self.mode)
            return 0
        while not self.stopping.is_set():
            try:
                self.collector.serve(self.mode, should_stop=self.stopping.is_set, wait=self.stopping.wait)
            except Exception:
                pause = self.collector.settings.loop_idle_pause
                log.exception("dispatch loop failed; starting again in %gs", pause)
                self.stopping.wait(pause)
        if self.metrics_server is not None:
            self.metrics_server.close()
        if heartbeat is not None:
            try:
                heartbeat.close()  # a clean exit: no longer listed
            except Exception as exc:
                log.warning("removing the heartbeat failed (%s); it expires", type(exc).__name__)
        log.info("collector %s stopped", self.mode)
        return 0


class Reloader(Observer):
    """Applies a SIGHUP's reload on the dispatch loop's thread (it goes round at least every HEARTBEAT_SECONDS)."""

    def __init__(self, daemon: Daemon):
        self.daemon = daemon

    def on_tick(self, inflight: int) -> None:
        if self.daemon.reload_wanted:
            self.daemon.reload()
