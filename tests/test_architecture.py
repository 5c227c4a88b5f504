"""The shape of the code, kept by tests: imports run one way (connectors -> collector.sdk <- engine), the daemon
loads no dev tools, and the CLI's flags are not overwritten by a subcommand's defaults."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

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


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
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
            assert name.startswith(("collector.sdk", "collector.settings")), f"sdk/{path.name} imports {name}"


def test_the_engine_reaches_connectors_only_through_the_registry_and_dev_tools_only_lazily():
    for path in sorted((ROOT / "collector").glob("*.py")):
        for name in ours(imports(path)):
            assert not name.startswith("connectors"), f"{path.name} imports {name}"
        for name in ours(imports(path, top_level_only=True)):
            if name.startswith(("collector.devtools", "collector.testing")):
                assert name.startswith("collector.devtools.options"), f"{path.name} imports {name} at import time"
    assert "__getattr__" not in (ROOT / "collector" / "__init__.py").read_text()


def test_dev_tools_and_the_kit_are_not_imported_by_the_engine_or_the_sdk():
    for path in [*ROOT.glob("collector/*.py"), *ROOT.glob("collector/sdk/*.py")]:
        for name in ours(imports(path)):
            if name.startswith("collector.testing"):
                raise AssertionError(f"{path} imports {name}")


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
