"""`collector connect SERVICE --user EMAIL`: run the authorisation flow the service offers (collector/connect/) and
write the network it authorised (collector.ops.accounts): a new one, or the renewal of one that waits for
re-authorisation. Exit codes: 0 connected; 1 the flow failed (denied, expired, a state mismatch, another account,
the service unreachable or its answer unreadable) or the network was refused; 2 usage or the application's
settings missing; 3 MongoDB unreachable."""

from __future__ import annotations

import argparse
import getpass
import select
import sys
from typing import Any

from ..exitcodes import EXIT_NO, EXIT_OK, EXIT_USAGE
from ..settings import Settings
from .common import Commands, complain, on_database, printable, seconds_arg


def register(commands: Commands) -> None:
    from ..connect.apps import APPS, DEFAULT_TIMEOUT, FLOW_WORDS

    parser = commands.add_parser(
        "connect",
        description="Connect a person's account through the service's authorisation flow.",
        help="connect a person's account through the service's authorisation flow (or renew an unauthorised one)",
        epilog="Flows: "
        + "; ".join(f"{name}: {FLOW_WORDS[app.flow]}" for name, app in APPS.items())
        + ". The settings each needs and the headless way: docs/connecting.md.",
    )
    parser.add_argument("service", metavar="SERVICE", choices=sorted(APPS), help=", ".join(sorted(APPS)))
    parser.add_argument("--user", metavar="EMAIL", required=True, help="the person the network belongs to")
    parser.add_argument(
        "--no-browser",
        action="store_true",
        help="open no browser: print the address to open on any machine, then read back the address it ended on",
    )
    parser.add_argument(
        "--timeout",
        type=seconds_arg,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long the flow waits for the person ({DEFAULT_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--port",
        type=port_arg,
        default=0,
        help="the 127.0.0.1 redirect's port (0: any free one; a service's redirect setting, such as "
        "SPOTIFY_REDIRECT_URI, wins)",
    )
    parser.add_argument("--instance", metavar="URL", default="", help="mastodon: the instance, https://HOST")
    parser.add_argument("--handle", default="", help="bluesky: the account's handle (the app password is read)")
    parser.add_argument("--pds", metavar="URL", default="", help="bluesky: the PDS (https://bsky.social)")
    parser.add_argument(
        "--replace", action="store_true", help="authorise again a network that works (the same account)"
    )
    parser.set_defaults(handler=connect)


def port_arg(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: 0 to 65535")
    return int(text)


class Terminal:
    """The person at the terminal: lines on standard output, a browser opened when asked and standard input is a
    terminal, lines read from standard input within a time."""

    def __init__(self, browser: bool):
        self.browser = browser

    def say(self, line: str) -> None:
        print(line, flush=True)

    def browse(self, url: str) -> bool:
        if not (self.browser and sys.stdin.isatty()):
            return False
        import webbrowser

        return webbrowser.open(url)

    def read_line(self, timeout: float) -> str:
        ready, _, _ = select.select([sys.stdin], [], [], max(timeout, 0.0))
        return sys.stdin.readline() if ready else ""

    def read_secret(self, label: str, timeout: float) -> str:
        if sys.stdin.isatty():
            return getpass.getpass(f"{label}: ")
        self.say(f"{label}: reading it from standard input")
        return self.read_line(timeout)


@on_database
def connect(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..connect.account import save, target
    from ..connect.apps import app_for
    from ..connect.errors import ConnectError
    from ..connect.flows import Flow, Options, run_flow
    from ..ops.accounts import AccountError, NotConfiguredError, check_user
    from ..ops.appsecrets import app_keys
    from ..ops.ids import format_id
    from ..sdk import Http
    from ..sdk.redaction import install
    from ..sdk.timeutil import utcnow

    install()  # every log line of the process redacted: the flow's secrets are added as it learns them
    app = app_for(args.service, settings.github_api_url)
    values = {name: settings.get(name) for name in (app.client_id, app.client_secret, app.redirect) if name}
    options = Options(
        args.timeout, not args.no_browser, args.port, args.instance, args.handle, args.pds, settings.allow_private_hosts
    )
    http = Http(settings, pool_size=2)
    try:
        goal = target(db, check_user(args.user), args.service, args.replace)
        if goal.existing is not None:
            why = "it waits for re-authorisation" if goal.existing.get("unauthorized") is True else "--replace"
            print(f"Renewing network {format_id(goal.existing['_id'])}: {why}", flush=True)
        flow = Flow(http, Terminal(options.browser), options, db=db, now=utcnow(), keys=app_keys(settings))
        credentials = run_flow(app, values, flow)
        added = save(db, goal, credentials, settings=settings, http=http, now=utcnow())
    except ConnectError as exc:
        complain(exc.message)
        return exc.exit_code
    except AccountError as exc:
        complain(printable(str(exc)))
        return EXIT_USAGE if isinstance(exc, NotConfiguredError) else EXIT_NO
    finally:
        http.close()
    done = "renewed" if added.replaced else "added"
    print(
        f"Connected {args.service} account {added.account} of {printable(args.user)}: network {added.network_id} {done}"
    )
    if added.note:
        print(printable(added.note))
    return EXIT_OK
