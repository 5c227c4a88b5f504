"""What the commands share: the database a command works on (`on_database`: connected for it, exit 3 when MongoDB
cannot be reached), the output (`complain` on standard error; text escaped by textout.printable, JSON strict and
ASCII by jsonout.dumps) and the argument types more than one command takes. The exit codes are exitcodes.py's.
The engine's store and pymongo are imported when a command runs, so that the parser is built without them."""

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


def complain(message: str) -> None:
    """One line on standard error, as every command says what went wrong."""
    print(f"collector: {message}", file=sys.stderr)


def database(settings: Settings) -> Any:
    """The settings' database. The client connects on first use: an unreachable server fails the first query."""
    from ..engine.store import connect

    return connect(settings).get_default_database(DATABASE)


def database_error(exc: Exception, settings: Settings, doing: str = "reach") -> int:
    """Say that MongoDB cannot be reached (or read), its URI's secrets masked; exit 3."""
    from ..engine.store import short_error

    complain(f"cannot {doing} MongoDB: {short_error(exc, settings)}")
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


def seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not 0 < value <= 366 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not from 0 to 366 days in seconds")
    return value
