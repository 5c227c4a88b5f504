"""Command line: `collector --mode initial|normal [--once]`, `collector --check-config`, `collector demo`."""
from __future__ import annotations

import argparse
import json
import logging
import sys

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from . import __version__
from .settings import Settings, SettingsError, load_settings

EXIT_CONFIG = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="collector",
        description="Collect what people like, star and favourite into MongoDB (likeastore-compatible).",
        epilog="Settings come from config/, ./.env and the environment (COLLECTOR_ENV picks "
               "development, test or production); see README.md.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--mode", choices=("initial", "normal"),
                        help="serve this mode: 'initial' also serves rateLimit networks")
    parser.add_argument("--once", action="store_true", help="run one pass, then exit")
    parser.add_argument("--check-config", action="store_true",
                        help="validate the settings, print them (secrets masked) and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("demo", help="run the whole collector against a local fake GitHub API and an "
                                     "in-memory database; prints a JSON summary")
    return parser


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"collector: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check_config:
        print(json.dumps(settings.describe(), indent=2))
        return 0
    if args.command == "demo":
        setup_logging("WARNING")
        from . import demo
        return demo.run()
    if args.mode is None:
        parser.print_usage(sys.stderr)
        print("collector: give --mode initial|normal, --check-config or a command (demo)", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(settings.log_level)
    return serve(settings, args.mode, args.once)


def serve(settings: Settings, mode: str, once: bool) -> int:
    from .daemon import Daemon
    from .engine import Collector

    log = logging.getLogger("collector")
    client = MongoClient(settings.mongodb_uri, tz_aware=True, serverSelectionTimeoutMS=10_000)
    try:
        collector = Collector(client.get_default_database("likeastore"), settings)
    except PyMongoError as exc:
        log.error("cannot reach MongoDB: %s", exc)
        return 1
    daemon = Daemon(collector, mode)
    daemon.install_signal_handlers()
    try:
        return daemon.run(once=once)
    finally:
        collector.close()
        client.close()


if __name__ == "__main__":
    sys.exit(main())
