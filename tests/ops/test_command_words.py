"""What the commands say of themselves: every command's `--help` opens with one line saying what it does (as git's
and gh's do); a command whose MongoDB answers says nothing about it; one that answers but refuses is named with
its URI and where MONGODB_URI came from, without the advice meant for a server that is not there."""

from __future__ import annotations

import argparse
import os
import subprocess

import pytest

from collector import cli
from collector.engine import store

from helpers.proc import collector_cmd


def parsers(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(the words of the command line, its parser) of the top level and of every command and verb under it."""
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*words, name))


def test_every_commands_help_opens_with_one_line_saying_what_it_does():
    found = dict(parsers(cli.build_parser()))
    assert {("status",), ("sinks", "replay"), ("networks", "reset"), ("jobs", "run"), ("pause",)} <= set(found)
    assert len(found) >= 26  # the walk reaches every verb
    summaries = set()
    for words, parser in found.items():
        lines = parser.format_help().splitlines()
        first = lines[0]
        assert first == parser.description, words  # written for it, not generated
        assert first[0].isupper() and first.endswith(".") and len(first) <= 79, (words, first)
        assert lines[1] == "" and lines[2].startswith(f"usage: collector {' '.join(words)}".rstrip()), (words, lines)
        summaries.add(first)
    assert len(summaries) == len(found)  # each says what it does, not what another does


@pytest.mark.parametrize(
    ("argv", "first"),
    [
        (["status", "--help"], "Show what the collectors are doing, read from MongoDB."),
        (["sinks", "pause", "--help"], "Stop delivering to a sink until it is resumed (items keep queueing)."),
        (["--help"], "Collect likes, stars and favourites into MongoDB (likeastore-compatible)."),
    ],
)
def test_the_first_line_a_person_sees(tmp_path, argv, first):
    result = subprocess.run(
        collector_cmd(*argv),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "COLUMNS": "60"},
    )
    assert result.returncode == 0 and result.stdout.splitlines()[0] == first, result


@pytest.mark.parametrize(
    "argv", [["networks", "list"], ["status"], ["status", "--json"], ["jobs", "list"], ["sinks", "status"], ["pause"]]
)
def test_a_database_that_answers_at_once_is_not_talked_about(cli_db, capsys, argv):
    assert cli.main(argv) == 0
    assert "MongoDB" not in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["networks", "list"], ["sinks", "status"], ["status"]])
def test_a_database_that_answers_but_refuses_is_named_without_the_advice_for_one_away(
    monkeypatch, tmp_path, capsys, argv
):
    from pymongo.errors import OperationFailure

    class Refusing:
        def __init__(self, uri, **options):
            pass

        def get_default_database(self, name):
            return self

        def __getattr__(self, name):
            raise OperationFailure("Authentication failed.", code=18)

        def __getitem__(self, name):
            raise OperationFailure("Authentication failed.", code=18)

    monkeypatch.setattr(store, "MongoClient", Refusing)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("MONGODB_URI", "mongodb://ops:wrong-pw-31@db.example:27017/fleet")
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    tried = "MongoDB at mongodb://ops:***@db.example:27017/fleet (MONGODB_URI: set in the environment)"
    assert err.startswith("collector: cannot ") and f" {tried}: Authentication failed." in err, err
    assert err.count("\n") == 1 and "start MongoDB" not in err and "wrong-pw-31" not in err
