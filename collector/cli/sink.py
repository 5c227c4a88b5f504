"""`collector sink`: the sink service, which hands new items to the configured sinks (SINKS) until a signal, or
one round with --once (daemon/sinkprocess.py, loaded only when the command runs)."""

from __future__ import annotations

import argparse

from ..exitcodes import EXIT_USAGE
from ..settings import Settings
from .common import Commands, complain


def register(commands: Commands) -> None:
    sink = commands.add_parser(
        "sink",
        description="Run the sink service: hand new items to the configured sinks (SINKS).",
        help="run the sink service: hand new items to the configured sinks (SINKS), backlog in MongoDB; one "
        "process holds the service lease and works, others stand by",
    )
    sink.add_argument(
        "--once", action="store_true", help="run one round (its deliveries finished), then exit; 1 if it failed"
    )
    sink.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve /metrics, /healthz and /readyz on this port (default: METRICS_PORT; 0: none); the unit gives "
        "9465, beside a collector's",
    )
    sink.add_argument(
        "--metrics-addr", default=None, metavar="ADDR", help="the address they listen on (default: METRICS_ADDR)"
    )
    sink.set_defaults(handler=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    port = args.metrics_port if args.metrics_port is not None else settings.metrics_port
    addr = args.metrics_addr if args.metrics_addr is not None else settings.metrics_addr
    if not 0 <= port <= 65535:
        complain(f"--metrics-port {port} is not a port (0 to 65535)")
        return EXIT_USAGE
    if not addr.strip():
        complain("--metrics-addr is empty: name the address to listen on (127.0.0.1: this machine only)")
        return EXIT_USAGE
    from ..daemon.logs import setup_logging
    from ..daemon.sinkprocess import serve

    setup_logging(settings.log_level, settings.log_format)
    return serve(settings, args.once, args.env_file, port, addr)
