"""What the commands share: the database a command works on (`on_database`: connected for it; the wait said on
standard error when MongoDB does not answer at once, exit 3 within seconds, one line naming MONGODB_URI), the
output (`complain` on standard error; text escaped by textout.printable, JSON strict and ASCII by jsonout.dumps),
the parser every command's is (`Parser`: its help opens with what it does) and the argument types more than one
command takes. The exit codes are exitcodes.py's. The engine's store and pymongo are imported when a command runs,
so that the parser is built without them."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

from ..exitcodes import EXIT_DATABASE
from ..jsonout import dumps
from ..settings import Settings
from ..textout import printable

__all__ = [
    "Commands",
    "Parser",
    "Handler",
    "complain",
    "database",
    "database_error",
    "dumps",
    "on_database",
    "printable",
    "seconds_arg",
]

Commands = argparse._SubParsersAction  # the top-level parser's sub-parsers, which a module's `register` adds to
Handler = Callable[[argparse.Namespace, Settings], int]  # a command: its arguments and the settings -> exit code
DATABASE = "likeastore"  # the database when MONGODB_URI names none
OPERATOR_SELECTION_MS = 3_000  # an operator's command gives up on a MongoDB that does not answer after 3 s more
NOTICE_AFTER = 0.5  # seconds: a MongoDB that has not answered by then is waited for aloud


class Parser(argparse.ArgumentParser):
    """Every command's parser (its sub-commands' too: argparse makes them of their parent's class): its help opens
    with its description, one line saying what the command does (as git's and gh's do), then the usage, the
    options and the epilog."""

    def format_help(self) -> str:
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        for group in self._action_groups:
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(group._group_actions)
            formatter.end_section()
        formatter.add_text(self.epilog)
        text = formatter.format_help()
        return f"{self.description}\n\n{text}" if self.description else text


def complain(message: str) -> None:
    """One line on standard error, as every command says what went wrong."""
    print(f"collector: {message}", file=sys.stderr)


def database(settings: Settings) -> Any:
    """The settings' database, MongoDB asked first whether it answers (`ping`). When it has not within NOTICE_AFTER
    seconds, that is said on standard error — `waiting for MongoDB at <URI> (where MONGODB_URI came from)` — and the
    command goes on: its first query waits up to OPERATOR_SELECTION_MS for a server (the URI's own
    serverSelectionTimeoutMS wins), then fails (`database_error`). A server that answers at once: nothing said."""
    import pymongo
    from pymongo.errors import ConnectionFailure

    from ..engine.store import connect

    db = connect(settings, OPERATOR_SELECTION_MS).get_default_database(DATABASE)
    try:
        with pymongo.timeout(NOTICE_AFTER):
            db.command("ping")
    except ConnectionFailure:
        complain(f"waiting for MongoDB at {settings.mongodb_shown()}")
    return db


def database_error(exc: Exception, settings: Settings, doing: str = "use") -> int:
    """Say in one line that MongoDB cannot be reached (or read): at which URI (secrets masked), where MONGODB_URI
    came from, why, and what to do; exit 3."""
    from ..engine.store import database_problem

    complain(database_problem(exc, settings, doing))
    return EXIT_DATABASE


def on_database(work: Callable[[argparse.Namespace, Settings, Any], int]) -> Handler:
    """A command that works on the database: `work(args, settings, db)`; a MongoDB error on the way (connecting,
    reading or writing) ends it with exit 3, said on standard error."""

    @functools.wraps(work)
    def handler(args: argparse.Namespace, settings: Settings) -> int:
        from pymongo.errors import PyMongoError

        try:
            return work(args, settings, database(settings))
        except PyMongoError as exc:
            return database_error(exc, settings)

    return handler


def wait_arg(text: str) -> float:
    """Seconds to wait, 0 (not at all) to an hour."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not from 0 to 3600 seconds")
    return value


def seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not 0 < value <= 366 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not from 0 to 366 days in seconds")
    return value
