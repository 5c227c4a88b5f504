"""`collector pause` and `collector resume`: one line saying what changed; exit 1 when there was nothing to
resume, 2 for a bad --until or a --service that is no name ("*"), 3 when MongoDB cannot be reached. The pause
itself is ops/pauses.py's."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from ..exitcodes import EXIT_NO, EXIT_OK, EXIT_USAGE
from ..modes import MODES
from ..settings import Settings
from .common import Commands, complain, on_database


def until_arg(text: str) -> datetime:
    """A time to come: ISO 8601 (UTC unless it names a zone) or a duration from now (90m, 2h, 1d)."""
    from datetime import UTC, timedelta

    from ..sdk.timeutil import as_utc, parse_iso

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


def register(commands: Commands) -> None:
    pausing = commands.add_parser(
        "pause",
        description="Stop every collector from claiming a mode, a service or both.",
        help="stop every collector from claiming a scope (a mode, a service, or both) until resumed or --until; "
        "runs in flight finish and are saved",
    )
    resuming = commands.add_parser(
        "resume",
        description="Lift the pause of a mode, a service or both.",
        help="lift the pause of a scope (the same --mode/--service as given)",
    )
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
    pausing.set_defaults(handler=pause)
    resuming.set_defaults(handler=resume)


@on_database
def pause(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import pauses
    from ..sdk.timeutil import utcnow

    try:
        print(pauses.pause(db, utcnow(), args.mode, args.service, args.reason, args.until))
    except ValueError as exc:
        complain(str(exc))
        return EXIT_USAGE
    return EXIT_OK


@on_database
def resume(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import pauses

    try:
        done, line = pauses.resume(db, args.mode, args.service)
    except ValueError as exc:
        complain(str(exc))
        return EXIT_USAGE
    print(line)
    return EXIT_OK if done else EXIT_NO
