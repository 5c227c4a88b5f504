"""The docs hold what they say: the connector tutorial runs as written (its connector and its conformance-kit
test), every `collector` command, `--flag` and setting the README and the docs name exists, the command-line
reference lists every command and flag, every link and path to a page resolves, and the README stays a front door
(at most 200 lines, the two commands first). The site itself is built strictly by `.ci/run` (mkdocs.yml)."""

from __future__ import annotations

import argparse
import ast
import functools
import re
import subprocess
import sys
import tomllib
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.cli import build_parser
from collector.settings import settings_for_tests
from collector.settings.trust import SOURCES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
TUTORIAL = DOCS / "connectors" / "tutorial.md"
CLI_PAGE = DOCS / "reference" / "cli.md"
TEXTS = [README, ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")
TWO_COMMANDS = "pip install . && collector demo\npip install '.[test]' && python3 -m pytest -n auto\n"

# UPPER_CASE names the docs may name that are not settings: each with why
NOT_SETTINGS = {
    "HTTPS_PROXY": "the proxy variable requests reads (limits-and-reliability.md)",
    "HTTP_PROXY": "the proxy variable requests reads for http:// URLs",
    "CLOCK_BOOTTIME": "the Linux clock the process metrics read",
    "REQUIRE_CHROMIUM": "the browser tests fail rather than skip without Chromium (tests/helpers/browser.py)",
    "SCREENSHOT_TO": "where the browser test copies the docs' screenshot (tests/monitor/test_monitor_page.py)",
}


# --- reading the markdown ------------------------------------------------------------------------------------------
def blocks(path: Path) -> list[tuple[str, str]]:
    """(info string, code) of every fenced block."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(path.read_text())]


def titled_blocks(path: Path) -> dict[str, str]:
    """The blocks that name a file (```python title="my_likes/example.py"), by that name."""
    found = {}
    for info, code in blocks(path):
        title = re.search(r'title="([^"]+)"', info)
        if title:
            found[title.group(1)] = code
    return found


def code_texts(path: Path) -> Iterator[tuple[str, str]]:
    """(where, text) of every inline code span and every line of every fenced block."""
    text = path.read_text()
    for info, code in blocks(path):
        if not info.startswith(("python", "toml")):
            for line in code.splitlines():
                yield f"{path.name} ```{info}", line
    for span in SPAN.findall(FENCE.sub("", text)):
        yield f"{path.name} `…`", span.replace("\n", " ")


# --- (a) the examples run ------------------------------------------------------------------------------------------
@pytest.mark.system  # a real pytest process, as a connector package's author runs it
def test_the_connector_tutorial_runs_as_written(tmp_path):
    files = titled_blocks(TUTORIAL)
    assert set(files) == {"my_likes/example.py", "tests/test_example.py", "pyproject.toml"}
    for name, code in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(code)
    (tmp_path / "my_likes" / "__init__.py").write_text("")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_example.py"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)  # as the page says
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    passed = re.search(r"(\d+) passed", result.stdout)
    claimed = re.search(r"It runs (\d+) tests", TUTORIAL.read_text())
    assert passed and claimed and passed.group(1) == claimed.group(1), "the tutorial says how many tests the kit runs"


def test_the_tutorials_entry_point_names_its_connector():
    files = titled_blocks(TUTORIAL)
    points = tomllib.loads(files["pyproject.toml"])["project"]["entry-points"]["likeastore.connectors"]
    (name, target), *_ = points.items()
    module_path, _, class_name = target.partition(":")
    module = types.ModuleType(module_path)
    exec(compile(files[module_path.replace(".", "/") + ".py"], str(TUTORIAL), "exec"), module.__dict__)
    assert getattr(module, class_name).name == name


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_compiles(path):
    for info, code in blocks(path):
        if info.startswith("python"):
            compile(code, str(path), "exec")


# --- (b) commands, flags and settings exist ------------------------------------------------------------------------
@functools.cache
def root_parser() -> argparse.ArgumentParser:
    return build_parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def parsers(parser=None, path=()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command path, parser) of the command line, the daemon's own first."""
    parser = parser or root_parser()
    yield path, parser
    for name, child in subcommands(parser).items():
        yield from parsers(child, (*path, name))


def check_command(tokens: list[str]) -> str | None:
    """What is wrong with `collector TOKENS…` as the docs write it (usage brackets and placeholders allowed)."""
    chain = [root_parser()]
    tokens = [t.strip("[]") for t in tokens]
    while tokens:
        token = tokens.pop(0)
        if not token.isascii() or token in ("|", "||", "&&", ";", ">", "2>&1") or token.startswith(("#", ">", "$(")):
            if not (token == "|" and tokens and tokens[0].lstrip("[").startswith("--")):
                return None  # the shell's or a drawing's, not ours; `A | --flag` is usage's "or"
            continue
        if token.startswith("--"):
            flag, has_value = token.split("=", 1)[0], "=" in token
            action = chain[-1]._option_string_actions.get(flag)  # argparse: a command's flags follow it
            if action is None:
                return f"no flag {flag} for `collector {' '.join(p.prog.split()[-1] for p in chain[1:])}`"
            if action.nargs != 0 and not has_value and tokens:
                tokens.pop(0)
        elif (children := subcommands(chain[-1])) and token in children:
            chain.append(children[token])
        elif children and re.fullmatch(r"[a-z][a-z-]*", token):
            return f"no command {token!r} under `{chain[-1].prog}`"
    return None


def command_lines() -> Iterator[tuple[str, list[str]]]:
    start = re.compile(r"(?:^|(?<=[\s(`])|(?<=bin/))collector(?=\s|$)(.*)")
    for path in TEXTS:
        for where, text in code_texts(path):
            for match in start.finditer(text):
                yield where, match.group(1).split()


def test_every_command_and_flag_the_docs_name_exists():
    seen, wrong = 0, []
    for where, tokens in command_lines():
        seen += 1
        problem = check_command(tokens)
        if problem:
            wrong.append(f"{where}: collector {' '.join(tokens)}: {problem}")
    assert seen > 50 and wrong == []


def test_every_flag_named_alone_exists():
    flags = {f for _, parser in parsers() for f in parser._option_string_actions}
    wrong = []
    for path in TEXTS:
        for where, text in code_texts(path):
            named = re.match(r"(--[a-z][a-z0-9-]*)", text)
            if where.endswith("`…`") and named and named.group(1) not in flags:
                wrong.append(f"{where}: {text}")
    assert wrong == []


def test_a_wrong_flag_or_command_is_caught():
    assert check_command("--mode normal --once".split()) is None
    assert check_command("networks enable ID... | --service S [--kind KIND] [--force]".split()) is None
    assert check_command("--env-file /etc/collector/collector.env status --check".split()) is None
    assert "no flag --checks" in (check_command(["status", "--checks"]) or "")
    assert "no command 'stauts'" in (check_command(["stauts"]) or "")
    assert "no flag --mode" in (check_command(["networks", "list", "--mode", "x"]) or "")


def module_constants() -> set[str]:
    """UPPER_CASE names the code defines at module level (SWITCH_INTERVAL, TURN_WAIT, …)."""
    names = set()
    for path in (ROOT / "collector").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names |= {t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()}
    return names


@functools.cache
def known_names() -> set[str]:
    settings = set(settings_for_tests().describe())
    strings = set()  # app keys the connectors read by name (required_settings, OAuth2Refresh(...), …)
    for path in (ROOT / "connectors").glob("*.py"):
        strings |= {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)}
    connectors = {s for s in strings if isinstance(s, str) and re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+", s)}
    environment = set()  # what the program reads from its environment (COLLECTOR_ENV_FILE, NOTIFY_SOCKET, …)
    for path in (ROOT / "collector").rglob("*.py"):
        environment |= set(re.findall(r"environ(?:\.get\(|\[)\s*\"([A-Z][A-Z0-9_]+)\"", path.read_text()))
    trust = set(SOURCES)  # CA_BUNDLE and the conventional variables it falls back to (settings/trust.py)
    return settings | connectors | environment | trust | module_constants() | set(NOT_SETTINGS)


PER_SERVICE = {"INITIAL_INTERVAL", "SERVICE_CONCURRENCY"}
METAVAR = re.compile(r"(--[a-z][a-z0-9-]*) [A-Z][A-Z0-9_]*")  # `--quota-window QUOTA_WINDOW`: argparse's
NAME = re.compile(r"(?<![\w$.-])(\*_)?([A-Z][A-Z0-9]*(?:_(?:[A-Z0-9]+|<[A-Z]+>))+)(?![\w-])")


SINK_FORM = re.compile(r"SINK_<[A-Z]+>_(<[A-Z]+>|[A-Z0-9_]+)")  # `SINK_<NAME>_URL`, `SINK_<NAME>_<FIELD>`


def unknown_setting(name: str, star: bool, known: set[str]) -> bool:
    if star:  # `*_CLIENT_ID`: at least one setting ends so
        return not any(k.endswith("_" + name) for k in known)
    if form := SINK_FORM.fullmatch(name):  # `SINK_<NAME>_URL`: a field every sink has, or an installed kind's option
        return not form.group(1).startswith("<") and form.group(1) not in sink_fields()
    if name.startswith("SINK_") and name not in known:  # `SINK_SEARCH_URL`: one sink's, named
        return not any(name.endswith("_" + field) and len(name) > len(f"SINK__{field}") for field in sink_fields())
    if "<" in name:  # `INITIAL_INTERVAL_<SERVICE>`: one of the per-service forms
        return name.split("_<", 1)[0] not in PER_SERVICE
    prefix = next((p for p in PER_SERVICE if name.startswith(p + "_")), None)
    return name not in known and not (prefix and name[len(prefix) + 1 :].lower() in services())


@functools.cache
def sink_fields() -> set[str]:
    """FIELD in SINK_<NAME>_<FIELD>: the fields every sink takes, and the options of every kind installed."""
    from collector.settings.sinkfields import SINK_FIELDS
    from collector.sinks.registry import KindBroken, SinkRegistry

    registry, fields = SinkRegistry(), {f.field for f in SINK_FIELDS}
    for kind in registry.kinds():
        try:
            fields |= {option.name for option in registry.options(kind)}
        except KindBroken:
            continue  # a kind that does not load names no setting
    return fields


def services() -> set[str]:
    from collector.engine.registry import Registry

    return set(Registry().names())


def test_every_setting_the_docs_name_is_known():
    known, seen, wrong = known_names(), set(), []
    for path in TEXTS:
        for where, text in code_texts(path):
            for star, name in NAME.findall(METAVAR.sub(r"\1", text)):
                seen.add(name)
                if unknown_setting(name, bool(star), known):
                    wrong.append(f"{where}: {name}")
    assert len(seen) > 30 and sorted(set(wrong)) == []


def test_a_misspelt_setting_is_caught():
    known = known_names()
    assert not unknown_setting("HTTP_TIMEOUT", False, known)
    assert not unknown_setting("SERVICE_CONCURRENCY_GITHUB", False, known)
    assert not unknown_setting("CLIENT_SECRET", True, known)
    assert unknown_setting("HTTP_TIMEOUTS", False, known)
    assert unknown_setting("SERVICE_CONCURRENCY_ORKUT", False, known)
    assert unknown_setting("MAX_WAIT_<SERVICE>", False, known)
    assert not unknown_setting("SINK_<NAME>_URL", False, known)
    assert not unknown_setting("SINK_<NAME>_<FIELD>", False, known)
    assert not unknown_setting("SINK_MY_SEARCH_BATCH", False, known)
    assert not unknown_setting("SINK_MAX_TRIES", False, known)
    assert unknown_setting("SINK_<NAME>_URI", False, known)
    assert unknown_setting("SINK_SEARCH_BATCHES", False, known)
    assert unknown_setting("SINK_BATCH", False, known)  # no name


def test_every_metric_the_docs_name_is_served():
    source = "\n".join(p.read_text() for p in (ROOT / "collector" / "daemon").glob("*.py"))
    served = set(re.findall(r'"((?:collector|process)_[a-z_]+)"', source)) | {"collector_info"}  # Info("collector")
    named = set()
    for path in TEXTS:
        for _, text in code_texts(path):
            named |= set(re.findall(r"(?<![\w{])((?:collector|process)_[a-z_]+)", text))
    suffixes = ("_total", "_count", "_sum", "_bucket")
    base = {next((n.removesuffix(x) for x in suffixes if n.endswith(x)), n) for n in named}
    assert len(base) > 20 and sorted(base - served) == []


# --- the command-line reference is complete -------------------------------------------------------------------------
def test_the_cli_reference_lists_every_command_and_flag():
    sections = re.split(r"^## ", CLI_PAGE.read_text(), flags=re.M)[1:]
    by_heading = {s.split("\n", 1)[0]: s for s in sections}
    for path, parser in parsers():
        heading = "collector (the daemon)" if not path else "collector " + " ".join(path)
        assert heading in by_heading, heading
        listed = set(re.findall(r"`(--[a-z][a-z0-9-]*)", by_heading[heading])) | {"--help"}
        flags = {f for f in parser._option_string_actions if f.startswith("--")}
        assert listed == flags, heading


# --- links and paths to pages resolve ------------------------------------------------------------------------------
def test_the_readmes_links_resolve_in_the_checkout_and_where_the_package_installs_them():
    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    base = "share/doc/likeastore-collector"
    installed = {f"{folder}/{Path(f).name}"[len(base) + 1 :] for folder, files in data_files.items() for f in files}
    assert all(f"{folder}/{Path(f).name}".endswith(f) for folder, files in data_files.items() for f in files)
    pages = {str(p.relative_to(ROOT)) for p in [*DOCS.rglob("*.md"), *DOCS.glob("img/*.png")]}
    assert pages | {"README.md", "CHANGELOG.md"} == installed, "install every page, in the checkout's layout"
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README.read_text())
    assert links and all((ROOT / link).is_file() for link in links), links


def test_every_docs_page_a_file_names_exists():
    wrong = []
    history = ROOT / "CHANGELOG.md"  # names pages as they were
    for path in [
        *set(ROOT.glob("*.md")) - {history},
        *ROOT.glob("*.toml"),
        *(ROOT / "systemd").iterdir(),
        *(ROOT / "config").iterdir(),
    ]:
        wrong += [(path.name, m) for m in re.findall(r"\bdocs/[\w/.-]+\.md\b", path.read_text())]
    for folder in ("collector", "connectors", "tests"):
        for source in (ROOT / folder).rglob("*.py"):
            wrong += [(source.name, m) for m in re.findall(r"\bdocs/[\w/.-]+\.md\b", source.read_text())]
    assert [(name, page) for name, page in wrong if not (ROOT / page).is_file()] == []


# --- (c) the front door ---------------------------------------------------------------------------------------------
def test_the_readme_is_a_front_door_that_begins_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    first = FENCE.search(text)
    assert first and first.group(2) == TWO_COMMANDS
    assert text[: first.start()].strip().startswith("# ") and text[: first.start()].count("\n") <= 2
    test_command = first.group(2).splitlines()[1].split("&& ")[-1]
    runs = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if " -m pytest" in line]
    assert runs[-1].endswith(test_command)  # .ci/run's last pytest line runs the README's test command
