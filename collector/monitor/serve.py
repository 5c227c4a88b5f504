"""Running the monitor: its database client, its event loop, its signals; what `collector monitor` and
`collector demo --serve` call."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from typing import Any

from pymongo import monitoring

from ..settings import Settings
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
    )


def run(monitor: Monitor, host: str, port: int, ready: Callable[[int], object] | None = None) -> int:
    """Serve until SIGTERM or SIGINT; 0 on a clean stop."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        try:
            await monitor.run(host, port, stop, ready or announce(host))
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)

    asyncio.run(main())
    return 0


def announce(host: str) -> Callable[[int], None]:
    def say(port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        print(f"collector monitor: http://{shown}:{port}/ (Ctrl-C to stop)", flush=True)
        log.warning("monitor: serving on %s port %d", host, port)

    return say
