"""`collector sinks list|status|pause|resume|replay|forget`: the sinks as configured and as the database says they
stand, and the operator's pause, resume, replay and forget. Exit codes: 0 done, 1 no such sink (or nothing to
resume, or a sink still configured to forget), 2 a bad setting or argument, 3 MongoDB unreachable. The queries
and writes are ops/sinks.py's; the text ops/sinksview.py's."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from ..exitcodes import EXIT_NO, EXIT_OK, EXIT_USAGE
from ..settings import Settings
from .common import Commands, complain, dumps, on_database, printable


def since_arg(text: str) -> datetime:
    """An ISO 8601 date or date and time, UTC unless it names a zone. Anything else, a date whose zone moves it out
    of the calendar (years 1 to 9999) in UTC included, is ArgumentTypeError: argparse's one usage line, exit 2."""
    from datetime import UTC

    shown = repr(text[:60])  # escaped, then clipped: any text gives a short line
    shown = shown if len(shown) <= 60 and len(text) <= 60 else shown[:56] + "..."
    try:
        at = datetime.fromisoformat(text.strip())
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC
        raise argparse.ArgumentTypeError(f"invalid date {shown}: out of the years 1 to 9999 once in UTC") from None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid date {shown}: give an ISO 8601 date or date and time (2026-11-30, 2026-11-30T08:00Z)"
        ) from None


def register(commands: Commands) -> None:
    sinks = commands.add_parser(
        "sinks",
        description="See and steer the sinks, where new items are handed on.",
        help="the sinks (where new items are handed on): list, status, pause, resume, replay, forget",
    )
    verbs = sinks.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser(
        "list",
        description="List the configured sinks, and those the database knows but SINKS lost.",
        help="the configured sinks (kind, host, batch, concurrency, services; secrets masked) and the ones "
        "the database knows that are no longer configured",
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status = verbs.add_parser(
        "status",
        description="Show each sink's backlog, lag, deliveries, dead letters and failures.",
        help="per sink: backlog, lag, delivered, dead letters, failures by kind, paused or stopped, backfill; the "
        "service lease and the items not yet queued",
    )
    status.add_argument("name", nargs="?", metavar="NAME", help="only this sink, with its newest dead letters")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pausing = verbs.add_parser(
        "pause",
        description="Stop delivering to a sink until it is resumed (items keep queueing).",
        help="stop delivering to a sink until resumed (items keep queueing)",
    )
    pausing.add_argument("name", metavar="NAME")
    pausing.add_argument("--reason", default="", help="why, shown by sinks status and status --check")
    resuming = verbs.add_parser(
        "resume",
        description="Deliver to a sink again, after a pause or refused credentials.",
        help="deliver to a sink again: lifts a pause, and a stop after its credentials were refused",
    )
    resuming.add_argument("name", metavar="NAME")
    replaying = verbs.add_parser(
        "replay",
        description="Queue a sink's items again from a date, at its pace.",
        help="queue a sink's items again from a date (at its pace): after the destination lost them",
    )
    replaying.add_argument("name", metavar="NAME")
    replaying.add_argument(
        "--since",
        type=since_arg,
        required=True,
        metavar="DATE",
        help="ISO 8601 date or date and time (UTC unless given)",
    )
    forgetting = verbs.add_parser(
        "forget",
        description="Forget a sink removed from SINKS: its document and its queue.",
        help="a sink removed from SINKS on purpose: delete its document and queue entries (dead letters kept), so "
        "the sink service queues new items again without it",
    )
    forgetting.add_argument("name", metavar="NAME")
    forgetting.set_defaults(handler=forget)
    listing.set_defaults(handler=list_sinks)
    status.set_defaults(handler=show_status)
    pausing.set_defaults(handler=pause)
    resuming.set_defaults(handler=resume)
    replaying.set_defaults(handler=replay)


def known_or_say(db: Any, settings: Settings, name: str) -> bool:
    """Whether `name` is a sink the settings configure or the database knows; if not, one line says so."""
    from ..ops import sinks

    names = sinks.known(db, settings.sinks)
    if name in names:
        return True
    listed = ", ".join(sorted(printable(n) for n in names)) or "none"
    complain(printable(f"no sink {name!r} (configured or known: {listed})"))
    return False


@on_database
def list_sinks(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..daemon.sinkprocess import configured, error_line
    from ..ops import sinks, sinksview
    from ..settings import SettingsError
    from ..sinks.registry import SinkRegistry

    registry = SinkRegistry()
    try:
        configs = configured(settings, registry)
    except SettingsError as exc:
        complain(error_line(exc))
        return EXIT_USAGE
    listing = sinks.listing(db, configs, secret_options(registry, configs))
    print(dumps(listing) if args.json else sinksview.render_list(listing))
    return EXIT_OK


def secret_options(registry: Any, configs: list[Any]) -> dict[str, list[str]]:
    """Per kind, the names of its options declared secret."""
    out: dict[str, list[str]] = {}
    for config in configs:
        try:
            out[config.kind] = [o.name for o in registry.options(config.kind) if o.secret]
        except (LookupError, RuntimeError):  # a kind that cannot be loaded: its options are masked by name
            continue
    return out


@on_database
def show_status(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import sinks, sinksview
    from ..sdk.timeutil import utcnow

    if args.name is not None and not known_or_say(db, settings, args.name):
        return EXIT_NO
    report = sinks.gather(db, utcnow(), settings.sinks)
    if args.name is not None:  # one sink: with its newest dead letters
        report["sinks"] = [r for r in report["sinks"] if r["name"] == printable(args.name)]
        for row in report["sinks"]:
            row["recentDeadLetters"] = sinks.recent_dead_letters(db, args.name)
    print(dumps(report) if args.json else sinksview.render_status(report))
    return EXIT_OK


@on_database
def pause(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import sinks
    from ..sdk.timeutil import utcnow

    if not known_or_say(db, settings, args.name):
        return EXIT_NO
    done, line = sinks.pause(db, args.name, args.reason, utcnow())
    print(line)
    return EXIT_OK if done else EXIT_NO


@on_database
def resume(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import sinks
    from ..sdk.timeutil import utcnow

    if not known_or_say(db, settings, args.name):
        return EXIT_NO
    done, line = sinks.resume(db, args.name, utcnow())
    print(line)
    return EXIT_OK if done else EXIT_NO


@on_database
def replay(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import sinks
    from ..sdk.timeutil import utcnow

    now = utcnow()
    if args.since > now:
        complain(f"--since {args.since:%Y-%m-%d %H:%M:%S} UTC is in the future: nothing to replay")
        return EXIT_USAGE
    if not known_or_say(db, settings, args.name):
        return EXIT_NO
    if args.name not in settings.sinks:
        complain(printable(f"sink {args.name!r} is no longer configured (SINKS): nothing would deliver a replay"))
        return EXIT_NO
    done, line = sinks.replay(db, args.name, args.since, now)
    print(line)
    return EXIT_OK if done else EXIT_NO


@on_database
def forget(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import sinks
    from ..sdk.timeutil import utcnow

    if not known_or_say(db, settings, args.name):
        return EXIT_NO
    if args.name in settings.sinks:
        complain(printable(f"sink {args.name!r} is configured (SINKS names it): forget is for a sink removed from it"))
        return EXIT_NO
    done, line = sinks.forget(db, args.name, utcnow())
    print(line)
    return EXIT_OK if done else EXIT_NO
