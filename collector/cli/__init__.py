"""The command line, one module per command or command group: `build_parser` assembles the parser from each
module's `register` (which adds its sub-parser and sets its handler), and `main` loads the settings (every sink's
checked too: a bad one is one line and exit 2, whatever the command) and runs the handler the arguments chose.
With no command the daemon runs (daemon.py: `--mode`, `--once`, `--check-config`);
`status`, `healthcheck`, `pause`/`resume`, `jobs`, `networks`, `users` and `sinks` are the operator's (their
queries are ops/'s), `connect` runs a service's authorisation flow (collector/connect/), `sink` runs the sink
service (daemon/sinkprocess.py), `connectors` lists the registry, `demo` and `bench`
are the dev tools'. What the commands share (the database or exit 3, the output) is common.py's; the exit codes
are one table for every command (exitcodes.py).
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..exitcodes import EXIT_USAGE
from ..settings import SettingsError
from . import (
    bench,
    connect,
    connectors,
    daemon,
    demo,
    health,
    jobs,
    monitor,
    networks,
    pauses,
    sink,
    sinks,
    status,
    users,
)
from .common import Parser

COMMANDS = (
    demo,
    connectors,
    status,
    monitor,
    health,
    pauses,
    jobs,
    networks,
    users,
    connect,
    sink,
    sinks,
    bench,
)  # in the order --help lists them


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="collector",
        description="Collect likes, stars and favourites into MongoDB (likeastore-compatible).",
        epilog="Settings come from config/, ./.env, the environment and the --env-file (COLLECTOR_ENV picks "
        "development, test or production); see docs/configuration.md. Exit codes: 0 done, 1 no (not found, left alone, "
        "failed), 2 usage or settings, 3 MongoDB unreachable; status --check: 0 OK, 1 WARNING, 2 CRITICAL, "
        "3 UNKNOWN.",
    )
    parser.add_argument(
        "--env-file",
        metavar="PATH",
        default=None,
        help="the operator's settings file (KEY=value lines; default: COLLECTOR_ENV_FILE): it wins over the "
        "environment and a reload (SIGHUP) reads it again",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    daemon.register(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ..sinks.config import load_checked  # every sink's settings are checked with the others

    try:
        settings = load_checked(env_file=args.env_file)
    except SettingsError as exc:
        print(f"collector: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.check_config:
        return daemon.check_config(settings)
    code: int = args.handler(args, settings)
    return code
