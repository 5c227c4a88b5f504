"""Sizes a reader can hold: every module in collector/ has at most 400 lines, every class at most 250 and every
function at most 80 (a class's or function's lines run from its `class` or `def` line, decorators excluded, to its
last statement). No module, class or function is exempt."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES = 400
CLASS_LINES = 250
FUNCTION_LINES = 80


def oversized(path: Path, root: Path = ROOT) -> list[str]:
    """What in one module is over the limits, as `path: what (lines)`."""
    text = path.read_text()
    name = path.relative_to(root).as_posix()
    found = []
    lines = len(text.splitlines())
    if lines > MODULE_LINES:
        found.append(f"{name}: {lines} lines (at most {MODULE_LINES})")
    for node in ast.walk(ast.parse(text, filename=name)):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > CLASS_LINES:
                found.append(f"{name}: class {node.name}, {size} lines (at most {CLASS_LINES})")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > FUNCTION_LINES:
                found.append(f"{name}: function {node.name}, {size} lines (at most {FUNCTION_LINES})")
    return found


def test_every_module_class_and_function_in_the_package_is_within_its_size():
    modules = sorted((ROOT / "collector").rglob("*.py"))
    assert len(modules) > 50  # the package itself, not an empty glob
    assert [what for path in modules for what in oversized(path)] == []


def test_the_size_rule_sees_a_long_module_and_a_long_class(tmp_path):
    body = "\n".join(f"    x{k} = {k}" for k in range(CLASS_LINES))
    (tmp_path / "big.py").write_text(f"class Big:\n{body}\n" + "\n" * (MODULE_LINES - CLASS_LINES))
    (tmp_path / "fine.py").write_text(f"class Fine:\n{body[: body.rindex(chr(10))]}\n")
    assert oversized(tmp_path / "big.py", tmp_path) == [
        f"big.py: {MODULE_LINES + 1} lines (at most {MODULE_LINES})",
        f"big.py: class Big, {CLASS_LINES + 1} lines (at most {CLASS_LINES})",
    ]
    assert oversized(tmp_path / "fine.py", tmp_path) == []


def test_the_size_rule_sees_a_long_function_sync_or_async_nested_or_a_method(tmp_path):
    def function(head: str, lines: int, indent: str = "") -> str:
        return f"{indent}{head}\n" + "\n".join(f"{indent}    x{k} = {k}" for k in range(lines - 1)) + "\n"

    (tmp_path / "long.py").write_text(
        "@decorated\n"  # a decorator's line is not the function's
        + function("def long():", FUNCTION_LINES + 1)
        + function("async def waits():", FUNCTION_LINES + 7)
        + "class Holder:\n"
        + function("def method(self):", FUNCTION_LINES + 2, "    ")
        + function("def outer():", 3)
        + function("def inner():", FUNCTION_LINES + 1, "    ")
    )
    (tmp_path / "short.py").write_text(
        "@decorated\n" + function("def exactly():", FUNCTION_LINES) + function("async def also():", FUNCTION_LINES)
    )
    assert sorted(oversized(tmp_path / "long.py", tmp_path)) == [
        f"long.py: function inner, {FUNCTION_LINES + 1} lines (at most {FUNCTION_LINES})",
        f"long.py: function long, {FUNCTION_LINES + 1} lines (at most {FUNCTION_LINES})",
        f"long.py: function method, {FUNCTION_LINES + 2} lines (at most {FUNCTION_LINES})",
        f"long.py: function outer, {FUNCTION_LINES + 4} lines (at most {FUNCTION_LINES})",  # the inner one is in it
        f"long.py: function waits, {FUNCTION_LINES + 7} lines (at most {FUNCTION_LINES})",
    ]
    assert oversized(tmp_path / "short.py", tmp_path) == []
