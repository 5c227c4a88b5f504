"""`collector connectors`: the registered connectors, built-in or third-party (engine/registry.py)."""

from __future__ import annotations

import argparse

from ..settings import Settings
from .common import Commands


def register(commands: Commands) -> None:
    connectors = commands.add_parser(
        "connectors",
        description="List the registered connectors, built-in or third-party.",
        help="list the registered connectors, built-in or third-party",
    )
    connectors.set_defaults(handler=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ..engine.registry import Registry

    registry = Registry()
    for name in registry.names():
        print(f"{name}\t{'built-in' if registry.is_builtin(name) else 'third-party'}")
    return 0
