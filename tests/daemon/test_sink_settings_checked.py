"""Every sink setting is checked before anything starts, as deployed: `collector sink` (and --once) with a sink
setting the destination cannot take is one line naming it and exit 2, before a sink is registered in MongoDB (a
real database on a loopback socket: WireServer); `--check-config` and `sinks list` refuse it alike; a reload
(SIGHUP) with one is refused in one log line and the old settings kept — the sink service's and the collector
daemon's. A plugin's own option check counts as a built-in's."""

from __future__ import annotations

import base64
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from bson import ObjectId

from collector.devtools.mongowire import WireServer
from collector.sdk.timeutil import utcnow

from helpers import free_port
from helpers.proc import get, run, start, stop, wait_until, write_env
from helpers.sinkservers import WEBHOOK_SECRET

pytestmark = pytest.mark.system

PASSWORD = "hush-hush-0042-pw"
PLUGIN = """
import urllib.request
from collector.sinks.sdk import DONE, Option, Sink


def no_upper(value):
    if value != value.lower():
        raise ValueError("must be lower case")


class ShelfSink(Sink):
    kind = "shelf"
    options = (Option("SHELF", "where", default="top", check=no_upper),)

    def deliver(self, batch):
        body = "\\n".join(doc.id for doc in batch).encode()
        with urllib.request.urlopen(urllib.request.Request(self.config.url, data=body), timeout=10) as answer:
            answer.read()
        return [DONE] * len(batch)
"""


def install_plugin(folder: Path) -> str:
    folder.mkdir(exist_ok=True)
    (folder / "shelf_sink.py").write_text(PLUGIN)
    info = folder / "shelf_sink-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shelf-sink\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[likeastore.sinks]\nshelf = shelf_sink:ShelfSink\n")
    return str(folder)


class Receiver:
    """The plugin's destination: records the ids it was sent."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.ids |= set(body.decode().split("\n"))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/in"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.server.shutdown()


def items(wire: WireServer, n: int) -> set[str]:
    ids = [ObjectId() for _ in range(n)]
    now = utcnow()
    wire.client.get_database("likeastore").items.insert_many(
        [{"_id": i, "type": "github", "itemId": str(i), "date": now, "sinkPending": True} for i in ids]
    )
    return {str(i) for i in ids}


def with_plugin(tmp_path: Path) -> dict[str, str]:
    import os

    plugin = install_plugin(tmp_path / "plugin")
    return {"PYTHONPATH": os.pathsep.join(p for p in (plugin, os.environ.get("PYTHONPATH", "")) if p)}


def run_with(args: list[str], env_file: Path, extra: dict[str, str]) -> subprocess.CompletedProcess:
    import os

    from helpers.proc import collector_cmd

    environ = {k: v for k, v in os.environ.items() if not k.startswith("COLLECTOR_")} | {"COLLECTOR_ENV": "test"}
    command = collector_cmd("--env-file", str(env_file), *args)
    return subprocess.run(command, capture_output=True, text=True, env=environ | extra, cwd=env_file.parent, timeout=60)


HOOK = {"SINK_HOOK_KIND": "webhook", "SINK_HOOK_URL": "https://hooks.example/in", "SINK_HOOK_SECRET": WEBHOOK_SECRET}
BAD = [
    ({"SINK_HOOK_URL": "http://hooks.example/in"}, "SINK_HOOK_URL"),
    ({"SINK_HOOK_URL": f"https://me:{PASSWORD}@hooks.example/in"}, "SINK_HOOK_URL"),
    ({"SINK_HOOK_URL": "https://10.20.30.40/in"}, "SINK_HOOK_URL"),
    ({"SINK_HOOK_SECRET": PASSWORD}, "SINK_HOOK_SECRET"),
    ({"SINK_HOOK_SECRET": "whsec_" + base64.b64encode(PASSWORD.encode()).decode()}, "SINK_HOOK_SECRET"),
    (
        {
            "SINKS": "hook,search",
            "SINK_SEARCH_KIND": "opensearch",
            "SINK_SEARCH_URL": "http://127.0.0.1:1",
            "SINK_SEARCH_INDEX": "My Likes",
        },
        "SINK_SEARCH_INDEX",
    ),  # fmt: skip
    (
        {
            "SINKS": "hook,ts",
            "SINK_TS_KIND": "typesense",
            "SINK_TS_URL": "http://127.0.0.1:1",
            "SINK_TS_API_KEY": "k",
            "SINK_TS_COLLECTION": "likes/2026",
        },
        "SINK_TS_COLLECTION",
    ),  # fmt: skip
    (
        {"SINKS": "hook,p", "SINK_P_KIND": "shelf", "SINK_P_URL": "http://127.0.0.1:1", "SINK_P_SHELF": "Top"},
        "SINK_P_SHELF",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("spoiled", "named"), BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)])
def test_collector_sink_refuses_a_bad_sink_setting_in_one_line_before_registering_anything(
    tmp_path, wire, spoiled, named
):
    items(wire, 2)
    env_file = write_env(tmp_path / "collector.env", **{"MONGODB_URI": wire.uri, "SINKS": "hook", **HOOK, **spoiled})
    extra = with_plugin(tmp_path)
    for args in (["sink"], ["sink", "--once"], ["--check-config"], ["sinks", "list"], ["sinks", "status"]):
        result = run_with(args, env_file, extra)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and result.stdout == "", (args, result)
        assert len(lines) == 1 and named in lines[0] and "Traceback" not in result.stderr, (args, result.stderr)
        assert PASSWORD not in result.stderr and base64.b64encode(PASSWORD.encode()).decode() not in result.stderr
    db = wire.client.get_database("likeastore")
    assert db.sinks.count_documents({}) == 0 and db.sinkQueue.count_documents({}) == 0
    assert db.items.count_documents({"sinkPending": True}) == 2


def test_a_reload_with_a_bad_sink_setting_is_refused_and_the_old_settings_kept(tmp_path, wire, receiver):
    port = free_port()
    log = tmp_path / "sink.log"
    good = {"MONGODB_URI": wire.uri, "LOG_LEVEL": "INFO", "SINKS": "p", "SINK_P_KIND": "shelf"}
    good |= {"SINK_P_URL": receiver.url, "SINK_P_SHELF": "low"}
    env_file = write_env(tmp_path / "collector.env", **good)
    process = start(["sink", "--metrics-port", str(port)], env_file, log, **with_plugin(tmp_path))
    try:
        first = items(wire, 3)
        wait_until(lambda: first <= receiver.ids, timeout=60)
        spoilt = [
            ({"SINK_P_SHELF": "HIGH"}, "SINK_P_SHELF"),
            ({"SINKS": "p,hook", **HOOK, "SINK_HOOK_SECRET": PASSWORD}, "SINK_HOOK_SECRET"),
            ({"SINKS": "p,hook", **HOOK, "SINK_HOOK_URL": "http://hooks.example/in"}, "SINK_HOOK_URL"),
        ]
        for number, (spoiled, named) in enumerate(spoilt, start=1):
            write_env(env_file, **{**good, **spoiled})
            process.send_signal(signal.SIGHUP)
            refusals = wait_until(lambda n=number: (lambda r: r if len(r) == n else None)(refused(log)), timeout=60)
            assert named in refusals[-1] and PASSWORD not in refusals[-1]
        then = items(wire, 4)  # the old settings still deliver
        wait_until(lambda: then <= receiver.ids, timeout=60)
        assert process.poll() is None and get(port, "/healthz")[0] == 200
        db = wire.client.get_database("likeastore")
        assert {doc["_id"] for doc in db.sinks.find({"kind": {"$exists": True}})} == {"p"}
    finally:
        assert stop(process) == 0
    text = log.read_text()
    assert "Traceback" not in text and PASSWORD not in text and "hook registered" not in text


def refused(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "reload refused" in line]


def test_the_collector_daemon_refuses_a_bad_sink_setting_at_start_and_at_a_reload(tmp_path, wire):
    port = free_port()
    log = tmp_path / "collector.log"
    good = {"MONGODB_URI": wire.uri, "METRICS_PORT": port, "HEARTBEAT_SECONDS": 1, "LOOP_IDLE_PAUSE": 1}
    good |= {"LOG_LEVEL": "INFO", "SINKS": "hook", **HOOK}
    env_file = write_env(tmp_path / "collector.env", **good, SINK_HOOK_BATCH="many")
    result = run(["--mode", "normal", "--once"], env_file)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "SINK_HOOK_BATCH" in result.stderr
    write_env(env_file, **good)
    daemon = start(["--mode", "normal"], env_file, log)
    try:
        wait_until(lambda: get(port, "/healthz")[0] == 200)
        write_env(env_file, **{**good, "SINK_HOOK_SECRET": PASSWORD})
        daemon.send_signal(signal.SIGHUP)
        line = wait_until(lambda: refused(log))[0]
        assert "SINK_HOOK_SECRET" in line and PASSWORD not in line
        assert daemon.poll() is None and get(port, "/healthz")[0] == 200
    finally:
        assert stop(daemon) == 0
    assert "Traceback" not in log.read_text()
