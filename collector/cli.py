"""Command line: `collector --mode initial|normal [--once]`, `collector --check-config`, and the commands (demo,
status, healthcheck, networks, connectors, bench).

Exit codes, the same for every command (README, "Exit codes"):
0 done; 1 the command ran and the answer is no (no such network, a network a collector holds left alone, a
write that matched nothing, a run that failed, an unhealthy instance, a --once pass that failed); 2 usage or
settings (a bad option, an invalid setting, a settings file that cannot be read); 3 MongoDB cannot be reached.
`status --check` follows the monitoring-plugin convention instead: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import socket
import sys
from datetime import datetime
from typing import Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from . import __version__
from .devtools.options import Options
from .ops.networks import STATES
from .settings import MAX_CONCURRENCY, Settings, SettingsError, load_settings
from .textout import EscapingFormatter, printable

EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_DATABASE = 0, 1, 2, 3
EXIT_CONFIG = EXIT_USAGE


def mode_arg(text: str) -> tuple[str, str]:
    """`initial`, `normal`, or one of them with a `-N` suffix (several collectors of one mode on one host)."""
    mode, _, suffix = text.partition("-")
    if mode not in ("initial", "normal") or (_ and not suffix.isalnum()):
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
        help="networks run at once, 1 to 4096 (default: the CONCURRENCY setting, 16; 1 runs them in series)",
    )
    parser.add_argument(
        "--instance-id", default=None, help="this collector's name in network leases (default: host name and pid)"
    )
    return parser


BENCH_FLAGS = (
    ("networks", int, "networks in the history walk"),
    ("pages", int, "pages of 100 stars per network"),
    ("series-networks", int, "networks walked in series (concurrency 1) for the series time per task"),
    ("latencies", str, "fake API latencies to measure, ms, comma-separated (the last is the headline)"),
    ("concurrency", int, "networks run at once"),
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
    ("mongodb-uri", str, "measure against this MongoDB (a scratch database is created and dropped)"),
)


def setup_logging(level: str, log_format: str = "text") -> None:
    from .sdk.redaction import RedactingFilter, install

    install()  # every record redacted when made, whoever logs it
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        json_formatter()
        if log_format == "json"
        else EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handler.addFilter(RedactingFilter())  # and on the handler, for records made before install()
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # APScheduler's INFO lines ("Running job", "executed successfully") and its warnings (a skip, a miss) would
    # repeat what collector.jobs logs, rate-limited, only when it matters
    logging.getLogger("apscheduler").setLevel(max(logging.ERROR, root.level))


def json_formatter() -> logging.Formatter:
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and a run line's fields."""
    from datetime import UTC, datetime

    from pythonjsonlogger.json import JsonFormatter

    from .sdk.redaction import redact

    class Formatter(JsonFormatter):
        def add_fields(self, log_record: dict, record: logging.LogRecord, message_dict: dict) -> None:
            super().add_fields(log_record, record, message_dict)
            log_record["time"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            log_record["level"] = record.levelname
            log_record["logger"] = record.name
            run = log_record.pop("run", None)
            if isinstance(run, dict):
                log_record.update({k: redact(v) if isinstance(v, str) else v for k, v in run.items()})

    return Formatter("%(message)s", json_ensure_ascii=True, json_serializer=strict_json)


def strict_json(value: Any, **options: Any) -> str:
    """RFC 8259 only: NaN and the infinities (a float from a document or a server) become null."""
    from .jsonout import plain

    options.pop("allow_nan", None)
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(plain(value), allow_nan=False, **options)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(env_file=args.env_file)
    except SettingsError as exc:
        print(f"collector: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check_config:
        print(json.dumps(settings.describe(), indent=2))
        return 0
    if args.command == "demo":
        setup_logging("WARNING")
        from .devtools import demo

        return demo.run(metrics_port=args.metrics_port)
    if args.command == "connectors":
        return list_connectors()
    if args.command == "networks":
        return networks_command(settings, args)
    if args.command == "status":
        return show_status(settings, args.json, args.check, args.warn_lag, args.crit_lag)
    if args.command == "healthcheck":
        return healthcheck(settings, args.ready, args.timeout)
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
            "(demo, status, healthcheck, networks, connectors, bench)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if args.concurrency is not None and not 1 <= args.concurrency <= MAX_CONCURRENCY:
        parser.error(f"--concurrency must be from 1 to {MAX_CONCURRENCY}")
    setup_logging(settings.log_level, settings.log_format)
    mode, suffix = args.mode
    instance_id = args.instance_id or (f"{socket.gethostname()}-{mode}-{suffix}" if suffix else None)
    return serve(settings, mode, args.once, args.concurrency, instance_id, args.env_file)


def db_error(exc: Exception, settings: Settings) -> str:
    """A driver error in one short line: the server and the reason, without pymongo's topology dump; the URI's
    password masked."""
    from .settings import mask_text

    text = re.sub(r" \(configured timeouts:[^)]*\)", "", mask_text(str(exc), settings.mongodb_uri))
    return text.split(", Topology Description:")[0][:240]


def show_status(
    settings: Settings, as_json: bool, check: bool, warn: float | None = None, crit: float | None = None
) -> int:
    from .jsonout import dumps
    from .ops.status import UNKNOWN, gather, render
    from .ops.status import check as check_status
    from .sdk.timeutil import utcnow

    try:
        client = mongo_client(settings)
        status = gather(client.get_default_database("likeastore"), utcnow(), settings.heartbeat_seconds)
    except (PyMongoError, ValueError) as exc:
        if check:
            print(f"UNKNOWN: cannot read MongoDB: {db_error(exc, settings)}")
            return UNKNOWN
        print(f"collector: cannot read MongoDB: {db_error(exc, settings)}", file=sys.stderr)
        return EXIT_DATABASE
    if check:
        code, line = check_status(status, settings, warn, crit)
        print(line)
        return code
    print(dumps(status) if as_json else render(status))
    return EXIT_OK


def healthcheck(settings: Settings, ready: bool, timeout: float) -> int:
    """`collector healthcheck`: this instance's own /healthz (or /readyz), for container health checks."""
    import urllib.error
    import urllib.request

    if not settings.metrics_port:
        print("collector: METRICS_PORT is not set, so this instance serves no health endpoint", file=sys.stderr)
        return EXIT_NO
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(settings.metrics_addr, settings.metrics_addr)
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{settings.metrics_port}/{'readyz' if ready else 'healthz'}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            code, body = reply.status, reply.read(1024)
    except urllib.error.HTTPError as error:
        code, body = error.code, error.read(1024)
    except (OSError, ValueError) as exc:
        print(f"unhealthy: {url} did not answer ({getattr(exc, 'reason', None) or exc})")
        return EXIT_NO
    print(("healthy: " if code == 200 else "unhealthy: ") + printable(body.decode("utf-8", "replace").strip()))
    return EXIT_OK if code == 200 else EXIT_NO


def networks_command(settings: Settings, args: argparse.Namespace) -> int:
    from .jsonout import dumps
    from .ops import networks as admin
    from .sdk.timeutil import utcnow

    now = utcnow()
    code = EXIT_OK
    try:
        db = mongo_client(settings).get_default_database("likeastore")
        if args.verb == "list":
            list_command(db, args, now)
        elif args.verb == "show":
            for network in admin.find(db, args.key):
                print(dumps(admin.shown(network, now)))
        elif args.verb == "run":
            return run_network(db, settings, args.id, args.dry_run, now)
        else:
            if args.verb == "enable":
                lines = admin.enable(db, now, args.ids, args.service, args.kind, args.force, args.dry_run)
            else:
                lines = admin.reset(db, now, args.ids, args.dry_run)
            print("\n".join(printable(line) for line in lines) if lines else f"no network to {args.verb}")
            code = EXIT_NO if lines.refused else EXIT_OK
    except admin.AdminError as exc:
        print(f"collector: {printable(str(exc))}", file=sys.stderr)
        return EXIT_NO
    except PyMongoError as exc:
        print(f"collector: cannot reach MongoDB: {db_error(exc, settings)}", file=sys.stderr)
        return EXIT_DATABASE
    if getattr(args, "dry_run", False):
        print("(dry run: nothing changed)")
    return code


def list_command(db: Any, args: argparse.Namespace, now: datetime) -> None:
    """`networks list`: the rows, and a line saying so when --limit cut the list."""
    from .jsonout import dumps
    from .ops import networks as admin

    rows = admin.list_networks(db, now, args.service, args.user, args.state, args.limit)
    total = admin.count_networks(db, now, args.service, args.user, args.state) if len(rows) >= args.limit else len(rows)
    if args.json:
        print(dumps(rows))
    else:
        print(render_rows(rows, now))
    if total > len(rows):
        note = f"{len(rows):,} of {total:,} shown; use --limit"
        print(note, file=sys.stderr if args.json else sys.stdout)


def run_network(db: Any, settings: Settings, key: str, dry_run: bool, now: datetime) -> int:
    """`collector networks run`: the network's requests as they happen, then its items and state change."""
    from .engine import Collector
    from .jsonout import dumps
    from .ops.networks import AdminError, masked, parse_id
    from .sdk.http import where
    from .sdk.redaction import redact

    collector = Collector(
        db, settings, instance_id=f"{socket.gethostname()}-manual", concurrency=1, ensure_indexes=not dry_run
    )

    def show(response: Any, *args: Any, **kwargs: Any) -> None:
        ms = response.elapsed.total_seconds() * 1000
        print(printable(f"  {response.request.method} {where(response.url)} -> {response.status_code} ({ms:.0f} ms)"))

    collector.http.session.hooks["response"].append(show)
    try:
        result, saved = collector.run_one(parse_id(key), now, dry_run=dry_run)
    except LookupError as exc:
        raise AdminError(str(exc)) from None
    finally:
        collector.close()
    error = f" — {printable(redact(result.error.message))}" if result.error is not None else ""
    print(f"status: {result.status}{error}")
    titles = [printable(str(item.get("title") or item.get("itemId"))[:80]) for item in result.items[:5]]
    print(f"items: {len(result.items)}" + "".join(f"\n  {t}" for t in titles))
    values = masked(dict(result.update.values))
    print("state: " + dumps({"set": values, "unset": sorted(result.update.unset)}, indent=None))
    if saved is None:
        print("(dry run: nothing written)")
    else:
        print(f"saved: {saved.new_items} new items, state {'saved' if saved.state_saved else 'not saved (lease lost)'}")
    return 0 if result.error is None else 1


HELD = {"disabled": "not until enabled", "unauthorized": "not until authorised", "skipped": "not while skipped"}


def render_rows(rows: list[dict], now: datetime) -> str:
    from .ops.networks import relative

    lines = [f"{'id':<24} {'user':<28} {'service':<13} {'mode':<9} {'state':<12} {'errors':>6}  last error  next run"]
    for r in rows:
        kind = printable(str(r["lastErrorKind"]))[:24] if r["lastErrorKind"] is not None else None
        error = " ".join(x for x in (kind, r["lastErrorAt"] and relative(r["lastErrorAt"], now)) if x) or "-"
        at = r["scheduledTo"]
        nxt = relative(at, now) if isinstance(at, datetime) else "now"
        nxt = HELD.get(r["state"], nxt)
        user, service, mode = (printable(str(r[k])) for k in ("user", "service", "mode"))
        lines.append(
            f"{r['id']:<24} {user[:28]:<28} {service[:13]:<13} {mode[:9]:<9} "
            f"{r['state']:<12} {r['errors']:>6}  {error}  {nxt}"
        )
    if not rows:
        lines.append("(no network matches)")
    return "\n".join(lines)


def list_connectors() -> int:
    from collector.engine.registry import Registry

    registry = Registry()
    for name in registry.names():
        print(f"{name}\t{'built-in' if registry.is_builtin(name) else 'third-party'}")
    return 0


def mongo_client(settings: Settings) -> MongoClient:
    """A tz-aware client; the URI's own serverSelectionTimeoutMS wins over our 10 s default."""
    options: dict = {"tz_aware": True}
    if "serverselectiontimeoutms" not in settings.mongodb_uri.lower():
        options["serverSelectionTimeoutMS"] = 10_000
    return MongoClient(settings.mongodb_uri, **options)


def serve(
    settings: Settings,
    mode: str,
    once: bool,
    concurrency: int | None = None,
    instance_id: str | None = None,
    env_file: str | None = None,
) -> int:
    from functools import partial

    from .daemon.process import Daemon, StartupSignals, StopDuringStartup
    from .engine import Collector
    from .sdk.redaction import SECRETS
    from .settings import mask_text

    log = logging.getLogger("collector")
    SECRETS.add(settings.secrets())
    early = StartupSignals().install()  # before the first blocking call: a SIGHUP then must not kill us
    try:
        client = mongo_client(settings)
    except (PyMongoError, ValueError, TypeError) as exc:
        print(f"collector: setting MONGODB_URI: {mask_text(str(exc), settings.mongodb_uri)}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        collector = Collector(
            client.get_default_database("likeastore"), settings, concurrency=concurrency, instance_id=instance_id
        )
    except PyMongoError as exc:
        log.error("cannot reach MongoDB: %s", db_error(exc, settings))
        client.close()
        return EXIT_DATABASE
    except StopDuringStartup as stop:
        log.info("%s during start-up: exiting", stop)
        client.close()
        return EXIT_OK
    daemon = Daemon(collector, mode)
    daemon.configure_logging = setup_logging
    daemon.load_settings = partial(load_settings, env_file=env_file)
    daemon.install_signal_handlers()
    daemon.reload_wanted = early.hangup  # a SIGHUP during start-up is applied at the loop's first round
    try:
        return daemon.run(once=once)
    finally:
        collector.close()
        client.close()


if __name__ == "__main__":
    sys.exit(main())
