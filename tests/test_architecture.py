"""The shape of the code, kept by tests: the rooms and what each may import (docs/ARCHITECTURE.md, "Rooms"), only
the store writes `networks`, `items` and `quotas`, no import cycle inside collector/, imports run one way
(connectors -> collector.sdk <- engine), the daemon loads no dev tools, and the CLI's flags are not overwritten by
a subcommand's defaults."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGINE_ONLY = (
    "collector.engine.collector",
    "collector.engine.run",
    "collector.engine.store",
    "collector.daemon.process",
    "collector.cli",
    "collector.engine.rules",
    "collector.engine.quota",
    "collector.engine.registry",
)


def imports(path: Path, top_level_only: bool = False, package: str = "", text: str | None = None) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved, from `package` when given); `text`,
    when given, is read as the file's source instead of the file."""
    tree = ast.parse(path.read_text() if text is None else text)
    package = package or ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.If) and top_level_only:  # `if TYPE_CHECKING:` blocks import nothing at run time
            continue
    return found


def ours(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in ("collector", "connectors")}


def test_connectors_import_only_the_sdk():
    for path in sorted((ROOT / "connectors").glob("*.py")):
        for name in ours(imports(path)):
            assert name.startswith(("collector.sdk", "connectors")), f"{path.name} imports {name}"


def test_the_sdk_imports_no_engine_module_and_no_connector():
    for path in sorted((ROOT / "collector" / "sdk").glob("*.py")):
        for name in ours(imports(path)):
            assert name.startswith(("collector.sdk", "collector.net", "collector.settings", "collector.modes")), (
                f"sdk/{path.name} imports {name}"
            )


BUILTIN_SINKS = ROOT / "collector" / "sinks" / "builtin"
SINK_SDK = ("collector.sinks.sdk", "collector.sinks.builtin._common")


def sink_offences(path: Path) -> set[str]:
    """What of the collector a built-in sink imports beyond the sink SDK (and builtin/_common, itself held to it)."""
    return {name for name in ours(imports(path, package="collector.sinks.builtin")) if not name.startswith(SINK_SDK)}


def test_the_builtin_sinks_import_only_the_sink_sdk():
    """docs/sinks.md: a sink imports only collector.sinks.sdk; the built-in ones are held to it as a plugin is."""
    paths = sorted(BUILTIN_SINKS.glob("*.py"))
    assert {p.name for p in paths} >= {"opensearch.py", "typesense.py", "webhook.py", "_common.py"}
    for path in paths:
        assert not sink_offences(path), f"builtin/{path.name} imports {sorted(sink_offences(path))}"


@pytest.mark.parametrize(
    "line",
    [
        "from ..http import answer_failure",
        "from ...sdk._urls import where",
        "import collector.settings",
        "from ...engine import store",
    ],
)
def test_the_builtin_sink_rule_bites(line, tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(f"from ..sdk import Sink\n{line}\n")
    assert sink_offences(path)
    path.write_text("from ..sdk import Sink, answer_failure\nfrom ._common import dumps\nimport orjson\n")
    assert not sink_offences(path)


LANE_STATE = {"ready", "stopped", "paused", "preparing", "halt", "prepare_tries", "prepare_at", "problem", "flights"}


def lane_state_writes(source: str) -> list[str]:
    """Assignments to a sink lane's state (`x.ready = ...`, `a.stopped, a.ready = ...`, `x.paused += ...`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        for target in targets:
            for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                if (
                    isinstance(element, ast.Attribute)
                    and element.attr in LANE_STATE
                    and not (isinstance(element.value, ast.Name) and element.value.id == "self")
                ):
                    found.append(ast.unparse(element))
    return found


def test_only_the_lane_changes_its_state():
    """A sink lane's flags have one owner: lane.py changes them through its methods (follow, stop, reset, cut,
    poll_prepare); the service asks, it does not assign."""
    for path in sorted((ROOT / "collector" / "sinks").rglob("*.py")):
        if path.name != "lane.py":
            assert not lane_state_writes(path.read_text()), f"{path.name} assigns {lane_state_writes(path.read_text())}"


@pytest.mark.parametrize("line", ["lane.ready = True", "lane.stopped, lane.ready = True, False", "other.paused = x"])
def test_the_lane_state_rule_bites(line):
    assert lane_state_writes(line) and not lane_state_writes("self.ready = True\nlane.stop()")


def test_the_engine_reaches_connectors_only_through_the_registry_and_dev_tools_only_lazily():
    for path in sorted(p for p in (ROOT / "collector").rglob("*.py") if room_of(p) not in ("devtools", "testing")):
        for name in ours(imports(path)):
            assert not name.startswith("connectors"), f"{path.name} imports {name}"
        for name in ours(imports(path, top_level_only=True)):
            if name.startswith(("collector.devtools", "collector.testing")):
                assert name.startswith("collector.devtools.options"), f"{path.name} imports {name} at import time"
    import collector  # its lazy names (PEP 562) are the library API, nothing of the dev tools

    engine, settings = ("Collector", "Report", "run_once"), ("Settings", "SettingsError", "load_settings")
    assert collector._LAZY == dict.fromkeys(engine, "collector.engine") | dict.fromkeys(settings, "collector.settings")


def test_dev_tools_and_the_kit_are_not_imported_by_the_engine_or_the_sdk():
    for path in [p for p in ROOT.glob("collector/**/*.py") if room_of(p) not in ("devtools", "testing")]:
        for name in ours(imports(path)):
            if name.startswith("collector.testing"):
                raise AssertionError(f"{path} imports {name}")


@pytest.mark.system
def test_the_daemon_loads_no_mongomock_multiprocessing_or_fake_api():
    script = (
        "import json, sys\nfrom collector import cli\ncode = cli.main(['--mode', 'normal', '--once'])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    env = {**os.environ, "COLLECTOR_ENV": "test", "MONGODB_URI": "mongodb://127.0.0.1:1/x?serverSelectionTimeoutMS=300"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    modules = set(result["modules"])
    assert result["code"] == 3  # MongoDB unreachable (exit 3): it tried for real through the daemon's own path
    assert {"collector.engine.collector", "collector.daemon.process", "pymongo"} <= modules
    loaded = {
        m
        for m in modules
        if m.split(".")[0] in ("mongomock", "multiprocessing")
        or m.startswith(
            ("collector.devtools.fakeapi", "collector.devtools.bench", "collector.devtools.demo", "collector.testing")
        )
    }
    assert loaded == set()


def test_concurrency_given_before_bench_is_not_overwritten(monkeypatch, tmp_path):
    from collector import cli
    from collector.devtools import bench

    runs = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "run", lambda opts: runs.append(opts) or 0)
    cli.main(["--concurrency", "1", "bench", "--networks", "3"])
    cli.main(["bench", "--concurrency", "8"])
    cli.main(["bench"])
    assert [(o.concurrency, o.networks) for o in runs] == [(1, 3), (8, 128), (64, 128)]


def test_an_edit_to_config_in_a_checkout_takes_effect(tmp_path, monkeypatch):
    from collector.settings import config_dir

    assert config_dir() == ROOT / "config"


def test_every_file_and_function_the_architecture_doc_names_exists():
    import re

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    refs = set(re.findall(r"`((?:[a-z]+/)*[a-z_]+\.py):([A-Za-z_.]+)`", text))
    assert len(refs) >= 8
    for path, name in refs:
        source = (ROOT / "collector" / path).read_text()
        last = name.split(".")[-1]
        assert re.search(rf"\b(def|class) {last}\b", source), f"{path}:{name}"


# --- rooms ---------------------------------------------------------------------------------------------------------
KERNEL = (
    "collector.settings",
    "collector.textout",
    "collector.jsonout",
    "collector.exitcodes",
    "collector.modes",
    "collector.lifecycle",
)
ROOMS = {  # room -> the collector modules it may import (prefixes); collector/cli/ may import everything
    "net": ("collector.net", *KERNEL),  # the wire, HTTP/1.1 for the clients and the servers: the kernel only
    "sdk": ("collector.sdk", "collector.net", "collector.settings", "collector.modes"),
    "engine": ("collector.engine", "collector.sdk", *KERNEL),
    "daemon": (  # the sink service's process (daemon/sink*.py) runs collector.sinks
        "collector.daemon",
        "collector.net",
        "collector.engine",
        "collector.sinks",
        "collector.sdk",
        *KERNEL,
        "collector.__version__",
    ),
    "ops": (
        "collector.ops",
        "collector.engine.store",
        "collector.sinks.store",
        "collector.sinks.config",
        "collector.sinks.registry",
        "collector.sinks.sdk",
        "collector.sdk",
        *KERNEL,
    ),
    # the sink service and the sinks: their SDK, the store's `unavailable`; never the daemon, ops, cli, monitor
    "sinks": ("collector.sinks", "collector.net", "collector.sdk", "collector.engine.store", *KERNEL),
    # the web view: the operator's queries and operations (ops), the store's filters, never the engine's running parts;
    # the connect flows (connect), which the page starts with the token as `collector connect` does
    "monitor": (
        "collector.monitor",
        "collector.net",
        "collector.ops",
        "collector.connect",
        "collector.engine.store",
        "collector.sdk",
        *KERNEL,
        "collector.__version__",
    ),
    # the authorisation flows: the wire through the sdk's Http, the operator's accounts (ops) to write what they got
    "connect": ("collector.connect", "collector.ops", "collector.sdk", *KERNEL),
    "kernel": KERNEL,
}
# ops may use the engine's public names, and name the sinks package (`from ..sinks import store`)
OPS_ENGINE_PUBLIC = {"collector.engine", "collector.engine.Collector", "collector.engine.Registry", "collector.sinks"}


def room_of(path: Path) -> str:
    parts = path.relative_to(ROOT / "collector").parts
    if parts[0] == "settings":  # the settings package belongs to the kernel
        return "kernel"
    if len(parts) == 1:
        name = path.stem
        return {"cli": "cli", "__init__": "package", "__main__": "cli"}.get(name, "kernel")
    return parts[0]


def test_every_module_lives_in_a_room_and_imports_only_what_its_room_may():
    check_rooms()


def check_rooms(probes: dict[Path, str] | None = None) -> None:
    """The room rule over every module of collector/, and over `probes` (a path in collector/ and the source it
    would hold: never written, so that no other test, in this process or another, sees it)."""
    probes = probes or {}
    paths = sorted({*(ROOT / "collector").rglob("*.py"), *probes})
    rooms = {room_of(p) for p in paths}
    rooms_known = {"cli", "package", "kernel", "sdk", "engine", "daemon", "ops", "monitor", "devtools", "testing"}
    rooms_known |= {"sinks", "net", "connect"}
    assert rooms == rooms_known, rooms
    for path in paths:
        room = room_of(path)
        if room not in ROOMS:
            continue
        for name in ours(imports(path, text=probes.get(path))):
            if name.startswith("connectors") or name.split(".")[:2] == ["collector", "devtools"]:
                raise AssertionError(f"{path.relative_to(ROOT)} ({room}) imports {name}")
            if room == "ops" and name in OPS_ENGINE_PUBLIC:
                continue
            parts = name.split(".")
            if room != "sdk" and parts[:2] == ["collector", "sdk"] and len(parts) > 2 and parts[2].startswith("_"):
                raise AssertionError(f"{path.relative_to(ROOT)} ({room}) imports the sdk's private {name}")
            allowed = ROOMS[room]
            assert (
                name == "collector"
                and room in ("daemon", "monitor")
                or any(name == a or name.startswith(a + ".") for a in allowed)
            ), f"{path.relative_to(ROOT)} ({room}) may not import {name}"


def test_the_room_rule_fails_on_a_forbidden_import(tmp_path):
    """The rule above, shown to bite: an engine module importing the daemon, ops importing engine internals."""
    probes = (
        ("engine", "from ..daemon import metrics"),
        ("ops", "from ..engine.dispatch import Dispatcher"),
        ("sinks", "from ..ops import status"),
        ("ops", "from ..sinks.service import SinkService"),
        ("net", "from ..sdk.errors import Transient"),
        ("sinks", "from ..sdk._session import Session"),
        ("connect", "from ..engine.dispatch import Dispatcher"),
        ("connect", "from ..monitor import app"),
    )
    for room, line in probes:
        fake = ROOT / "collector" / room / "_forbidden_probe.py"
        try:
            check_rooms({fake: line + "\n"})
        except AssertionError as exc:
            assert "_forbidden_probe.py" in str(exc)
        else:
            raise AssertionError(f"a forbidden import in {room} passed")


WRITES = {
    "insert_one",
    "insert_many",
    "update_one",
    "update_many",
    "replace_one",
    "delete_one",
    "delete_many",
    "bulk_write",
    "find_one_and_update",
    "find_one_and_replace",
    "find_one_and_delete",
    "create_index",
    "create_indexes",
    "drop",
    "drop_index",
    "drop_indexes",
}
GUARDED = {"networks", "items", "quotas"}


def writes_outside_the_store(source: str) -> list[str]:
    """Calls like `db.networks.update_one(...)`, `db["items"].insert_many(...)`,
    `db.get_collection("quotas").delete_one(...)`: a write method on one of the guarded collections."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES):
            continue
        target = node.func.value
        name = None
        if isinstance(target, ast.Attribute):
            name = target.attr
        elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            name = target.slice.value
        elif isinstance(target, ast.Call) and target.args and isinstance(target.args[0], ast.Constant):
            name = target.args[0].value
        if name in GUARDED:
            found.append(f"line {node.lineno}: {name}.{node.func.attr}")
    return found


# the sinks' store unsets the `sinkPending` marker of `items` and indexes it: nothing else of `items`, nothing else
SINKS_STORE = ROOT / "collector" / "sinks" / "store.py"
SINKS_STORE_WRITES = {"items.update_many", "items.create_index"}


def test_only_the_store_writes_networks_items_and_quotas():
    store = ROOT / "collector" / "engine" / "store"
    for path in sorted((ROOT / "collector").rglob("*.py")):
        if store in path.parents or room_of(path) in ("devtools", "testing"):  # the fake data of the dev tools
            continue
        found = writes_outside_the_store(path.read_text())
        if path == SINKS_STORE:
            found = [w for w in found if w.split(": ", 1)[1] not in SINKS_STORE_WRITES]
        assert found == [], path.relative_to(ROOT)
    assert writes_outside_the_store(
        "db.networks.update_one({}, {})\ndb['items'].insert_many([])\ndb.get_collection('quotas').delete_one({})\n"
    ) == ["line 1: networks.update_one", "line 2: items.insert_many", "line 3: quotas.delete_one"]
    assert writes_outside_the_store("db.users.find({})\ndb.jobs.update_one({}, {})\n") == []


def import_graph() -> dict[str, set[str]]:
    """Every import between collector/ modules, wherever it stands (top level, TYPE_CHECKING, inside a function)."""
    modules = {}
    for path in (ROOT / "collector").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name or None

    graph = {}
    for module, path in modules.items():
        names = {n for n in ours(imports(path)) if n.startswith("collector")}
        # `from . import rules` names the package and the module: only the module is imported
        names = {n for n in names if not any(m.startswith(n + ".") and m in modules for m in names)}
        targets = {owner(n) for n in names}
        graph[module] = {t for t in targets if t and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_there_is_no_import_cycle_inside_collector():
    assert cycles(import_graph()) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check bites
