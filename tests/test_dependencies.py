"""What a fresh install takes: every dependency bounded above (a new major release is not taken before CI has run on
it), every package the code imports declared, and constraints.txt, the set deployments pin, inside those bounds."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RUNTIME = [Requirement(r) for r in PROJECT["dependencies"]]
TEST = [Requirement(r) for r in PROJECT["optional-dependencies"]["test"]]


def pins() -> dict[str, Version]:
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not NAME==VERSION"
            found[canonicalize_name(name)] = Version(version)
    return found


def imported(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"collector", "connectors", "collector_config", "__future__"}


def distributions(modules: set[str]) -> set[str]:
    known = packages_distributions()
    missing = sorted(m for m in modules if m not in known)
    assert not missing, f"imported but installed by no distribution: {missing}"
    return {canonicalize_name(d) for m in modules for d in known[m]}


def test_every_dependency_has_a_lower_and_an_upper_bound():
    for requirement in RUNTIME + TEST:
        operators = {spec.operator for spec in requirement.specifier}
        assert operators & {">=", "=="} and operators & {"<", "=="}, f"{requirement} is not bounded both ways"


def test_every_package_the_code_imports_is_declared():
    runtime = {canonicalize_name(r.name) for r in RUNTIME}
    test = runtime | {canonicalize_name(r.name) for r in TEST}
    kit = list((ROOT / "collector" / "testing").rglob("*.py"))  # the conformance kit runs under pytest
    shipped = [p for p in (ROOT / "collector").rglob("*.py") if p not in kit] + list((ROOT / "connectors").glob("*.py"))
    assert distributions(imported(shipped)) <= runtime
    assert distributions(imported(kit)) <= test


def test_constraints_pin_every_dependency_inside_its_range():
    pinned = pins()
    for requirement in RUNTIME + TEST:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"constraints.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(pinned[name]), f"{name}=={pinned[name]} is outside {requirement}"


def test_every_package_of_the_code_is_in_what_an_install_copies():
    """pyproject.toml names the packages an install copies (a list, not a find): a package left out imports in a
    checkout and fails on every installed machine (collector.net once did, caught only by CI's demo)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    present = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("collector", "connectors")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert present - listed == set(), f"packages an install would leave out: {sorted(present - listed)}"
