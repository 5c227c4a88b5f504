"""The command line and the daemon loop: --once, signals, the demo."""

from __future__ import annotations

import io
import json
import os
import signal

import mongomock
import pytest

from collector import cli
from collector.daemon import Daemon
from collector.devtools import demo
from collector.devtools.fakeapi import make_stars
from collector.engine import Collector, store
from collector.engine.registry import Registry
from collector.sdk.connector import Connector, Result
from collector.sdk.timeutil import utcnow

from helpers import TOKEN, GitHubStub, add_network, network


@pytest.fixture
def shared_client(monkeypatch, tmp_path):
    uri = "mongodb://localhost:27017/likeastore_test"  # the test environment's MONGODB_URI
    client = mongomock.MongoClient(uri, tz_aware=True)

    def connect(given_uri, **options):
        assert given_uri == uri and options["tz_aware"] is True
        return client

    monkeypatch.setattr(store, "MongoClient", connect)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.test")
    return client


def test_once_runs_one_pass_and_exits(shared_client, http_mock):
    db = shared_client.get_default_database()
    GitHubStub(http_mock, stars=make_stars(150, seed=2), clock=utcnow())
    doc = add_network(db)
    assert cli.main(["--mode", "initial", "--once"]) == 0
    assert db.items.count_documents({}) == 100  # one pass: one page
    assert network(db, doc)["page"] == 2


def test_json_logs_are_one_object_per_line_with_the_runs_fields(shared_client, http_mock, monkeypatch, capsys):
    db = shared_client.get_default_database()
    GitHubStub(http_mock, stars=make_stars(150, seed=2), clock=utcnow())
    add_network(db)
    monkeypatch.setenv("LOG_FORMAT", "json")
    assert cli.main(["--mode", "initial", "--once"]) == 0
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line parses
    runs = [line for line in lines if line["logger"] == "collector.run"]
    assert len(runs) == 1
    run = runs[0]
    assert run["service"] == "github" and run["status"] == "ok" and run["mode"] == "initial"
    assert run["new_items"] == 100 and run["requests"] == 1 and run["saved"] is True
    assert run["level"] == "INFO" and run["time"].endswith("+00:00") and run["message"].startswith("run service=github")
    assert TOKEN not in err


def test_no_mode_is_a_usage_error(capsys):
    assert cli.main([]) == 2
    assert "--mode" in capsys.readouterr().err


class SignalOnFirstRun(Connector):
    """A connector that sends this process SIGTERM while its first network is in flight."""

    name = "signalling"
    runs = 0

    def initial(self, job):
        type(self).runs += 1
        if type(self).runs == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return Result([{"itemId": str(type(self).runs), "type": "signalling", "source": "https://x.test"}], done=True)

    def normal(self, job):
        return self.initial(job)


@pytest.fixture
def restore_signal_handlers():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_first_signal_finishes_the_network_in_flight_then_exits_zero(settings, restore_signal_handlers):
    db = mongomock.MongoClient(tz_aware=True)["d"]
    for k in range(3):
        db.networks.insert_one({"user": f"u{k}@x.test", "service": "signalling", "accessToken": "tok-abcdef"})
    collector = Collector(db, settings, registry=Registry({"signalling": SignalOnFirstRun}), concurrency=1)
    daemon = Daemon(collector, "initial")
    daemon.install_signal_handlers()
    SignalOnFirstRun.runs = 0
    assert daemon.run() == 0  # returns instead of looping: the stop was requested
    assert SignalOnFirstRun.runs == 1
    assert db.items.count_documents({}) == 1
    assert db.networks.count_documents({"mode": "normal"}) == 1  # its state was saved
    # the two networks claimed but not started were given back for the next start (or another collector)
    assert db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0


def test_second_signal_exits_at_once(settings, monkeypatch):
    exits = []
    monkeypatch.setattr("os._exit", lambda code: exits.append(code))
    daemon = Daemon(Collector(mongomock.MongoClient(tz_aware=True)["d"], settings), "normal")
    daemon.on_signal(signal.SIGTERM)
    assert daemon.stopping.is_set() and exits == []
    daemon.on_signal(signal.SIGINT)
    assert exits == [128 + signal.SIGINT]


def test_a_failing_loop_does_not_stop_the_daemon(settings, monkeypatch):
    collector = Collector(mongomock.MongoClient(tz_aware=True)["d"], settings)
    daemon = Daemon(collector, "normal")
    calls = []

    def flaky(mode, should_stop, wait):
        calls.append(mode)
        if len(calls) == 1:
            raise RuntimeError("database went away")
        daemon.stopping.set()

    monkeypatch.setattr(collector, "serve", flaky)
    assert daemon.run() == 0
    assert calls == ["normal", "normal"]


def test_once_exits_nonzero_when_the_pass_fails(settings, monkeypatch):
    collector = Collector(mongomock.MongoClient(tz_aware=True)["d"], settings)
    monkeypatch.setattr(collector, "run_pass", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("down")))
    assert Daemon(collector, "initial").run(once=True) == 1


@pytest.mark.system
def test_demo_finishes_with_every_network_normal_and_every_star_collected():
    out = io.StringIO()
    assert demo.run(out=out) == 0
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    assert summary["networks_normal"] == summary["networks"] == len(demo.DEMO_USERS)
    assert summary["items"] == summary["items_expected"] > 300


def test_concurrency_and_instance_id_reach_the_collector(shared_client, http_mock, monkeypatch):
    from collector import engine

    seen = {}

    class Spy(engine.Collector):
        def __init__(self, *args, **kwargs):
            seen.update(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(engine, "Collector", Spy)
    assert cli.main(["--mode", "normal", "--once", "--concurrency", "3", "--instance-id", "box-7"]) == 0
    assert seen["concurrency"] == 3 and seen["instance_id"] == "box-7"


@pytest.mark.parametrize("given", ["0", "4097"])
def test_concurrency_must_be_from_1_to_4096(capsys, given):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--mode", "normal", "--concurrency", given])
    assert exit_.value.code == 2 and "--concurrency must be from 1 to 4096" in capsys.readouterr().err


def test_a_numbered_mode_runs_that_mode_under_its_own_instance_id(shared_client, monkeypatch):
    import socket

    from collector import engine

    seen = {}

    class Spy(engine.Collector):
        def __init__(self, *args, **kwargs):
            seen.update(kwargs)
            super().__init__(*args, **kwargs)

        def run_pass(self, mode, **kwargs):
            seen["mode"] = mode
            return super().run_pass(mode, **kwargs)

    monkeypatch.setattr(engine, "Collector", Spy)
    assert cli.main(["--mode", "normal-2", "--once"]) == 0
    assert seen["mode"] == "normal" and seen["instance_id"] == f"{socket.gethostname()}-normal-2"
    with pytest.raises(SystemExit):
        cli.main(["--mode", "normal-"])


@pytest.mark.system
def test_healthcheck_without_a_metrics_port_says_so_and_exits_1(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.delenv("METRICS_PORT", raising=False)
    assert cli.main(["healthcheck"]) == 1
    assert "METRICS_PORT is not set" in capsys.readouterr().err
    monkeypatch.setenv("METRICS_PORT", "1")  # nothing listens there
    assert cli.main(["healthcheck", "--timeout", "2"]) == 1
    assert capsys.readouterr().out.startswith("unhealthy: http://127.0.0.1:1/healthz did not answer")
