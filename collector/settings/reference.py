"""config/defaults.env and docs/reference/settings.md, written from the declaration (declaration.py).

python -m collector.settings.reference --write   # write both files in this checkout
python -m collector.settings.reference --check   # exit 1, naming them, when either differs from the declaration
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from .declaration import ENVIRONMENT, FAMILIES, RELOADS, SETTINGS, Family, Setting
from .files import CHECKOUT, read_settings_file
from .parsers import ENVIRONMENTS
from .sinkfields import FORM, SINK_FIELDS, SinkField

DEFAULTS_ENV = Path("config") / "defaults.env"
REFERENCE = Path("docs") / "reference" / "settings.md"
SOURCE = "collector/settings/declaration.py"
COMMAND = "python -m collector.settings.reference --write"
HEADER = (
    "# Defaults for every environment. config/<COLLECTOR_ENV>.env overrides these,",
    "# then a .env file in the working directory, then the process environment.",
    "# Durations are in seconds.",
    f"# Written from {SOURCE} by",
    f"# `{COMMAND}`: edit the declaration, not this file.",
)


def defaults_env() -> str:
    """config/defaults.env: each setting's help as a comment (once for a run of settings that share it), then
    NAME=default, and after a setting the per-service values its family sets."""
    lines = list(HEADER)
    previous = ""
    for setting in SETTINGS:
        if setting.help != previous:
            lines += ["", f"# {setting.help}"]
        previous = setting.help
        lines.append(f"{setting.name}={setting.default}")
        for family in FAMILIES:
            if family.fallback == setting.name:
                for service, value, note in family.extras:
                    lines += [f"# {note}", f"{family.prefix}{service.upper()}={value}"]
        if setting.name == "SINKS":
            lines += _sink_comments()
    return "\n".join(lines) + "\n"


def _sink_comments() -> list[str]:
    """After SINKS: the settings of one sink, as comments (they have no default of their own to set)."""
    lines = ["# Each sink in SINKS is set by SINK_<NAME>_<FIELD> (docs/reference/settings.md, Per sink), e.g.:"]
    for field in SINK_FIELDS:
        lines.append(f"#   {FORM.replace('<NAME>', 'SEARCH')}{field.field}={field.default}")
    return lines


def _cell(text: str) -> str:
    """Text for a Markdown table cell or paragraph: no raw HTML (`<SERVICE>`), no column break."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else "(empty)"


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _setting_row(setting: Setting) -> str:
    return _row(
        f"`{setting.name}`",
        _cell(setting.kind.name),
        _code(setting.default),
        setting.kind.bounds(),
        "yes" if setting.secret else "no",
        setting.reload,
        _cell(setting.help),
    )


def _family_row(family: Family) -> str:
    extras = "".join(f"; {_code(f'{family.prefix}{s.upper()}={v}')}" for s, v, _ in family.extras)
    return _row(
        f"`{family.name}`",
        _cell(family.kind.name),
        f"`{family.fallback}`{extras}",
        family.kind.bounds(),
        "no",
        family.reload,
        _cell(family.help),
    )


def _sink_row(field: SinkField) -> str:
    return _row(
        f"`{field.name}`",
        _cell(field.kind.name),
        "(required)" if field.required else _code(field.default),
        field.kind.bounds(),
        "no",
        "yes",
        _cell(field.help),
    )


def _environments(config: Path) -> Iterable[str]:
    for env in ENVIRONMENTS:
        values = read_settings_file(config / f"{env}.env") or {}
        shown = ", ".join(_code(f"{name}={value}") for name, value in values.items()) or "nothing"
        yield f"- `{env}` (config/{env}.env): {shown}"


def reference(config: Path) -> str:
    """docs/reference/settings.md; `config` holds the per-environment files it lists."""
    heading = ("Name", "Type", "Default", "Bounds", "Secret", "Reload", "Help")
    rule = _row(*("---" for _ in heading))
    lines = [
        "# Settings reference",
        "",
        f"<!-- Written from {SOURCE} by `{COMMAND}`: edit the declaration, not this file. -->",
        "",
        "Every setting the collector reads, from its one declaration. They are read at start and at every reload "
        "(SIGHUP), lowest precedence first: `config/defaults.env`, `config/<COLLECTOR_ENV>.env`, `./.env`, the "
        "process environment, then the settings file named by `--env-file` or `COLLECTOR_ENV_FILE`. "
        "`collector --check-config` prints the values in effect, secrets masked. Durations are in seconds.",
        "",
        _row(*heading),
        rule,
        _setting_row(ENVIRONMENT),
        *(_setting_row(setting) for setting in SETTINGS),
        "",
        "## Per service",
        "",
        "A setting for one service's networks, named with the service in capitals (`INITIAL_INTERVAL_GITHUB`); "
        "a service without one uses the general setting.",
        "",
        _row(*heading),
        rule,
        *(_family_row(family) for family in FAMILIES),
        "",
        "## Per sink",
        "",
        "The settings of one sink named in `SINKS`, with its name in capitals (`SINK_SEARCH_URL` for a sink "
        "`search`). Beside these, each kind of sink takes its own (an index, a key, a secret: the kind's options; "
        "those holding a secret are masked in every output and log). A reload applies them: a sink whose settings "
        "changed finishes its deliveries in flight and starts again with the new ones.",
        "",
        _row(*heading),
        rule,
        *(_sink_row(field) for field in SINK_FIELDS),
        "",
        "## Per environment",
        "",
        "`COLLECTOR_ENV` names the file read over `config/defaults.env`:",
        "",
        *_environments(config),
        "",
        "## Reload",
        "",
        *(f"- **{name}**: {_cell(meaning)}." for name, meaning in RELOADS.items()),
        "",
        "## Details",
        "",
    ]
    for setting in (ENVIRONMENT, *SETTINGS):
        if setting.details:
            lines += [f"**`{setting.name}`**: {_cell(setting.details)}", ""]
    return "\n".join(lines)


def generated(root: Path = CHECKOUT) -> dict[Path, str]:
    """Each generated file under `root` (a checkout), with the text the declaration gives it."""
    return {root / DEFAULTS_ENV: defaults_env(), root / REFERENCE: reference(root / "config")}


def stale(root: Path = CHECKOUT) -> list[Path]:
    """The generated files under `root` whose text differs from what the declaration gives."""
    return [path for path, text in generated(root).items() if not path.is_file() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m collector.settings.reference", description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="write both files")
    action.add_argument("--check", action="store_true", help="exit 1 when either differs from the declaration")
    args = parser.parse_args(argv)
    if args.write:
        for path, text in generated().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
        return 0
    behind = stale()
    for path in behind:
        print(f"{path} differs from {SOURCE}: run `{COMMAND}`", file=sys.stderr)
    return 1 if behind else 0


if __name__ == "__main__":
    sys.exit(main())
