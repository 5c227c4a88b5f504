"""Running the monitor: its database client, its event loop; its signals, reload and notify through the one process
lifecycle (collector/lifecycle.py); what `collector monitor` and `collector demo --serve` call."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from typing import Any

from pymongo import monitoring

from ..lifecycle import Lifecycle
from ..settings import Settings, SettingsError
from .app import Monitor

log = logging.getLogger("collector.monitor")

TIMEOUTS_MS = {"serverSelectionTimeoutMS": 5000, "connectTimeoutMS": 5000, "socketTimeoutMS": 10_000}


class Counted(monitoring.CommandListener):
    """Counts the commands the monitor sends MongoDB: its cost, shown on the page and measured (docs/monitor.md)."""

    def __init__(self) -> None:
        self.commands = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.commands += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def client(uri: str, counted: Counted | None = None) -> Any:
    """The monitor's own client: a read waits at most about five seconds for an unreachable server, so the page
    hears of an outage within seconds, not the driver's default 30 (a URI's own timeouts win)."""
    from pymongo import MongoClient

    lowered = uri.lower()
    options: dict[str, Any] = {k: v for k, v in TIMEOUTS_MS.items() if k.lower() not in lowered}
    return MongoClient(
        uri,
        tz_aware=True,
        event_listeners=[counted] if counted else [],
        datetime_conversion="DATETIME_AUTO",  # a date out of Python's range is read, not an error for the page
        unicode_decode_error_handler="replace",  # so is a string another program wrote as invalid UTF-8
        **options,
    )


def monitor_for(db: Any, settings: Settings, counted: Counted | None = None) -> Monitor:
    from .. import __version__
    from ..engine.store import short_error

    return Monitor(
        db,
        commands=(lambda: counted.commands) if counted else None,
        token=settings.monitor_token,
        heartbeat_seconds=settings.heartbeat_seconds,
        lease_seconds=settings.lease_seconds,
        version=__version__,
        describe=lambda exc: short_error(exc, settings),
        settings=settings,
    )


class MonitorProcess:
    """The monitor's side of the process lifecycle (collector/lifecycle.py): what a reload reads and applies
    (HEARTBEAT_SECONDS, LOG_LEVEL, LOG_FORMAT; its socket and token are kept until a restart)."""

    def __init__(
        self,
        monitor: Monitor,
        settings: Settings | None = None,
        load_settings: Callable[[], Settings] | None = None,
        configure_logging: Callable[[str, str], None] | None = None,
    ):
        self.monitor, self.current = monitor, settings
        self.load_settings, self.configure_logging = load_settings, configure_logging
        self.lifecycle = Lifecycle(on_reload=self.reload)

    def reload(self) -> list[str]:
        """A SIGHUP, on the monitor's loop: applied at once (the settings are read before the next refresh)."""
        if self.current is None or self.load_settings is None:
            self.lifecycle.reload_wanted = False
            log.warning("reload: this monitor was started without settings to read again; nothing changed")
            return []
        return self.lifecycle.reload(self)

    @property
    def settings(self) -> Settings:
        assert self.current is not None
        return self.current

    def read_settings(self) -> Settings:
        assert self.load_settings is not None
        return self.load_settings()

    def check_settings(self, new: Settings) -> None:
        """Nothing more than reading them checks: every setting the monitor uses is checked as it is read."""

    def apply_settings(self, merged: Settings) -> None:
        self.monitor.heartbeat_seconds = merged.heartbeat_seconds
        self.current = merged

    def refusal(self, exc: SettingsError) -> tuple[int, str]:
        return logging.ERROR, str(exc)

    def reconfigure_logging(self, settings: Settings) -> None:
        if self.configure_logging is not None:
            self.configure_logging(settings.log_level, settings.log_format)


def run(
    monitor: Monitor,
    host: str,
    port: int,
    ready: Callable[[int], object] | None = None,
    process: MonitorProcess | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT (a second one exits at once); SIGHUP reloads the settings. 0 on a clean stop."""
    process = process or MonitorProcess(monitor)
    lifecycle = process.lifecycle
    say = ready or announce(host)

    def started(bound: int) -> None:
        say(bound)
        lifecycle.ready(f"STATUS=monitor: serving on port {bound}")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        lifecycle.on_stop = lambda signum: stopping(signum, stop)  # the handlers run on the loop itself
        with lifecycle.installed(loop):
            await monitor.run(host, port, stop, started)

    asyncio.run(main())
    return 0


def stopping(signum: int, stop: asyncio.Event) -> None:
    """The first SIGTERM or SIGINT: said, and the loop told to stop after the refresh in flight."""
    log.info("%s received: finishing the refresh in flight, then exiting", signal.Signals(signum).name)
    stop.set()


def announce(host: str) -> Callable[[int], None]:
    def say(port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        print(f"collector monitor: http://{shown}:{port}/ (Ctrl-C to stop)", flush=True)
        log.info("monitor: serving on %s port %d", host, port)

    return say
