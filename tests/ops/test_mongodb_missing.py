"""A clear word when MongoDB is missing, in real processes against a local port nothing listens on: an operator's
command says what it waits for (the URI masked, where MONGODB_URI came from), then gives up with one line naming
MONGODB_URI, what was tried and what to do, exit 3; the daemon and the sink service say at their start which MongoDB
they wait for. (No assertion on time: the bound is in the code, OPERATOR_SELECTION_MS; the subprocess timeout is
only a backstop.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from collector.settings import config_dir

from helpers import free_port
from helpers.proc import collector_cmd, stop, wait_until, write_env

pytestmark = pytest.mark.system

PASSWORD = "Hunter2-s3cret"
COMMANDS = (
    ["status"],
    ["status", "--json"],
    ["networks", "list"],
    ["networks", "show", "ada@x.test"],
    ["pause", "--service", "github"],
    ["resume"],
    ["jobs", "list"],
    ["sinks", "status"],
    ["sinks", "pause", "hooks"],
)


def environment(tmp_path: Path, **env: str) -> dict[str, str]:
    """The process environment without the caller's collector or MongoDB settings, and `env`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("COLLECTOR_", "MONGODB_", "NOTIFY_SOCKET"))}
    return {**environ, "COLLECTOR_ENV": "test", **env}


def run_all(commands, cwd: Path, environ: dict[str, str], *first: str) -> list[subprocess.CompletedProcess]:
    """Every command at once, each its own process (a few seconds each, not their sum)."""
    started = [
        (
            command,
            subprocess.Popen(
                collector_cmd(*first, *command),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environ,
                cwd=cwd,
            ),
        )
        for command in commands
    ]
    done = []
    for command, process in started:
        out, err = process.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(command, process.returncode, out, err))
    return done


def said(result: subprocess.CompletedProcess, tried: str, origin: str, todo: str) -> None:
    """Two lines on standard error, nothing on standard output: the wait, then the one line of the refusal."""
    assert result.returncode == 3, result
    assert result.stdout == "" and "Traceback" not in result.stderr, result
    waiting, refusal = result.stderr.splitlines()
    assert waiting == f"collector: waiting for MongoDB at {tried} (MONGODB_URI: {origin})", result.args
    assert refusal.startswith(f"collector: cannot reach MongoDB at {tried} (MONGODB_URI: {origin}): "), refusal
    assert "Connection refused" in refusal and refusal.endswith(f"; {todo}"), refusal
    assert PASSWORD not in result.stderr


def test_every_operator_command_names_the_uri_it_tried_from_the_environment_and_gives_up_in_one_line(tmp_path):
    port = free_port()
    uri = f"mongodb://collector:{PASSWORD}@127.0.0.1:{port}/likeastore"
    for result in run_all(COMMANDS, tmp_path, environment(tmp_path, MONGODB_URI=uri)):
        said(
            result,
            f"mongodb://collector:***@127.0.0.1:{port}/likeastore",
            "set in the environment",
            "check that MongoDB runs there, or correct MONGODB_URI",
        )


def test_a_uri_from_the_settings_file_is_named_with_the_file_and_wins_over_the_environment(tmp_path):
    port, other = free_port(), free_port()
    env_file = write_env(tmp_path / "collector.env", MONGODB_URI=f"mongodb://ops:{PASSWORD}@127.0.0.1:{port}/fleet")
    environ = environment(tmp_path, MONGODB_URI=f"mongodb://127.0.0.1:{other}/elsewhere")
    commands = (["networks", "list"], ["sinks", "list"], ["pause"])
    for result in run_all(commands, tmp_path, environ, "--env-file", str(env_file)):
        said(
            result,
            f"mongodb://ops:***@127.0.0.1:{port}/fleet",
            f"set in {env_file}",
            "check that MongoDB runs there, or correct MONGODB_URI",
        )


@pytest.fixture
def shipped_uri(tmp_path):
    """The shipped config/ copied, its test environment's MONGODB_URI a local port nothing listens on: the
    default, as localhost:27017 is on a machine without MongoDB."""
    config = tmp_path / "config"
    shutil.copytree(config_dir(), config, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    port = free_port()
    text = (config / "test.env").read_text()
    (config / "test.env").write_text(text.replace("localhost:27017", f"127.0.0.1:{port}"))
    return config, f"mongodb://127.0.0.1:{port}/likeastore_test"


def test_the_default_uri_is_said_to_be_the_default_and_the_way_out_named(tmp_path, shipped_uri):
    config, uri = shipped_uri
    environ = environment(tmp_path, COLLECTOR_CONFIG_DIR=str(config))
    for result in run_all((["status"], ["jobs", "list"]), tmp_path, environ):
        said(
            result,
            uri,
            "the default for COLLECTOR_ENV=test",
            "start MongoDB there, or set MONGODB_URI (in the environment or the settings file)",
        )


def test_status_check_says_unknown_on_standard_output_with_the_uri_and_its_origin(tmp_path):
    port = free_port()
    environ = environment(tmp_path, MONGODB_URI=f"mongodb://nagios:{PASSWORD}@127.0.0.1:{port}/x")
    (result,) = run_all((["status", "--check"],), tmp_path, environ)
    assert result.returncode == 3 and PASSWORD not in result.stdout + result.stderr
    tried = f"mongodb://nagios:***@127.0.0.1:{port}/x (MONGODB_URI: set in the environment)"
    assert result.stdout.startswith(f"UNKNOWN: cannot reach MongoDB at {tried}: ")
    assert result.stdout.count("\n") == 1 and "MONGODB_URI" in result.stdout


@pytest.mark.parametrize(("args", "log_name"), [(["--mode", "normal"], "daemon.log"), (["sink"], "sink.log")])
def test_the_daemon_and_the_sink_service_say_at_once_which_mongodb_they_wait_for(tmp_path, args, log_name):
    port = free_port()
    env_file = write_env(
        tmp_path / "collector.env", MONGODB_URI=f"mongodb://svc:{PASSWORD}@127.0.0.1:{port}/likeastore", SINKS=""
    )
    log = tmp_path / log_name
    line = f"waiting for MongoDB at mongodb://svc:***@127.0.0.1:{port}/likeastore (MONGODB_URI: set in {env_file})"
    with open(log, "wb") as err:
        process = subprocess.Popen(
            collector_cmd("--env-file", str(env_file), *args),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=environment(tmp_path, LOG_LEVEL="INFO"),
            cwd=tmp_path,
        )
    try:
        wait_until(lambda: line in log.read_text(), timeout=60)
    finally:
        stop(process)
    assert PASSWORD not in log.read_text()


def test_the_daemon_that_gives_up_says_what_it_tried_and_what_to_do(tmp_path):
    port = free_port()
    uri = f"mongodb://svc:{PASSWORD}@127.0.0.1:{port}/likeastore?serverSelectionTimeoutMS=700"
    env_file = write_env(tmp_path / "collector.env", MONGODB_URI=uri)
    result = subprocess.run(
        collector_cmd("--env-file", str(env_file), "--mode", "initial"),
        capture_output=True,
        text=True,
        env=environment(tmp_path, LOG_LEVEL="INFO"),
        cwd=tmp_path,
        timeout=120,
    )
    shown = (
        f"mongodb://svc:***@127.0.0.1:{port}/likeastore?serverSelectionTimeoutMS=700 (MONGODB_URI: set in {env_file})"
    )
    assert result.returncode == 3 and PASSWORD not in result.stderr and "Traceback" not in result.stderr
    assert f"waiting for MongoDB at {shown}" in result.stderr
    assert f"cannot reach MongoDB at {shown}: " in result.stderr
    assert "check that MongoDB runs there, or correct MONGODB_URI" in result.stderr


@pytest.mark.parametrize("signum", [2, 15])  # SIGINT (Ctrl-C), SIGTERM
def test_status_watch_stopped_while_it_waits_for_mongodb_finishes_that_report_and_exits_0(tmp_path, signum):
    """A stop that comes while a report is being read (here: waiting for a MongoDB that does not answer) ends the
    loop once that report is done, never inside the driver: exit 0, the report's one line said, no traceback."""
    port = free_port()
    env_file = write_env(tmp_path / "ops.env", MONGODB_URI=f"mongodb://127.0.0.1:{port}/x")
    err_path = tmp_path / "watch.err"
    with open(err_path, "wb") as err:
        process = subprocess.Popen(
            collector_cmd("--env-file", str(env_file), "status", "--watch", "--interval", "1"),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=environment(tmp_path),
            cwd=tmp_path,
        )
    try:
        wait_until(lambda: "waiting for MongoDB at" in err_path.read_text(), timeout=60)  # inside the first read
        process.send_signal(signum)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    said = err_path.read_text()
    assert "cannot " in said and "MONGODB_URI" in said and "Traceback" not in said and "KeyboardInterrupt" not in said
