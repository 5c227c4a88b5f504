"""Heartbeats and `collector status`: what an operator sees, read from MongoDB only."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

from collector import cli
from collector.daemon import Daemon
from collector.daemon.heartbeat import Heartbeat
from collector.engine import Collector
from collector.engine.registry import Registry
from collector.engine.store import Store
from collector.ops.status import gather
from collector.ops.statuscheck import CRITICAL, OK, WARNING, check
from collector.sdk import Connector, Result

from helpers import T0, add_network
from helpers.proc import wait_until


def test_a_heartbeat_is_written_kept_fresh_while_running_and_removed_on_a_clean_exit(db, settings):
    now = {"t": T0}
    beat = Heartbeat(Store(db), "box-1", "normal", every=0.0, version="9.9", clock=lambda: now["t"])
    beat.on_tick(3)  # the loop's round notes what is in flight; the heartbeat job writes it
    assert db.collectors.count_documents({}) == 0
    beat.beat()
    doc = db.collectors.find_one({"_id": "box-1"})
    assert doc["mode"] == "normal" and doc["inflight"] == 3 and doc["heartbeatAt"] == T0 and doc["version"] == "9.9"
    now["t"] = T0 + timedelta(seconds=20)
    beat.on_tick(1)
    beat.beat()
    assert db.collectors.find_one({"_id": "box-1"})["heartbeatAt"] == T0 + timedelta(seconds=20)
    beat.close()
    assert db.collectors.count_documents({}) == 0


def test_an_instance_silent_for_three_heartbeats_is_dead(db):
    Store(db).beat("box-2", {"mode": "initial", "heartbeatAt": T0, "heartbeatSeconds": 15})
    assert gather(db, T0 + timedelta(seconds=45), 15)["instances"][0]["live"] is True
    assert gather(db, T0 + timedelta(seconds=46), 15)["instances"][0]["live"] is False


class Waits(Connector):
    name = "waits"
    gate = threading.Event()

    def initial(self, job):
        assert type(self).gate.wait(30)
        return Result([{"itemId": job.network["user"], "source": "https://x.test/"}], done=True)

    def normal(self, job):
        return self.initial(job)


def test_the_daemon_beats_while_a_network_runs_and_is_gone_after_a_stop(db, settings):
    add_network(db, service="waits")
    collector = Collector(
        db, settings.with_(heartbeat_seconds=0.05), registry=Registry({"waits": Waits}), instance_id="box-3"
    )
    daemon = Daemon(collector, "initial")
    Waits.gate.clear()
    beats = []
    original = collector.store.beat
    collector.store.beat = lambda instance, doc: beats.append(doc["inflight"]) or original(instance, doc)
    thread = threading.Thread(target=daemon.run)
    thread.start()
    wait_until(lambda: beats.count(1) >= 3, timeout=120)  # several heartbeats while the network was in flight
    daemon.stopping.set()
    Waits.gate.set()
    thread.join(30)
    assert beats.count(1) >= 3 and not thread.is_alive()
    assert db.collectors.count_documents({}) == 0


def seed(db):
    add_network(db, user="a@x.test", mode="normal", scheduledTo=T0 - timedelta(minutes=40))
    add_network(db, user="b@x.test", mode="normal", scheduledTo=T0 - timedelta(minutes=10))
    add_network(
        db,
        user="c@x.test",
        mode="normal",
        scheduledTo=T0 + timedelta(minutes=10),
        errors=2,
        lastError={"kind": "transient"},
    )
    add_network(db, user="d@x.test", service="gist", disabled=True, errors=5, lastError={"kind": "badResponse"})
    add_network(db, user="e@x.test", mode="rateLimit", prevMode="initial", scheduledTo=T0 + timedelta(hours=1))
    add_network(
        db,
        user="f@x.test",
        mode="normal",
        leaseOwner="box-9",
        leaseUntil=T0 + timedelta(minutes=1),
        scheduledTo=T0 + timedelta(minutes=15),
    )
    db.items.insert_many(
        [
            {"user": "a@x.test", "type": "github", "itemId": str(k), "date": T0 - timedelta(minutes=k)}
            for k in (1, 30, 90, 2000)
        ]
    )


def test_status_counts_modes_services_items_and_the_schedule_lag(db):
    seed(db)
    status = gather(db, T0, 15)
    normal, initial = status["modes"]["normal"], status["modes"]["initial"]
    assert normal["networks"] == 4 and normal["due"] == 2 and normal["lagSeconds"] == 2400
    assert normal["erroring"] == {"transient": 1} and normal["leased"] == {"box-9": 1}
    assert initial["networks"] == 2 and initial["rateLimit"] == 1 and initial["disabled"] == 1 and initial["due"] == 0
    assert status["services"]["gist"] == {"networks": 1, "erroring": 1, "disabled": 1}
    assert status["items"] == {"total": 4, "lastHour": 2, "lastDay": 3}


def test_check_names_every_problem_with_its_level_and_performance_data(db, settings):
    seed(db)  # normal: 2 due, the oldest 2400 s late; no collector alive
    code, line = check(gather(db, T0, 15), settings)
    assert code == CRITICAL
    assert line.startswith("CRITICAL: mode normal: 2 networks due and no live collector; mode normal: schedule lag")
    assert "lag_normal=2400s;900;1800;0" in line and "due_normal=2;;;0" in line and "live_normal=0" in line
    Store(db).beat("box-1", {"mode": "normal", "heartbeatAt": T0, "heartbeatSeconds": 15})
    # a live collector, and the default bounds derived from NORMAL_INTERVAL (900 s): 2400 s is past twice that
    assert check(gather(db, T0, 15), settings)[0] == CRITICAL
    assert check(gather(db, T0, 15), settings.with_(normal_interval=1500))[0] == WARNING
    code, line = check(gather(db, T0, 15), settings.with_(normal_interval=3600))
    assert code == OK and line.startswith("OK: ") and "lag_normal=2400s;3600;7200;0" in line
    assert check(gather(db, T0, 15), settings, warn=3000, crit=6000)[0] == OK
    assert check(gather(db, T0, 15), settings, warn=600, crit=6000)[0] == WARNING


def test_the_status_command_prints_tables_json_and_exit_codes(cli_db, capsys):
    from collector.sdk import utcnow

    now = utcnow()
    add_network(cli_db, mode="normal", scheduledTo=now - timedelta(minutes=5))
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "normal" in out and "(no collector has a heartbeat)" in out
    assert cli.main(["status", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["modes"]["normal"]["due"] == 1 and shown["instances"] == []
    assert cli.main(["status", "--check"]) == 2  # CRITICAL
    out = capsys.readouterr().out.strip()
    assert out.startswith("CRITICAL: mode normal: 1 networks due and no live collector |") and "\n" not in out
    Store(cli_db).beat("box-1", {"mode": "normal", "heartbeatAt": now, "heartbeatSeconds": 15})
    assert cli.main(["status", "--check"]) == 0  # 5 minutes late: within the default bounds
    assert capsys.readouterr().out.startswith("OK: ")
    assert cli.main(["status", "--check", "--max-lag", "3600"]) == 0
    assert cli.main(["status", "--check", "--warn-lag", "60", "--crit-lag", "3600"]) == 1  # WARNING
    assert cli.main(["status", "--check", "--crit-lag", "60"]) == 2  # CRITICAL


def test_pauses_in_status_and_check_a_paused_mode_warns_and_an_expired_pause_is_named(cli_db, capsys):
    from datetime import timedelta as td

    from collector.sdk import utcnow

    now = utcnow()
    add_network(cli_db, mode="normal", scheduledTo=now - td(hours=3))  # due, no collector: CRITICAL unpaused
    assert cli.main(["status", "--check"]) == 2
    capsys.readouterr()
    assert cli.main(["pause", "--mode", "normal", "--reason", "db migration", "--until", "2h"]) == 0
    assert capsys.readouterr().out.startswith("paused mode normal, service every service until ")
    assert cli.main(["status", "--check"]) == 1  # the operator's decision: WARNING, not CRITICAL
    assert "mode normal paused since" in capsys.readouterr().out
    cli_db.control.update_one({"_id": "pause:normal:*"}, {"$set": {"until": now - td(minutes=1)}})
    assert cli.main(["status", "--check"]) == 2  # expired: it no longer holds, and it is named
    out = capsys.readouterr().out
    assert "pause of mode normal, service * expired" in out and "no live collector" in out
    assert cli.main(["status"]) == 0 and "EXPIRED pause: mode normal" in capsys.readouterr().out
    assert cli.main(["resume", "--mode", "normal"]) == 0
    assert cli.main(["resume", "--mode", "normal"]) == 1
    for bad in ("yesterday", "0m"):
        try:
            cli.main(["pause", "--until", bad])
        except SystemExit as exit:
            assert exit.code == 2
        else:
            raise AssertionError(bad)


def test_what_pauses_hold_back_for_a_mode():
    from datetime import timedelta as td

    from collector.engine.store.control import Pause, holding

    def pause(mode, service, until=None):
        return Pause(mode, service, "", "op", T0, until)

    assert holding([pause("normal", "*")], "normal", T0) == (True, set())
    assert holding([pause("normal", "*")], "initial", T0) == (False, set())
    assert holding([pause("*", "github"), pause("initial", "reddit")], "initial", T0) == (False, {"github", "reddit"})
    assert holding([pause("*", "*", until=T0 - td(seconds=1))], "normal", T0) == (False, set())
