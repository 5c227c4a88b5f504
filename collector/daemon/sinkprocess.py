"""The sink service's process (`collector sink`): the SinkService's rounds (sinks/service.py) on the main thread,
/metrics and /healthz (sinkmetrics.py); signals, reload and systemd's notify protocol through the one process
lifecycle (collector/lifecycle.py).

First SIGTERM/SIGINT: no new delivery starts, and a delivery in flight sends no further request (the rest of a
batch split by bytes or halved on 413 waits); the requests still running finish, each bounded by its sink's
timeout, and the whole stop by the longest of them plus STOP_MARGIN: a request still running near that end is cut.
The outcomes of what finished are written, the service lease is let go, exit 0. An item not delivered (not sent,
or cut) stays queued as it was and is sent again by whoever works next (at least once). A second signal exits at
once. SIGHUP reads the settings again: a bad new setting keeps every old one (one warning line naming
it). With once=True: one round, its deliveries finished, exit 1 if the round failed.

Exit codes at the start: 2 for a bad setting (a sink's named), 3 when MongoDB cannot be reached.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pymongo.errors import PyMongoError

from ..exitcodes import EXIT_DATABASE, EXIT_NO, EXIT_OK, EXIT_USAGE
from ..lifecycle import Lifecycle, StartupSignals, StopDuringStartup, restored_signals
from ..settings import Settings, SettingsError
from ..sinks.status import status_of

if TYPE_CHECKING:  # pragma: no cover
    from ..sinks.sdk import SinkConfig
    from ..sinks.service import SinkService
    from .sinkmetrics import SinkMetrics

log = logging.getLogger("collector.sink")
STOP_MARGIN = 5.0  # seconds beyond the longest sink timeout that a stop waits for the deliveries in flight
DEFAULT_TIMEOUT = 30.0  # the stop bound when no sink is configured
ONCE_ROUNDS = 10_000  # rounds of a --once pass at most
USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@'\"]*@")  # user:password@ in a URL


def error_line(exc: Exception) -> str:
    """A settings error as one line to print: credentials in a URL it quotes, known secrets and secret-looking
    values masked, escaped."""
    from ..sdk.redaction import redact
    from ..textout import printable

    return printable(redact(USERINFO.sub(r"\1***@", str(exc))))


def owner_id() -> str:
    """This process's name in the service lease: host and pid."""
    return f"{socket.gethostname()}-sink-{os.getpid()}"


def configured(settings: Settings, registry: Any) -> list[SinkConfig]:
    """The sinks the settings configure (SinkConfig each); a bad one raises SettingsError naming it."""
    from ..sinks.config import sink_configs

    return list(sink_configs(settings, registry))


def secrets_of(settings: Settings, configs: list[SinkConfig]) -> list[str]:
    """Every secret value a log line must never show: the settings' own and every sink's (options marked secret
    whatever their name, a password in a sink's URL)."""
    from urllib.parse import unquote, urlsplit

    values = list(settings.secrets())
    for config in configs:
        values += [v for v in config.secret_values if v]
        try:
            password = urlsplit(config.url).password
        except ValueError:
            password = None
        if password:
            values += [password, unquote(password)]
    return values


def stop_bound(configs: list[SinkConfig]) -> float:
    return max((float(c.timeout) for c in configs), default=DEFAULT_TIMEOUT) + STOP_MARGIN


class SinkProcess:
    """The loop around one SinkService: its rounds and the waits between them, metrics; its signals, reload and
    notify through the one process lifecycle (collector/lifecycle.py). It reads the service's typed status
    (sinks/status.py) after each round."""

    def __init__(self, service: SinkService, settings: Settings, configs: list[SinkConfig], registry: Any = None):
        self.service, self.settings, self.configs, self.registry = service, settings, configs, registry
        # a wait between rounds ends early: a delivery or a prepare finished (the service sets its own event, which
        # its step() clears), a stop, a reload to apply
        self.lifecycle = Lifecycle(on_stop=self.on_stop, wakeup=service.wakeup)
        self.status = status_of(service)
        self.pending = configs  # the sinks of the settings a reload checked, until it applies them
        self.metrics: SinkMetrics | None = None  # with --metrics-port
        self.load_settings: Callable[[], Settings] | None = None
        self.configure_logging: Callable[[str, str], None] | None = None
        self.database_down = False  # the last round found MongoDB away
        self.said_down = False  # ... and this process logged it (the service logs the outages it rides out)

    def on_stop(self, signum: int) -> None:
        """The first SIGTERM or SIGINT: said; /readyz 503 from now on."""
        log.info(
            "%s received: finishing the deliveries in flight (at most %gs), then exiting",
            signal.Signals(signum).name,
            stop_bound(self.configs),
        )
        if self.metrics is not None:
            self.metrics.stopping = True

    # --- the loop --------------------------------------------------------------------------------------------------
    def run(self, once: bool = False) -> int:
        names = ", ".join(c.name for c in self.configs) or "none (SINKS is empty: nothing to deliver)"
        log.info("sink service started: sinks %s", names)
        lifecycle = self.lifecycle
        lifecycle.ready("STATUS=sink service: started")
        try:
            if once:
                return EXIT_OK if self.one_pass() else EXIT_NO
            while not lifecycle.stopping.is_set():
                if lifecycle.reload_wanted:
                    self.reload()
                wait, _ = self.round()
                lifecycle.alive(self.status_line())
                if not (lifecycle.stopping.is_set() or lifecycle.reload_wanted):
                    lifecycle.wakeup.wait(min(max(wait, 0.0), self.settings.heartbeat_seconds))
        finally:
            self.shut_down()
            log.info("sink service stopped")
        return EXIT_OK

    def one_pass(self) -> bool:
        """`--once`: rounds until the service has nothing more to do now — no round asks for the next at once, no
        sink is being prepared or has a delivery in flight — or ONCE_ROUNDS; False if a round failed. A process
        that does not get the lease stops after its first round."""
        for _ in range(ONCE_ROUNDS):
            wait, ok = self.round()
            if not ok:
                return False
            if self.lifecycle.stopping.is_set() or not self.status.holds_lease:
                return True
            if wait > 0 and not self.status.busy:
                return True
            self.lifecycle.wakeup.wait(min(wait, 1.0) if wait > 0 else 0.05)
        return True

    def round(self) -> tuple[float, bool]:
        """One round of the service: the seconds to wait before the next, and whether it went through."""
        try:
            wait = float(self.service.step())
            self.status = status = status_of(self.service)
            if not status.database_up:  # the service kept going through an outage
                self.on_database_down()
                return wait, False
            if self.metrics is not None:
                measured = status.measured.timestamp() if status.measured is not None else None
                self.metrics.update(self.service.snapshot(), self.service.outbox_pending, status.holds_lease, measured)
        except PyMongoError as exc:
            self.on_database_error(exc)
            return self.settings.loop_idle_pause, False
        except Exception:
            log.exception("sink round failed; trying again in %gs", self.settings.loop_idle_pause)
            if self.metrics is not None:
                self.metrics.round_failed(database=False)
            return self.settings.loop_idle_pause, False
        if self.said_down:
            log.info("MongoDB answers again: sink rounds go on")
        self.database_down = self.said_down = False
        return wait, True

    def on_database_down(self) -> None:
        """The service said MongoDB did not answer its round (it logs that itself): figures kept, readiness 503."""
        if self.metrics is not None:
            self.metrics.round_failed(database=True)
        self.database_down = True

    def on_database_error(self, exc: PyMongoError) -> None:
        """MongoDB did not answer a round: one warning when the outage begins (the figures are kept)."""
        from ..engine.store import short_error

        if self.metrics is not None:
            self.metrics.round_failed(database=True)
        self.database_down = True
        if not self.said_down:
            self.said_down = True
            log.warning(
                "cannot reach MongoDB: %s; trying again every %gs (items wait, nothing is lost)",
                short_error(exc, self.settings),
                self.settings.loop_idle_pause,
            )

    def status_line(self) -> str:
        """systemd's STATUS= line."""
        text = "STATUS=sink service: "
        if self.database_down:
            text += "database unreachable; "
        held = self.status.holds_lease
        return text + ("working (holds the lease)" if held else "standing by (another process holds the lease)")

    def shut_down(self) -> None:
        """No new delivery; the ones in flight finished within the bound and their outcomes written; the lease let
        go; /metrics closed."""
        try:
            self.service.stop(stop_bound(self.configs))
        except PyMongoError as exc:
            from ..engine.store import short_error

            log.warning(
                "stopping: outcomes not written (%s); those items are delivered again",
                short_error(exc, self.settings),
            )
        except Exception:
            log.exception("stopping the sink service failed; undelivered items are delivered again")

    # --- reload (lifecycle.Reloading) --------------------------------------------------------------------------------
    def reload(self) -> list[str]:
        """Read the settings again and apply them to the service (lifecycle.reload): a settings file that cannot be
        read or a bad setting (a sink's included: `check_settings`) keeps every old setting, said in one warning
        line. Returns the names applied."""
        if self.load_settings is None:
            self.lifecycle.reload_wanted = False
            return []
        return self.lifecycle.reload(self)

    def read_settings(self) -> Settings:
        assert self.load_settings is not None
        return self.load_settings()

    def check_settings(self, new: Settings) -> None:
        """The one check of new settings, at a reload: every sink's (SettingsError naming the first bad one)."""
        self.pending = configured(new, self.registry)

    def apply_settings(self, merged: Settings) -> None:
        from ..sdk.redaction import SECRETS

        configs = self.pending
        SECRETS.add(secrets_of(merged, configs))
        self.service.apply_settings(merged)
        self.settings, self.configs = merged, configs
        if self.metrics is not None:
            self.metrics.configure(c.name for c in configs)

    def refusal(self, exc: SettingsError) -> tuple[int, str]:
        return logging.WARNING, error_line(exc)

    def reconfigure_logging(self, settings: Settings) -> None:
        if self.configure_logging is not None:
            self.configure_logging(settings.log_level, settings.log_format)


def serve(settings: Settings, once: bool, env_file: str | None, metrics_port: int, metrics_addr: str) -> int:
    """`collector sink`: the sink service until a signal (or one round); its signal handlers restored after."""
    with restored_signals():
        return _serve(settings, once, env_file, metrics_port, metrics_addr)


def _serve(settings: Settings, once: bool, env_file: str | None, metrics_port: int, metrics_addr: str) -> int:
    from functools import partial

    from ..engine.store import connect, database_problem
    from ..sdk.redaction import SECRETS
    from ..settings import load_settings, mask_text
    from ..sinks.registry import SinkRegistry
    from .logs import setup_logging

    SECRETS.add(settings.secrets())
    early = StartupSignals().install()
    registry = SinkRegistry()
    try:
        configs = configured(settings, registry)
    except SettingsError as exc:
        print(f"collector: {error_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    SECRETS.add(secrets_of(settings, configs))
    try:
        client = connect(settings)
    except (PyMongoError, ValueError, TypeError) as exc:
        print(f"collector: setting MONGODB_URI: {mask_text(str(exc), settings.mongodb_uri)}", file=sys.stderr)
        return EXIT_USAGE
    log.info("waiting for MongoDB at %s", settings.mongodb_shown())  # said at once: the wait may be long
    try:
        service = start_service(client, settings, registry)
    except PyMongoError as exc:
        log.error("%s", database_problem(exc, settings))
        client.close()
        return EXIT_DATABASE
    except SettingsError as exc:
        print(f"collector: {error_line(exc)}", file=sys.stderr)
        client.close()
        return EXIT_USAGE
    except StopDuringStartup as stop:
        log.info("%s during start-up: exiting", stop)
        client.close()
        return EXIT_OK
    process = SinkProcess(service, settings, configs, registry)
    process.load_settings = partial(load_settings, env_file=env_file)
    process.configure_logging = setup_logging
    server = None if once else start_metrics(process, metrics_port, metrics_addr)
    try:
        with process.lifecycle.installed(early=early):  # a SIGHUP during start-up is applied before the first round
            return process.run(once=once)
    finally:
        if server is not None:
            server.close()
        client.close()


def start_service(client: Any, settings: Settings, registry: Any) -> SinkService:
    """The service on the settings' database, once MongoDB answered (PyMongoError when it does not)."""
    from ..sinks.service import SinkService

    db = service_database(client)
    db.command("ping")
    return SinkService(db, settings, owner=owner_id(), registry=registry)


def service_database(client: Any) -> Any:
    """The settings' database as the service reads it: an item is a document anyone may have written, so a date
    outside Python's calendar (JavaScript's Date reaches year 275760) is read as a DatetimeMS and a string that is
    not valid UTF-8 with U+FFFD — one such value must not make a read fail, round after round, for every sink."""
    from bson.codec_options import DatetimeConversion

    codec = client.codec_options.with_options(
        datetime_conversion=DatetimeConversion.DATETIME_AUTO, unicode_decode_error_handler="replace"
    )
    return client.get_default_database("likeastore", codec_options=codec)


def start_metrics(process: SinkProcess, port: int, addr: str) -> Any:
    """With a port: /metrics, /healthz and /readyz. A port that cannot be bound is logged as an error and the
    service goes on without them (the scraper's `up == 0` shows it)."""
    if not port:
        return None
    from .. import __version__
    from .metrics import progress_bound
    from .sinkmetrics import SinkMetrics, SinkMetricsServer

    metrics = SinkMetrics(
        (c.name for c in process.configs),
        __version__,
        owner_id(),
        progress_bound(process.settings),
        lease_seconds=process.status.lease_seconds,
    )
    try:
        server = SinkMetricsServer(metrics, addr, port)
    except OSError as exc:
        log.error("metrics: cannot listen on %s:%d (%s); running without /metrics", addr, port, exc.strerror or exc)
        return None
    process.metrics = metrics
    log.info("metrics: http://%s:%d/metrics and /healthz", addr, server.port)
    return server
