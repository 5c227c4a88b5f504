"""Sizes a reader can hold: every module in collector/ has at most 400 lines and every class at most 250 (a class's
lines run from its `class` line, decorators excluded, to its last statement). No module or class is exempt."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES = 400
CLASS_LINES = 250


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
    return found


def test_every_module_and_class_in_the_package_is_within_its_size():
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
