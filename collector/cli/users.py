"""`collector users delete|export`: what a person leaving, or asking for their data, needs. Exit codes as the
networks commands': 0 done, 1 no such person or a network a collector runs now (nothing deleted), 3 MongoDB
unreachable. The rules are ops/users.py's."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..exitcodes import EXIT_NO, EXIT_OK
from ..settings import Settings
from .common import Commands, dumps, printable, wait_arg
from .networks import on_networks


def register(commands: Commands) -> None:
    users = commands.add_parser(
        "users",
        description="Delete or export a person's networks and items (in MongoDB).",
        help="delete or export a person's networks and items",
    )
    verbs = users.add_subparsers(dest="verb", metavar="VERB", required=True)
    deleting = verbs.add_parser(
        "delete",
        description="Delete a person's networks and, with --items, their items.",
        help="delete a person's networks (and with --items their items)",
    )
    deleting.add_argument("email", metavar="EMAIL")
    deleting.add_argument("--items", action="store_true", help="delete the items collected for them too")
    deleting.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
    deleting.add_argument(
        "--wait",
        type=wait_arg,
        default=60.0,
        metavar="SECONDS",
        help="wait up to this long for a collector running one of them to finish and let go (0: refuse at once)",
    )
    exporting = verbs.add_parser(
        "export",
        description="Print a person's networks (secrets masked) and items as JSON Lines.",
        help="a person's networks (secrets masked) and items as JSON Lines on standard output",
    )
    exporting.add_argument("email", metavar="EMAIL")
    deleting.set_defaults(handler=delete_user)
    exporting.set_defaults(handler=export_user)


@on_networks
def delete_user(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`users delete`: a line per network, then the items; exit 1 when a collector took one meanwhile."""
    from ..ops.users import Patience
    from ..ops.users import delete_user as delete
    from ..sdk.timeutil import utcnow

    patience = Patience(args.wait)
    done = delete(
        db, args.email, items=args.items, dry_run=args.dry_run, now=utcnow(), lease_seconds=settings.lease_seconds,
        patience=patience,
    )  # fmt: skip
    verb = "would delete" if args.dry_run else "deleted"
    for line in done.networks:
        print(printable(f"{verb} network {line}"))
    for line in done.refused:
        print(printable(line))
    if args.items and not done.refused:
        print(f"{verb} {done.items:,} items")
    else:
        print(f"{done.items:,} items kept" + ("" if args.items else " (--items deletes them)"))
    if args.dry_run:
        print("(dry run: nothing changed)")
    return EXIT_NO if done.refused else EXIT_OK


@on_networks
def export_user(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`users export`: one JSON object per line (strict, ASCII), networks first."""
    from ..ops.users import export_user as export

    write = sys.stdout.write
    for record in export(db, args.email):
        write(dumps(record, indent=None) + "\n")
    return EXIT_OK
