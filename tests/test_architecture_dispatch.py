"""Dispatch with one owner, kept by tests: the dispatcher alone (dispatch.py, and intake.py its claiming half) holds
the loop's state and never sees the Collector; nothing reaches through the Collector into its parts' attributes; a
run's final state is made in one place (engine/decide.py); each network is read and looked up in the registry once
(engine/run.py `admit`); and the daemon gives back the signal handlers it found."""

from __future__ import annotations

import ast
import signal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "collector"
LOOP_STATE = {
    "pending",
    "inflight",
    "running",
    "per_service",
    "completions",
    "outbox",
    "leases",
    "next_claim",
    "stop_seen",
    "claims_open",
    "exhausted_at",
    "capacity",
}


def trees() -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text())) for p in sorted(COLLECTOR.rglob("*.py"))]


def rel(path: Path) -> str:
    return str(path.relative_to(COLLECTOR))


def test_only_the_dispatcher_assigns_the_loops_state_in_the_engine():
    found = []
    for path, tree in trees():
        if not rel(path).startswith("engine/"):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr in LOOP_STATE
                ):
                    found.append((rel(path), target.attr))
    owners = {path for path, _ in found}
    assert owners == {"engine/dispatch.py", "engine/intake.py"}, sorted(set(found))  # the dispatcher's two halves


def test_the_dispatchers_claiming_half_is_the_dispatchers_alone():
    """intake.py is a mix-in of `Dispatcher` only: no other class takes it, so the state it moves stays the
    dispatcher's."""
    users = [
        (rel(path), node.name)
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(getattr(base, "id", "") == "Intake" for base in node.bases)
    ]
    assert users == [("engine/dispatch.py", "Dispatcher")]


def test_the_dispatcher_knows_its_parts_not_the_collector():
    source = (COLLECTOR / "engine" / "dispatch.py").read_text()
    assert "Collector" not in source and "from .collector" not in source
    assert not (COLLECTOR / "engine" / "resources.py").exists()  # the protocol that let it reach in is gone


def reaches_through(tree: ast.AST) -> list[str]:
    """`collector.<part>.<attribute>` (or `x.collector.<part>.<attribute>`): a reach through the facade."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)):
            continue
        holder = node.value.value
        name = holder.id if isinstance(holder, ast.Name) else getattr(holder, "attr", None)
        if name == "collector" and node.value.attr != "settings":  # the settings are a value, not a part
            found.append(f"collector.{node.value.attr}.{node.attr}")
    return found


def test_nothing_reaches_through_the_collector_into_its_parts():
    found = {
        rel(path): reaches_through(tree)
        for path, tree in trees()
        if rel(path) != "engine/collector.py" and reaches_through(tree)
    }
    assert found == {}


def test_the_reach_rule_bites():
    assert reaches_through(ast.parse("collector.store.count_due('normal', now)")) == ["collector.store.count_due"]
    assert reaches_through(ast.parse("self.collector.http.session")) == ["collector.http.session"]
    assert reaches_through(ast.parse("collector.due('normal', now)")) == []


def calls_of(tree: ast.AST, names: set[str]) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in names:
                out.add(name)
    return out


def test_one_function_decides_a_runs_final_state():
    deciding = {"RunResult", "on_success", "on_failure"}
    makers = {rel(path): calls_of(tree, deciding) for path, tree in trees() if calls_of(tree, deciding)}
    assert makers == {"engine/decide.py": deciding}


def test_each_network_is_read_and_looked_up_once():
    reading = {"check_network", "effective_mode"}
    readers = {rel(path): calls_of(tree, reading) for path, tree in trees() if calls_of(tree, reading)}
    assert readers == {"engine/run.py": reading}
    lookups = [
        rel(path)
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name | ast.Attribute)
        and (getattr(node.func.value, "id", None) or getattr(node.func.value, "attr", None)) == "registry"
    ]
    assert lookups == ["engine/run.py"]  # admit(); the engine runs a connector with run_validated, not run
    engine = "\n".join(p.read_text() for p in (COLLECTOR / "engine").rglob("*.py"))
    assert ".run(job" not in engine and ".run_validated(job)" in engine


def test_the_daemon_gives_back_the_signal_handlers_it_found(monkeypatch):
    from collector import lifecycle
    from collector.daemon import process
    from collector.settings import settings_for_tests

    def mine(signum, frame):  # pragma: no cover - never called
        raise AssertionError

    before = {s: signal.getsignal(s) for s in lifecycle.HANDLED}
    settings = settings_for_tests(mongodb_uri="mongodb://127.0.0.1:1/x?serverSelectionTimeoutMS=200")
    try:
        for signum in lifecycle.HANDLED:
            signal.signal(signum, mine)
        code = process.serve(settings, "normal", once=True)
        assert code == 3  # MongoDB unreachable: the daemon's own path went as far as connecting
        assert all(signal.getsignal(s) is mine for s in lifecycle.HANDLED)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
