"""The command line's shape, kept by tests: one module per command or command group under collector/cli/, each
registering exactly its own commands with handlers of its own; nothing but the package (and `python -m collector`)
imports it; and the parser is built without the engine, the daemon, the dev tools' machinery or pymongo (each
command loads what it needs when it runs)."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

from collector import cli

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "collector" / "cli"
SHARED = {"__init__", "__main__", "common"}  # the assembly, `python -m`, the helpers: no command of their own
COMMANDS_OF = {  # module -> the commands it registers (daemon.py: the top-level flags, run when no command is given)
    "daemon": set(),
    "demo": {"demo"},
    "connectors": {"connectors"},
    "status": {"status"},
    "health": {"healthcheck"},
    "pauses": {"pause", "resume"},
    "jobs": {"jobs"},
    "networks": {"networks"},
    "users": {"users"},
    "connect": {"connect"},
    "sink": {"sink"},
    "sinks": {"sinks"},
    "monitor": {"monitor"},
    "bench": {"bench"},
}
# what a cli module may import when it is loaded (the rest inside its handlers): the kernel, the settings, the
# operator tools' package (its words, not its queries) and the bench's plain options
AT_IMPORT = (
    "collector.cli",
    "collector.settings",
    "collector.exitcodes",
    "collector.modes",
    "collector.jsonout",
    "collector.textout",
    "collector.devtools.options",
)
AT_IMPORT_EXACT = {"collector", "collector.__version__", "collector.ops", "collector.ops.STATES"}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def handlers(parser: argparse.ArgumentParser, inherited: object = None) -> dict[tuple[str, ...], object]:
    """The handler each complete command line reaches, by its words (a verb's default wins over its group's)."""
    own = parser._defaults.get("handler", inherited)
    subs = subparsers(parser)
    if not subs:
        return {(): own}
    return {(name, *path): h for name, sub in subs.items() for path, h in handlers(sub, own).items()}


def module_of(handler: object) -> str:
    func = getattr(handler, "func", handler)  # a functools.partial (the daemon's, bound to its parser)
    return str(getattr(func, "__module__", ""))


def command_modules() -> set[str]:
    return {p.stem for p in CLI.glob("*.py")} - SHARED


def test_every_command_module_registers_exactly_its_commands_with_handlers_of_its_own():
    assert command_modules() == set(COMMANDS_OF)
    for name, commands in COMMANDS_OF.items():
        module = importlib.import_module(f"collector.cli.{name}")
        parser = argparse.ArgumentParser(prog="probe")
        if name == "daemon":
            module.register(parser)
            assert subparsers(parser) == {}
        else:
            module.register(parser.add_subparsers(dest="command"))
            assert set(subparsers(parser)) == commands, name
        for path, handler in handlers(parser).items():
            if path or name == "daemon":
                assert callable(handler) and module_of(handler) == module.__name__, (name, path, handler)


def test_the_parser_is_assembled_from_the_modules_and_every_command_line_has_a_handler():
    parser = cli.build_parser()
    registered = [c for commands in COMMANDS_OF.values() for c in commands]
    assert sorted(subparsers(parser)) == sorted(registered)  # each command from one module, none from elsewhere
    assert module_of(parser._defaults["handler"]) == "collector.cli.daemon"  # no command: the daemon
    reached = handlers(parser)
    for path, handler in reached.items():
        assert callable(handler), path
        assert module_of(handler) in {f"collector.cli.{m}" for m in COMMANDS_OF}, (path, handler)
    assert ("networks", "run") in reached and ("jobs", "list") in reached and ("pause",) in reached


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The absolute names a file imports (relative imports resolved, `from x import y` as x and x.y)."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in tree.body if top_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


def test_nothing_outside_the_cli_package_imports_it():
    outside = [p for p in (ROOT / "collector").rglob("*.py") if CLI not in p.parents]
    outside += list((ROOT / "connectors").rglob("*.py"))
    for path in outside:
        if path == ROOT / "collector" / "__main__.py":
            assert "collector.cli.main" in imports(path)
            continue
        names = imports(path)
        assert not any(n == "collector.cli" or n.startswith("collector.cli.") for n in names), path


def test_a_cli_module_loads_the_engine_the_daemon_and_the_dev_tools_only_when_a_command_runs():
    for path in sorted(CLI.glob("*.py")):
        for name in imports(path, top_level_only=True):
            if name.split(".")[0] != "collector":
                continue
            allowed = name in AT_IMPORT_EXACT or any(name == a or name.startswith(a + ".") for a in AT_IMPORT)
            assert allowed, f"cli/{path.name} imports {name} when loaded"


def test_building_the_parser_loads_no_engine_daemon_dev_tool_or_database_driver():
    """In a fresh interpreter: what `build_parser` loads beyond what `import collector` itself loads."""
    script = (
        "import json, sys\nimport collector\nbefore = set(sys.modules)\nfrom collector import cli\n"
        "cli.build_parser()\nprint(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    heavy = [
        m
        for m in loaded
        if m.split(".")[0] in ("pymongo", "mongomock", "requests", "multiprocessing")
        or m.startswith(("collector.engine", "collector.daemon", "collector.sdk", "collector.testing"))
        or (m.startswith("collector.devtools.") and m != "collector.devtools.options")
        or (m.startswith("collector.ops.") and m != "collector.ops")
    ]
    assert heavy == []
    assert "collector.cli.networks" in loaded and "collector.cli.daemon" in loaded


def test_the_states_the_parser_offers_are_the_ones_the_operator_tools_filter_by():
    from datetime import UTC, datetime

    from collector.ops import STATES
    from collector.ops.networks import state_filter

    listing = subparsers(subparsers(cli.build_parser())["networks"])["list"]
    (state,) = [a for a in listing._actions if a.dest == "state"]
    assert tuple(state.choices or ()) == STATES
    for word in STATES:
        assert isinstance(state_filter(word, datetime.now(UTC)), dict)
