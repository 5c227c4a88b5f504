"""`collector demo`: the whole collector against a local fake GitHub API and an in-memory database
(devtools/demo.py, loaded only when the command runs)."""

from __future__ import annotations

import argparse

from ..exitcodes import EXIT_USAGE
from ..settings import Settings
from .common import Commands, complain


def register(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo",
        description="Run the whole collector against a fake GitHub API and an in-memory database.",
        help="run the whole collector against a local fake GitHub API and an in-memory database; prints a JSON summary",
    )
    demo.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve /metrics and /healthz on 127.0.0.1:PORT (0: any free port) and, after the summary, keep "
        "polling the demo users until Ctrl-C",
    )
    demo.add_argument(
        "--serve",
        action="store_true",
        help="keep a small fleet running instead (an initial and a normal collector, the fake API, an in-memory "
        "MongoDB stand-in, a new star every second) with the live monitor open, until Ctrl-C",
    )
    demo.add_argument(
        "--port", type=int, default=None, metavar="PORT", help="with --serve: the monitor's port (default MONITOR_PORT)"
    )
    demo.add_argument(
        "--users", type=int, default=6, metavar="N", help="with --serve: demo users, 6 or more for a busier fleet (6)"
    )
    demo.add_argument(
        "--sink",
        default="webhook",
        metavar="KINDS",
        help="after the collection, a sink service delivers the items to local destinations: webhook (a receiver "
        "checking each signature), opensearch (osmem-server, searched afterwards; the test extra), both "
        "comma-separated, all, or none (default: webhook)",
    )
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ..daemon.logs import setup_logging
    from ..devtools import demo

    setup_logging("WARNING")
    if args.serve:
        from ..devtools import demofleet

        if not 1 <= args.users <= 10_000:
            complain("--users is from 1 to 10000")
            return EXIT_USAGE
        return demofleet.serve(args.port if args.port is not None else settings.monitor_port, args.users)
    from ..devtools.sinkdemo import SinkUsage, parse_kinds

    try:
        sinks = parse_kinds(args.sink)
    except SinkUsage as exc:
        complain(str(exc))
        return EXIT_USAGE
    return demo.run(metrics_port=args.metrics_port, sinks=sinks)
