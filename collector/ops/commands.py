"""The operator commands' input and output: `collector status` (tables, JSON, --check), `collector healthcheck`
and `collector networks …` — what they print and the exit code each returns (exitcodes.py). The queries and
rules are in status.py and networks.py; the connection is the engine store's `connect`."""

from __future__ import annotations

import argparse
import contextlib
import io
import socket
import sys
from datetime import datetime
from typing import Any

from pymongo.errors import PyMongoError

from ..engine.store import connect, short_error
from ..exitcodes import EXIT_DATABASE, EXIT_NO, EXIT_OK, EXIT_USAGE
from ..sdk.redaction import clip
from ..settings import Settings
from ..textout import printable


def show_status(
    settings: Settings,
    as_json: bool,
    check: bool,
    warn: float | None = None,
    crit: float | None = None,
    instances: bool = False,
) -> int:
    from ..jsonout import dumps
    from ..sdk.timeutil import utcnow
    from .status import gather, render, render_instances
    from .statuscheck import UNKNOWN
    from .statuscheck import check as check_status

    try:
        client = connect(settings)
        status = gather(client.get_default_database("likeastore"), utcnow(), settings.heartbeat_seconds)
    except (PyMongoError, ValueError) as exc:
        if check:
            print(f"UNKNOWN: cannot read MongoDB: {short_error(exc, settings)}")
            return UNKNOWN
        print(f"collector: cannot read MongoDB: {short_error(exc, settings)}", file=sys.stderr)
        return EXIT_DATABASE
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


STUCK_FACTOR = 3  # a run older than this many HTTP_TIMEOUTs is flagged by `status --instances`


def watch_status(settings: Settings, interval: float, instances: bool) -> int:
    """`status --watch`: the report again every `interval` seconds until Ctrl-C; on a terminal it is redrawn in
    place (cursor home, then the lines, each cleared to its end: no flicker); elsewhere one report follows another."""
    import time

    tty = sys.stdout.isatty()
    try:
        while True:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                show_status(settings, False, False, instances=instances)  # a database away: said on stderr
            text = out.getvalue().rstrip("\n")
            if tty:
                sys.stdout.write("\x1b[H" + "\n".join(line + "\x1b[K" for line in text.split("\n")) + "\x1b[J\n")
            else:
                sys.stdout.write(text + "\n\n")
            sys.stdout.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
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
    from ..jsonout import dumps
    from ..sdk.timeutil import utcnow
    from . import networks as admin

    now = utcnow()
    code = EXIT_OK
    try:
        db = connect(settings).get_default_database("likeastore")
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
        print(f"collector: cannot reach MongoDB: {short_error(exc, settings)}", file=sys.stderr)
        return EXIT_DATABASE
    if getattr(args, "dry_run", False):
        print("(dry run: nothing changed)")
    return code


def list_command(db: Any, args: argparse.Namespace, now: datetime) -> None:
    """`networks list`: the rows, and a line saying so when --limit cut the list."""
    from ..jsonout import dumps
    from . import networks as admin

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
    from ..engine import Collector
    from ..jsonout import dumps
    from ..sdk.http import where
    from ..sdk.redaction import redact
    from .networks import AdminError, masked, parse_id

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
    titles = [printable(clip(item.get("title") or item.get("itemId"), 80)) for item in result.items[:5]]
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
    from .networks import relative

    lines = [f"{'id':<24} {'user':<28} {'service':<13} {'mode':<9} {'state':<12} {'errors':>6}  last error  next run"]
    for r in rows:
        kind = printable(clip(r["lastErrorKind"], 24))[:24] if r["lastErrorKind"] is not None else None
        error = " ".join(x for x in (kind, r["lastErrorAt"] and relative(r["lastErrorAt"], now)) if x) or "-"
        at = r["scheduledTo"]
        nxt = relative(at, now) if isinstance(at, datetime) else "now"
        nxt = HELD.get(r["state"], nxt)
        user, service, mode = (printable(clip(r[k], 80)) for k in ("user", "service", "mode"))
        lines.append(
            f"{r['id']:<24} {user[:28]:<28} {service[:13]:<13} {mode[:9]:<9} "
            f"{r['state']:<12} {r['errors']:>6}  {error}  {nxt}"
        )
    if not rows:
        lines.append("(no network matches)")
    return "\n".join(lines)


def pause_command(settings: Settings, args: argparse.Namespace) -> int:
    """`collector pause` / `collector resume`: one line saying what changed; exit 1 when there was nothing to
    resume, 2 for a bad --until, 3 when MongoDB cannot be reached."""
    from ..sdk.timeutil import utcnow
    from . import pauses

    try:
        db = connect(settings).get_default_database("likeastore")
        if args.command == "pause":
            try:
                print(pauses.pause(db, utcnow(), args.mode, args.service, args.reason, args.until))
            except ValueError as exc:
                print(f"collector: {exc}", file=sys.stderr)
                return EXIT_USAGE
            return EXIT_OK
        done, line = pauses.resume(db, args.mode, args.service)
        print(line)
        return EXIT_OK if done else EXIT_NO
    except PyMongoError as exc:
        print(f"collector: cannot reach MongoDB: {short_error(exc, settings)}", file=sys.stderr)
        return EXIT_DATABASE


def jobs_command(settings: Settings, args: argparse.Namespace, run_sweep: Any = None) -> int:
    """`collector jobs list` (from the heartbeats) and `collector jobs run inactive-sweep` (the sweep itself is
    the daemon's: `run_sweep`, handed in by the command line)."""
    from ..sdk.timeutil import utcnow
    from .jobs import list_jobs

    try:
        db = connect(settings).get_default_database("likeastore")
        if args.verb == "list":
            print("\n".join(list_jobs(db)))
            return EXIT_OK
        lines = run_sweep(db, settings, utcnow(), f"{socket.gethostname()}-manual", args.dry_run, args.force)
        print("\n".join(lines))
        return EXIT_NO if lines[0].startswith("inactive sweep: already run today") else EXIT_OK
    except PyMongoError as exc:
        print(f"collector: cannot reach MongoDB: {short_error(exc, settings)}", file=sys.stderr)
        return EXIT_DATABASE
