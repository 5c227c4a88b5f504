"""`collector status`: the report as tables, JSON, `--instances` or `--watch`, or the `--check` verdict with its
monitoring-plugin exit code. The report and its rendering are the operator tools' (ops/status.py,
ops/statuscheck.py)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..exitcodes import EXIT_OK
from ..settings import Settings
from .common import Commands, database, database_error, dumps, seconds_arg

STUCK_FACTOR = 3  # a run older than this many HTTP_TIMEOUTs is flagged by `status --instances`


def register(commands: Commands) -> None:
    status = commands.add_parser(
        "status",
        description="Show what the collectors are doing, read from MongoDB.",
        help="what the collectors are doing, read from MongoDB (due networks, schedule lag, instances)",
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
    status.set_defaults(handler=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    db = functools.cache(functools.partial(database, settings))  # connected at the first report, kept by --watch
    if args.watch:
        return watch_status(settings, db, args.interval, args.instances)
    return show_status(settings, db, args.json, args.check, args.warn_lag, args.crit_lag, args.instances)


def show_status(
    settings: Settings,
    db: Callable[[], Any],
    as_json: bool,
    check: bool,
    warn: float | None = None,
    crit: float | None = None,
    instances: bool = False,
) -> int:
    """One report; MongoDB unreachable is exit 3, and for `--check` UNKNOWN (3) on standard output, as
    monitoring plugins say it."""
    from pymongo.errors import PyMongoError

    from ..engine.store import database_problem
    from ..ops.status import gather, render, render_instances
    from ..ops.statuscheck import UNKNOWN
    from ..ops.statuscheck import check as check_status
    from ..sdk.timeutil import utcnow

    try:
        status = gather(db(), utcnow(), settings.heartbeat_seconds, settings.lease_seconds)
    except (PyMongoError, ValueError) as exc:
        if check:
            print(f"UNKNOWN: {database_problem(exc, settings, 'read')}")
            return UNKNOWN
        return database_error(exc, settings, "read")
    if check:
        code, line = check_status(status, settings, warn, crit)
        print(line)
        return code
    if as_json:
        print(dumps(status))
    elif instances:
        print(render_instances(status, STUCK_FACTOR * settings.http_timeout))
    else:
        print(render(status))
    return EXIT_OK


def watch_status(settings: Settings, db: Callable[[], Any], interval: float, instances: bool) -> int:
    """`status --watch`: the report again every `interval` seconds until Ctrl-C (or SIGTERM); on a terminal it is
    redrawn in place (cursor home, then the lines, each cleared to its end: no flicker); elsewhere one report
    follows another. The signal only ends the loop: a report being read is finished first (its reads are bounded
    by the operator's server selection), never cut inside the driver, where an interrupt could leave a lock held
    that the client's close at exit then waits for."""
    tty = sys.stdout.isatty()
    with stop_on_signals() as stop:
        while not stop.is_set():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                show_status(settings, db, False, False, instances=instances)  # a database away: said on stderr
            text = out.getvalue().rstrip("\n")
            if tty:
                sys.stdout.write("\x1b[H" + "\n".join(line + "\x1b[K" for line in text.split("\n")) + "\x1b[J\n")
            else:
                sys.stdout.write(text + "\n\n")
            sys.stdout.flush()
            stop.wait(interval)
    return EXIT_OK


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event SIGINT and SIGTERM set while inside, the handlers as they were after; off the main thread (where
    Python takes no handler), Ctrl-C's KeyboardInterrupt sets it instead."""
    stop = threading.Event()
    try:
        previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        previous = {}
    try:
        yield stop
    except KeyboardInterrupt:
        stop.set()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
