"""`collector demo`: the whole collector against a local fake GitHub API and an in-memory database
(devtools/demo.py, loaded only when the command runs)."""

from __future__ import annotations

import argparse

from ..settings import Settings
from .common import Commands


def register(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo",
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
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ..daemon.logs import setup_logging
    from ..devtools import demo

    setup_logging("WARNING")
    return demo.run(metrics_port=args.metrics_port)
