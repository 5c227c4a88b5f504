"""The SDK stands on its own: `import collector.sdk` and the connectors, in a fresh interpreter, load neither the
engine, the daemon, the operator tools, the dev tools nor the kit, and none of the libraries only those need
(pymongo, mongomock, APScheduler, prometheus_client; `bson`, the BSON codec sdk/validate.py measures items with,
is the SDK's own need). The library API (`from collector import run_once`) still loads the engine on demand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONNECTORS = sorted(p.stem for p in (ROOT / "connectors").glob("*.py") if p.stem != "__init__")
FORBIDDEN_COLLECTOR = ("engine", "daemon", "ops", "cli", "devtools", "testing")
FORBIDDEN_LIBRARIES = ("pymongo", "mongomock", "apscheduler", "prometheus_client")


def modules_after(code: str) -> list[str]:
    """The names in sys.modules after running `code` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def forbidden(modules: list[str]) -> list[str]:
    found = []
    for name in modules:
        parts = name.split(".")
        if parts[0] in FORBIDDEN_LIBRARIES or (
            parts[0] == "collector" and parts[1:2] in ([p] for p in FORBIDDEN_COLLECTOR)
        ):
            found.append(name)
    return found


def test_the_sdk_and_every_connector_load_no_engine_daemon_operator_tool_or_database_driver():
    assert len(CONNECTORS) >= 10
    code = "import collector.sdk\n" + "".join(f"import connectors.{name}\n" for name in CONNECTORS)
    modules = modules_after(code)
    assert {"collector.sdk", "collector.sdk.http", *(f"connectors.{n}" for n in CONNECTORS)} <= set(modules)
    assert forbidden(modules) == []


def test_the_check_bites():
    assert forbidden(
        ["collector.engine", "collector.cli", "pymongo.errors", "collector.sdk", "collector.settings"]
    ) == [
        "collector.engine",
        "collector.cli",
        "pymongo.errors",
    ]


def test_the_library_api_still_loads_the_engine_on_demand():
    modules = modules_after(
        "from collector import Collector, Report, Settings, SettingsError, load_settings, run_once\n"
        "import collector\n"
        "assert run_once.__module__.startswith('collector.engine') and Collector.__name__ == 'Collector'\n"
        "assert set(collector.__all__) <= set(dir(collector))\n"
    )
    assert {"collector.engine", "pymongo"} <= set(modules)
