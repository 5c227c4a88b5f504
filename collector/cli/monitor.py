"""`collector monitor`: the live web view of the fleet (monitor/, loaded only when the command runs)."""

from __future__ import annotations

import argparse
import logging

from ..exitcodes import EXIT_USAGE
from ..settings import Settings
from .common import Commands, complain, printable


def register(commands: Commands) -> None:
    monitor = commands.add_parser(
        "monitor",
        description="Serve the live web view of the fleet, read from MongoDB.",
        help="serve the live web view of the fleet (every collector, its rates, the work waiting) from MongoDB; "
        "read-only unless MONITOR_TOKEN is set",
    )
    monitor.add_argument(
        "--host", default=None, help="the address to listen on (default MONITOR_HOST, 127.0.0.1: this machine only)"
    )
    monitor.add_argument(
        "--port", type=int, default=None, help="the port to listen on (default MONITOR_PORT, 8089; 0: any free port)"
    )
    monitor.set_defaults(handler=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from functools import partial

    from ..daemon.logs import setup_logging
    from ..monitor import serve
    from ..settings import load_settings
    from .common import DATABASE

    host = args.host if args.host is not None else settings.monitor_host
    port = args.port if args.port is not None else settings.monitor_port
    if not 0 <= port <= 65535:
        complain(f"--port {port} is not a port (0 to 65535)")
        return EXIT_USAGE
    if not host.strip():
        complain("--host is empty: name the address to listen on (127.0.0.1: this machine only)")
        return EXIT_USAGE
    setup_logging(settings.log_level, settings.log_format)
    logging.getLogger("collector.monitor").info("reading MongoDB at %s", settings.mongodb_shown())
    counted = serve.Counted()
    db = serve.client(settings.mongodb_uri, counted).get_default_database(DATABASE)
    monitor = serve.monitor_for(db, settings, counted)
    reread = partial(load_settings, env_file=args.env_file)
    process = serve.MonitorProcess(monitor, settings, reread, setup_logging)  # SIGHUP: read again
    try:
        return serve.run(monitor, host, port, process=process)
    except OSError as exc:
        complain(printable(f"cannot listen on {host} port {port}: {exc.strerror or exc}"))
        return EXIT_USAGE
