"""The command line: the parser and the dispatch to the rooms that do the work — `--mode` runs the daemon
(daemon/process.py: serve), `status`, `healthcheck` and `networks` are the operator's (ops/commands.py), `demo`
and `bench` the devtools'. Exit codes are one table for every command (exitcodes.py, README "Exit codes").
"""

from __future__ import annotations

import argparse
import json
import socket
import sys

from . import __version__
from .devtools.options import Options
from .exitcodes import EXIT_USAGE
from .ops.networks import STATES
from .sdk.modes import MODES
from .settings import MAX_CONCURRENCY, SettingsError, load_settings


def mode_arg(text: str) -> tuple[str, str]:
    """`initial`, `normal`, or one of them with a `-N` suffix (several collectors of one mode on one host)."""
    mode, _, suffix = text.partition("-")
    if mode not in MODES or (_ and not suffix.isalnum()):
        raise argparse.ArgumentTypeError(f"invalid mode {text!r}: give initial or normal, optionally with -N")
    return mode, suffix


def seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not 0 < value <= 366 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not from 0 to 366 days in seconds")
    return value


def limit_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid limit {text!r}: give a whole number, 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid limit {value}: give 1 or more")
    return value


def services_arg(text: str) -> tuple[str, ...]:
    from .settings import _names

    try:
        return _names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def until_arg(text: str):
    """A time to come: ISO 8601 (UTC unless it names a zone) or a duration from now (90m, 2h, 1d)."""
    from datetime import UTC, datetime, timedelta

    from .sdk.timeutil import as_utc, parse_iso

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[:-1].isdigit() and text[-1:] in units:
        seconds = int(text[:-1]) * units[text[-1]]
        if not 0 < seconds <= 366 * 86400:
            raise argparse.ArgumentTypeError(f"{text!r} is not from 1 s to 366 days")
        return datetime.now(UTC) + timedelta(seconds=seconds)
    try:
        at = parse_iso(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid time {text!r}: give ISO 8601 or a duration such as 90m") from None
    return as_utc(at)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="collector",
        description="Collect what people like, star and favourite into MongoDB (likeastore-compatible).",
        epilog="Settings come from config/, ./.env, the environment and the --env-file (COLLECTOR_ENV picks "
        "development, test or production); see README.md. Exit codes: 0 done, 1 no (not found, left alone, "
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
    parser.add_argument(
        "--mode",
        type=mode_arg,
        metavar="{initial,normal}[-N]",
        help="serve this mode ('initial' also serves rateLimit networks); a suffix names one of several "
        "collectors of the mode on this host (normal-2: instance id HOST-normal-2), as systemd's collector@normal-2",
    )
    parser.add_argument("--once", action="store_true", help="run one pass, then exit")
    parser.add_argument(
        "--check-config", action="store_true", help="validate the settings, print them (secrets masked) and exit"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
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
    commands.add_parser("connectors", help="list the registered connectors, built-in or third-party")
    status = commands.add_parser(
        "status", help="what the collectors are doing, read from MongoDB (due networks, schedule lag, instances)"
    )
    status.add_argument("--json", action="store_true", help="print JSON instead of tables")
    status.add_argument(
        "--instances",
        action="store_true",
        help="per live collector, the networks it runs now and for how long (runs past 3 x HTTP_TIMEOUT flagged)",
    )
    status.add_argument(
        "--watch", action="store_true", help="print the report again every --interval seconds until Ctrl-C"
    )
    status.add_argument("--interval", type=seconds_arg, default=5.0, help="with --watch: seconds between reports (5)")
    status.add_argument(
        "--check",
        action="store_true",
        help="one line naming every problem, with performance data; exit 0 OK, 1 WARNING (lag over --warn-lag), "
        "2 CRITICAL (due networks and no live collector, lag over --crit-lag), 3 UNKNOWN (MongoDB unreachable)",
    )
    status.add_argument(
        "--warn-lag",
        type=seconds_arg,
        default=None,
        metavar="SECONDS",
        help="with --check: WARNING past this schedule lag (default: the mode's interval, NORMAL_INTERVAL or "
        "RATE_LIMIT_INTERVAL, at least 60 s)",
    )
    status.add_argument(
        "--crit-lag",
        "--max-lag",
        type=seconds_arg,
        default=None,
        metavar="SECONDS",
        help="with --check: CRITICAL past this schedule lag (default: twice the warning bound)",
    )
    health = commands.add_parser(
        "healthcheck",
        help="ask this instance's own /healthz (or /readyz) on METRICS_ADDR:METRICS_PORT; exit 0 healthy, 1 not "
        "(for container health checks without curl)",
    )
    health.add_argument("--ready", action="store_true", help="ask /readyz (MongoDB answers) instead of /healthz")
    health.add_argument("--timeout", type=seconds_arg, default=5.0, help="seconds to wait for the answer (5)")
    pausing = commands.add_parser(
        "pause",
        help="stop every collector from claiming a scope (a mode, a service, or both) until resumed or --until; "
        "runs in flight finish and are saved",
    )
    resuming = commands.add_parser("resume", help="lift the pause of a scope (the same --mode/--service as given)")
    for sub in (pausing, resuming):
        sub.add_argument("--mode", choices=MODES, help="only this mode (default: every mode)")
        sub.add_argument("--service", help="only this service (default: every service)")
    pausing.add_argument("--reason", default="", help="why, shown by status and in every collector's log")
    pausing.add_argument(
        "--until",
        type=until_arg,
        default=None,
        metavar="TIME",
        help="ISO 8601 (UTC unless a zone is given) or 90m, 2h, 1d",
    )
    jobs = commands.add_parser("jobs", help="the collectors' recurring jobs: list them, or run the inactive sweep now")
    job_verbs = jobs.add_subparsers(dest="verb", metavar="VERB", required=True)
    job_verbs.add_parser("list", help="per collector (from its heartbeat): trigger, next run, last success and failure")
    job_run = job_verbs.add_parser("run", help="run a job now: inactive-sweep")
    job_run.add_argument("job", choices=("inactive-sweep",))
    job_run.add_argument("--dry-run", action="store_true", help="say what it would skip and revive; write nothing")
    job_run.add_argument("--force", action="store_true", help="run again even if it ran today")
    networks = commands.add_parser(
        "networks", help="list, show, re-enable or reset networks (reads and writes MongoDB)"
    )
    verbs = networks.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="one line per network: id, user, service, mode, state, errors, next run")
    listing.add_argument("--service")
    listing.add_argument("--user", metavar="EMAIL")
    listing.add_argument("--state", choices=STATES)
    listing.add_argument("--limit", type=limit_arg, default=50, help="at most this many lines, 1 or more (50)")
    listing.add_argument("--json", action="store_true")
    show = verbs.add_parser("show", help="every field of a network (or of a user's networks), secrets masked")
    show.add_argument("key", metavar="ID|EMAIL")
    enabling = verbs.add_parser(
        "enable", help="clear disabled, errors and lastError and schedule now (unauthorized stays unless --force)"
    )
    enabling.add_argument("ids", nargs="*", metavar="ID")
    enabling.add_argument("--service", help="every disabled or erroring network of this service")
    enabling.add_argument("--kind", help="with --service: only those whose lastError.kind is this")
    enabling.add_argument("--force", action="store_true", help="clear unauthorized too")
    enabling.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    running = verbs.add_parser(
        "run", help="run one network now in the foreground with the daemon's code, printing requests, items, state"
    )
    running.add_argument("id", metavar="ID")
    running.add_argument(
        "--dry-run", action="store_true", help="call the API but write nothing (tokens a refresh obtains are kept)"
    )
    resetting = verbs.add_parser("reset", help="back to initial mode from the start of the history (items kept)")
    resetting.add_argument("ids", nargs="+", metavar="ID")
    resetting.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    bench = commands.add_parser(
        "bench", help="measure throughput, quota use and memory against the fake API; prints one line of JSON"
    )
    defaults = Options()
    for flag, kind, help_text in BENCH_FLAGS:
        # SUPPRESS: a flag not given here leaves the top-level value (`collector --concurrency 1 bench`) alone
        bench.add_argument(
            f"--{flag}",
            type=kind,
            default=argparse.SUPPRESS,
            help=f"{help_text} (default: {getattr(defaults, flag.replace('-', '_'))})",
        )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests out at once, 1 to 4096, with up to twice as many networks held (default: the CONCURRENCY "
        "setting, 16; 1 runs networks in series)",
    )
    parser.add_argument(
        "--services",
        type=services_arg,
        default=None,
        metavar="NAME[,NAME...]",
        help="claim only these services' networks (default: the SERVICES setting; empty: every service)",
    )
    parser.add_argument(
        "--instance-id", default=None, help="this collector's name in network leases (default: host name and pid)"
    )
    return parser


BENCH_FLAGS = (
    ("networks", int, "networks in the history walk"),
    ("split-processes", int, "collector processes sharing the walk's concurrency, database apart (1: not run)"),
    ("pages", int, "pages of 100 stars per network"),
    ("series-networks", int, "networks walked in series (concurrency 1) for the series time per task"),
    ("latencies", str, "fake API latencies to measure, ms, comma-separated (the last is the headline)"),
    ("concurrency", int, "requests out at once (twice as many networks held)"),
    ("compare-concurrency", int, "a second concurrency, for comparison"),
    ("latency-sigma", float, "> 0: lognormal latency with this sigma and a 1%% tail ten times slower"),
    ("poll-networks", int, "networks in the steady-state polls"),
    ("polls", int, "polls in the steady-state workload"),
    ("poll-latency", float, "latency of the steady-state polls, seconds"),
    ("change-share", float, "share of polls that find a changed page (the rest are 304)"),
    ("cycle-networks", int, "normal-mode networks of the one-cycle measure (cycle_s_3000)"),
    ("cycle-latency", float, "latency of the one-cycle measure, seconds"),
    ("quota-networks", int, "networks in the quota-bound run"),
    ("quota", int, "requests per token per quota window in the quota-bound run"),
    ("quota-window", int, "quota window, seconds"),
    ("quota-windows", int, "quota windows the quota-bound run lasts"),
    ("quota-pages", int, "pages per network in the quota-bound run (work must exceed quota)"),
    ("soak-runs", int, "network runs in the memory soak"),
    ("soak-networks", int, "networks in the memory soak"),
    ("floor-pages", int, "pages per round of the floor measure (urllib3, gzip, orjson, dicts; again with zlib-ng)"),
    ("floor-polls", int, "304 polls made by the floor measure (urllib3; a raw socket), per round"),
    ("mongodb-uri", str, "measure against this MongoDB (a scratch database is created and dropped)"),
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(env_file=args.env_file)
    except SettingsError as exc:
        print(f"collector: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.check_config:
        print(json.dumps(settings.describe(), indent=2))
        return 0
    from .daemon.logs import setup_logging

    if args.command == "demo":
        setup_logging("WARNING")
        from .devtools import demo

        return demo.run(metrics_port=args.metrics_port)
    if args.command == "connectors":
        return list_connectors()
    if args.command == "jobs":
        from .daemon.sweep import run_now
        from .ops import commands

        return commands.jobs_command(settings, args, run_now)
    if args.command in ("networks", "status", "healthcheck", "pause", "resume"):
        from .ops import commands

        if args.command in ("pause", "resume"):
            return commands.pause_command(settings, args)
        if args.command == "networks":
            return commands.networks_command(settings, args)
        if args.command == "status":
            if args.watch:
                return commands.watch_status(settings, args.interval, args.instances)
            return commands.show_status(settings, args.json, args.check, args.warn_lag, args.crit_lag, args.instances)
        return commands.healthcheck(settings, args.ready, args.timeout)
    if args.command == "bench":
        setup_logging("ERROR")
        from .devtools import bench

        given = {flag.replace("-", "_") for flag, _, _ in BENCH_FLAGS} & {
            k for k, v in vars(args).items() if v is not None
        }
        opts = Options(**{name: getattr(args, name) for name in given})
        return bench.run(opts)
    if args.mode is None:
        parser.print_usage(sys.stderr)
        print(
            "collector: give --mode initial|normal, --check-config or a command "
            "(demo, status, healthcheck, pause, resume, jobs, networks, connectors, bench)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.concurrency is not None and not 1 <= args.concurrency <= MAX_CONCURRENCY:
        parser.error(f"--concurrency must be from 1 to {MAX_CONCURRENCY}")
    setup_logging(settings.log_level, settings.log_format)
    mode, suffix = args.mode
    instance_id = args.instance_id or (f"{socket.gethostname()}-{mode}-{suffix}" if suffix else None)
    from .daemon.process import serve

    return serve(settings, mode, args.once, args.concurrency, instance_id, args.env_file, args.services)


def list_connectors() -> int:
    from collector.engine.registry import Registry

    registry = Registry()
    for name in registry.names():
        print(f"{name}\t{'built-in' if registry.is_builtin(name) else 'third-party'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
