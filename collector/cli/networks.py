"""`collector networks list|show|enable|run|reset|reseal|add|remove`: what they print and the exit code each returns — 0
done, 1 a bad id, no such network, one left alone because a collector holds it, or a network that cannot be added
(ops/accounts.py: its one line), 2 a query given as an id (a document with `$` keys, a regular expression:
ops/ids.py), 3 MongoDB unreachable. The queries and rules are the operator tools' (ops/networks.py,
ops/accounts.py, ops/users.py); `run` is the engine's own run of one network."""

from __future__ import annotations

import argparse
import functools
import socket
import sys
from collections.abc import Callable
from typing import Any

from ..exitcodes import EXIT_NO, EXIT_OK, EXIT_USAGE
from ..ops import STATES
from ..settings import Settings
from .common import Commands, Handler, complain, dumps, on_database, printable, wait_arg


def limit_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid limit {text!r}: give a whole number, 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid limit {value}: give 1 or more")
    return value


def register(commands: Commands) -> None:
    networks = commands.add_parser(
        "networks",
        description="List, show, re-enable, run, reset, add or remove networks (in MongoDB).",
        help="list, show, re-enable, run, reset, add or remove networks (reads and writes MongoDB)",
    )
    verbs = networks.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser(
        "list",
        description="List the networks, one line each: id, user, service, mode, state, next run.",
        help="one line per network: id, user, service, mode, state, errors, next run",
    )
    listing.add_argument("--service")
    listing.add_argument("--user", metavar="EMAIL")
    listing.add_argument("--state", choices=STATES)
    listing.add_argument("--limit", type=limit_arg, default=50, help="at most this many lines, 1 or more (50)")
    listing.add_argument("--json", action="store_true")
    show = verbs.add_parser(
        "show",
        description="Show every field of a network, or of a user's networks (secrets masked).",
        help="every field of a network (or of a user's networks), secrets masked",
    )
    show.add_argument("key", metavar="ID|EMAIL")
    enabling = verbs.add_parser(
        "enable",
        description="Re-enable networks: clear their errors and schedule them now.",
        help="clear disabled, errors and lastError and schedule now (unauthorized stays unless --force)",
    )
    enabling.add_argument("ids", nargs="*", metavar="ID")
    enabling.add_argument("--service", help="every disabled or erroring network of this service")
    enabling.add_argument("--kind", help="with --service: only those whose lastError.kind is this")
    enabling.add_argument("--force", action="store_true", help="clear unauthorized too")
    enabling.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    running = verbs.add_parser(
        "run",
        description="Run one network now in the foreground, printing requests, items and state.",
        help="run one network now in the foreground with the daemon's code, printing requests, items, state",
    )
    running.add_argument("id", metavar="ID")
    running.add_argument(
        "--dry-run", action="store_true", help="call the API but write nothing (tokens a refresh obtains are kept)"
    )
    resetting = verbs.add_parser(
        "reset",
        description="Send networks back to the start of their history (items kept).",
        help="back to initial mode from the start of the history (items kept)",
    )
    resetting.add_argument("ids", nargs="+", metavar="ID")
    resetting.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    resealing = verbs.add_parser(
        "reseal",
        description="Seal every token with TOKEN_KEY: plain ones, and those an old key sealed.",
        help="seal every token with TOKEN_KEY, moving those of TOKEN_KEYS_OLD (tokens never printed)",
    )
    resealing.add_argument("--service", help="only this service's networks")
    resealing.add_argument("--dry-run", action="store_true", help="count what would change, change nothing")
    adding, removing = register_accounts(verbs)
    for verb, handler in (
        (adding, add_network),
        (removing, remove_network),
        (listing, list_networks),
        (show, show_networks),
        (enabling, change_networks),
        (running, run_network),
        (resetting, change_networks),
        (resealing, reseal_networks),
    ):
        verb.set_defaults(handler=handler)


def register_accounts(verbs: Any) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`networks add` and `networks remove`: the verbs of a person's accounts (ops/accounts.py)."""
    adding = verbs.add_parser(
        "add",
        description="Add a network: its token read from standard input, checked with the service.",
        help="add a network: credentials from standard input or --from-file, checked with the service",
        epilog="Standard input (or the file): the access token alone on a line, other fields as NAME=value lines "
        "(refreshToken=..., accessTokenSecret=..., instanceUrl=https://...), or one JSON object of strings. "
        "`collector connectors` lists the services; docs/operating.md the fields each takes.",
    )
    adding.add_argument("--user", required=True, metavar="EMAIL", help="the person's email (the networks' user)")
    adding.add_argument("--service", required=True, metavar="NAME", help="the service (github, mastodon, ...)")
    adding.add_argument("--from-file", metavar="PATH", help="read the credentials from this file, not standard input")
    adding.add_argument(
        "--replace", action="store_true", help="give an existing network of this user and service these credentials"
    )
    removing = verbs.add_parser(
        "remove",
        description="Remove a network (its items are kept).",
        help="delete a network (items kept; one a collector runs is waited for, then deleted)",
    )
    removing.add_argument("id", metavar="ID")
    removing.add_argument(
        "--wait",
        type=wait_arg,
        default=60.0,
        metavar="SECONDS",
        help="wait up to this long for a collector running it to finish and let go (0: refuse at once)",
    )
    return adding, removing


def on_networks(work: Callable[[argparse.Namespace, Settings, Any], int]) -> Handler:
    """A networks command: on the database (exit 3 when it cannot be reached), and a bad id or a network not
    found (ops/ids.py `AdminError`) is exit 1, a query given as an id (`NotAnId`) exit 2, said on standard
    error."""

    @on_database
    @functools.wraps(work)
    def handler(args: argparse.Namespace, settings: Settings, db: Any) -> int:
        from ..ops.ids import AdminError, NotAnId

        try:
            return work(args, settings, db)
        except NotAnId as exc:
            complain(printable(str(exc)))
            return EXIT_USAGE
        except AdminError as exc:
            complain(printable(str(exc)))
            return EXIT_NO

    return handler


@on_networks
def list_networks(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`networks list`: the rows, and a line saying so when --limit cut the list."""
    from ..ops import networks as admin
    from ..sdk.timeutil import utcnow

    now = utcnow()
    lease = settings.lease_seconds
    rows = admin.list_networks(db, now, args.service, args.user, args.state, args.limit, lease)
    total = (
        admin.count_networks(db, now, args.service, args.user, args.state, lease)
        if len(rows) >= args.limit
        else len(rows)
    )
    print(dumps(rows) if args.json else admin.render_rows(rows, now))
    if total > len(rows):
        note = f"{len(rows):,} of {total:,} shown; use --limit"
        print(note, file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK


@on_networks
def show_networks(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`networks show`: every field of the network (or of the user's networks) as JSON, secrets masked."""
    from ..ops import networks as admin
    from ..sdk.timeutil import utcnow

    now = utcnow()
    for network in admin.find(db, args.key):
        print(dumps(admin.shown(network, now, settings.lease_seconds)))
    return EXIT_OK


@on_networks
def change_networks(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`networks enable` and `networks reset`: a line per network; exit 1 when a collector held one of them."""
    from ..ops import networks as admin
    from ..sdk.timeutil import utcnow

    now = utcnow()
    if args.verb == "enable":
        lines = admin.enable(db, now, args.ids, args.service, args.kind, args.force, args.dry_run)
    else:
        lines = admin.reset(db, now, args.ids, args.dry_run)
    print("\n".join(printable(line) for line in lines) if lines else f"no network to {args.verb}")
    if args.dry_run:
        print("(dry run: nothing changed)")
    return EXIT_NO if lines.refused else EXIT_OK


@on_networks
def reseal_networks(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`networks reseal`: a line per token that cannot be opened, then the counts; exit 2 without any key, 1 when
    something was left as it is (a network a collector held, a token no key opens)."""
    from ..engine.store.sealing import Keys
    from ..ops import reseal as tokens
    from ..sdk.timeutil import utcnow

    keys = Keys.from_settings(settings)
    if not keys:
        complain("TOKEN_KEY is not set, nor TOKEN_KEYS_OLD: there is no key to seal or open tokens with")
        return EXIT_USAGE
    tally = tokens.reseal(db, keys, utcnow(), args.service, args.dry_run)
    print("\n".join(tokens.render(tally, keys, args.dry_run)))
    if args.dry_run:
        print("(dry run: nothing changed)")
    return EXIT_OK if tally.complete else EXIT_NO


@on_networks
def run_network(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`networks run`: the network's requests as they happen, then its items and state change; exit 1 when the
    run failed."""
    from ..engine import Collector
    from ..ops.ids import AdminError, parse_id
    from ..sdk.http import Http, where
    from ..sdk.timeutil import utcnow

    now, network_id = utcnow(), parse_id(args.id)  # a query given as an id: refused before anything is made

    def show(response: Any, *_: Any, **__: Any) -> None:
        ms = response.elapsed.total_seconds() * 1000
        print(printable(f"  {response.request.method} {where(response.url)} -> {response.status_code} ({ms:.0f} ms)"))

    http = Http(settings, pool_size=10)  # as the Collector would make it, with each exchange shown
    http.session.hooks["response"].append(show)
    collector = Collector(
        db,
        settings,
        http=http,
        instance_id=f"{socket.gethostname()}-manual",
        concurrency=1,
        ensure_indexes=not args.dry_run,
    )
    try:
        result, saved = collector.run_one(network_id, now, dry_run=args.dry_run)
    except LookupError as exc:
        raise AdminError(str(exc)) from None
    finally:
        collector.close()
    print_run(result, saved)
    return EXIT_OK if result.error is None else EXIT_NO


def print_run(result: Any, saved: Any) -> None:
    """What a run did: its status (and error, secrets masked), its first items, its state change, what was saved."""
    from ..ops.networks import masked
    from ..sdk.redaction import clip, redact

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


@on_networks
def add_network(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`networks add`: the credentials read (bounded), checked with the service, the network written; one line."""
    from ..ops import accounts
    from ..ops.ids import format_id
    from ..sdk.timeutil import utcnow

    names = [f.name for f in accounts.connector_class(args.service).credential_fields()]
    credentials = read_credentials(args.from_file, names)
    added = accounts.add_network(
        db,
        user=args.user,
        service=args.service,
        credentials=credentials,
        replace=args.replace,
        now=utcnow(),
        settings=settings,
        lease_seconds=settings.lease_seconds,
    )
    done = "gave network" if added.replaced else "added network"
    tail = " its new credentials" if added.replaced else ""
    print(
        printable(
            f"{done} {format_id(added.network_id)}{tail}: {args.service} account {added.account} "
            f"for {args.user}, due now"
        )
    )
    if added.note:
        print(printable(f"note: {added.note}"))
    return EXIT_OK


def read_credentials(path: str | None, names: list[str]) -> dict[str, str]:
    """The credentials from the file at `path`, or standard input (bounded reads: ops/credentials.py)."""
    from ..ops.accounts import AccountError
    from ..ops.credentials import parse_credentials, read_bounded

    if path is None:
        if sys.stdin.isatty():
            complain(f"reading {', '.join(names)} from standard input (the token alone, or NAME=value lines; Ctrl-D)")
        return parse_credentials(read_bounded(sys.stdin.buffer, "standard input"), names)
    what = f"file {printable(path)}"
    try:
        with open(path, "rb") as stream:
            data = read_bounded(stream, what)
    except OSError as exc:
        raise AccountError(f"cannot read {what}: {printable(exc.strerror or type(exc).__name__)}") from None
    return parse_credentials(data, names, what)


@on_networks
def remove_network(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """`networks remove`: the network deleted (items kept), or why not."""
    from ..ops.users import Patience
    from ..ops.users import remove_network as remove
    from ..sdk.timeutil import utcnow

    patience = Patience(args.wait)
    print(printable(remove(db, args.id, now=utcnow(), lease_seconds=settings.lease_seconds, patience=patience)))
    return EXIT_OK
