"""The systemd unit: hardened (systemd-analyze security rates it OK or better) and still valid."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "collector@.service"
MONITOR = UNIT.with_name("collector-monitor.service")
SINK = UNIT.with_name("collector-sink.service")
REQUIRED = [
    "CapabilityBoundingSet=",
    "SystemCallFilter=@system-service",
    "RestrictNamespaces=yes",
    "ProtectClock=yes",
    "ProtectKernelLogs=yes",
    "ProtectHostname=yes",
    "MemoryDenyWriteExecute=yes",
    "UMask=0077",
    "MemoryMax=",
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
]


@pytest.mark.parametrize("path", [UNIT, MONITOR, SINK], ids=["collector", "monitor", "sink"])
def test_the_unit_carries_the_hardening_directives(path):
    lines = path.read_text().splitlines()
    for directive in REQUIRED:
        assert any(line.startswith(directive) for line in lines), directive


@pytest.mark.parametrize(
    ("path", "name"),
    [(UNIT, "collector@normal.service"), (MONITOR, MONITOR.name), (SINK, SINK.name)],
    ids=["collector", "monitor", "sink"],
)
def test_systemd_rates_the_unit_ok_or_better(tmp_path, path, name):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is part of this project's machines (Debian's systemd package)"
    unit = tmp_path / name
    unit.write_text(path.read_text())
    security = subprocess.run([analyze, "security", "--offline=true", str(unit)], capture_output=True, text=True)
    exposure = re.search(r"Overall exposure level for .*: ([\d.]+) (\w+)", security.stdout)
    assert exposure, security.stdout + security.stderr
    assert float(exposure.group(1)) < 2.0 and exposure.group(2) in ("OK", "SAFE")
    verify = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    problems = [line for line in verify.stderr.splitlines() if line.strip() and "is not executable" not in line]
    assert problems == []


def test_the_unit_documents_this_project_and_reads_the_operators_settings_file():
    import tomllib

    text = UNIT.read_text()
    documentation = re.search(r"^Documentation=file:///opt/collector/(\S+)$", text, re.M)
    assert documentation, "Documentation= names the README the package installs"
    data_files = tomllib.loads((UNIT.parent.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    folder, name = documentation.group(1).rsplit("/", 1)
    assert name in [Path(f).name for f in data_files[folder]] and "likeastore/collector" not in text
    assert re.search(r"^ExecStart=\S+/collector --env-file /etc/collector/collector\.env --mode %i$", text, re.M)
    assert "EnvironmentFile=" not in text  # its variables would beat every file a reload re-reads
    assert re.search(r"^ProcSubset=pid$", text, re.M) and re.search(
        r"^ExecReload=/bin/kill -HUP \$MAINPID$", text, re.M
    )


def test_the_monitors_unit_runs_the_monitor_on_the_collectors_settings_and_documents_it():
    import tomllib

    text = MONITOR.read_text()
    assert re.search(r"^ExecStart=\S+/collector --env-file /etc/collector/collector\.env monitor$", text, re.M)
    assert "EnvironmentFile=" not in text and "ReadWritePaths" not in text
    documentation = re.search(r"^Documentation=file:///opt/collector/(\S+)$", text, re.M)
    assert documentation
    data_files = tomllib.loads((UNIT.parent.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    folder, name = documentation.group(1).rsplit("/", 1)
    assert name in [Path(f).name for f in data_files[folder]]


def test_the_sink_unit_runs_the_sink_service_on_its_own_metrics_port_and_stops_within_its_timeout():
    import tomllib

    text = SINK.read_text()
    execs = re.findall(
        r"^ExecStart=\S+/collector --env-file /etc/collector/collector\.env sink --metrics-port (\d+)$", text, re.M
    )
    assert execs and execs[0] != "9464", "its own port, beside the collectors' 9464"
    assert "EnvironmentFile=" not in text and "ReadWritePaths" not in text
    assert re.search(r"^Type=notify$", text, re.M) and re.search(r"^WatchdogSec=\d+$", text, re.M)
    assert re.search(r"^ExecReload=/bin/kill -HUP \$MAINPID$", text, re.M)
    stop = re.search(r"^TimeoutStopSec=(\d+)$", text, re.M)
    assert stop and int(stop.group(1)) > 30 + 5, "above the default sink timeout (30 s) plus a few seconds"
    documentation = re.search(r"^Documentation=file:///opt/collector/(\S+)$", text, re.M)
    assert documentation
    data_files = tomllib.loads((UNIT.parent.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    folder, name = documentation.group(1).rsplit("/", 1)
    assert name in [Path(f).name for f in data_files[folder]]
