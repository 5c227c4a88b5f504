"""`collector status --check` names the networks that wait for re-authorisation (`collector connect` renews them)."""

from __future__ import annotations

import pytest

from collector import cli
from collector.engine.store import Store
from collector.ops.status import gather
from collector.ops.statuscheck import OK, WARNING, check
from collector.sdk import utcnow

from helpers import T0


def live(db) -> None:
    for mode in ("initial", "normal"):
        Store(db).beat(f"box-{mode}", {"mode": mode, "heartbeatAt": T0, "heartbeatSeconds": 15})


@pytest.mark.parametrize("waiting", [1, 3, 5, 8])
def test_check_warns_and_names_the_first_networks_waiting(db, settings, waiting):
    live(db)
    for n in range(waiting):
        db.networks.insert_one({"_id": f"n{n}", "user": f"u{n}@example.com", "service": "github", "unauthorized": True})
    db.networks.insert_one({"_id": "ok", "user": "fine@example.com", "service": "github", "scheduledTo": T0})
    code, line = check(gather(db, T0, 15), settings)
    assert code == WARNING
    assert f"{waiting} networks wait for re-authorisation (collector connect SERVICE --user EMAIL)" in line
    named = [f"u{n}@example.com github (n{n})" for n in range(min(waiting, 5))]
    assert all(name in line for name in named) and "fine@example.com" not in line
    assert (f"and {waiting - 5} more" in line) == (waiting > 5) and line.count("|") == 1


def test_no_network_waiting_no_warning(db, settings):
    live(db)
    db.networks.insert_one({"user": "a@example.com", "service": "github", "unauthorized": False})
    assert check(gather(db, T0, 15), settings)[0] == OK


@pytest.mark.parametrize("user", ["a|b@example.com", {"$gt": ""}, "evil\x1b[2J@example.com", None])
def test_odd_fields_are_named_plainly_on_one_line(cli_db, capsys, user):
    now = utcnow()
    for mode in ("initial", "normal"):
        Store(cli_db).beat(f"box-{mode}", {"mode": mode, "heartbeatAt": now, "heartbeatSeconds": 15})
    cli_db.networks.insert_one({"user": user, "service": "git|hub", "unauthorized": True})
    assert cli.main(["status", "--check"]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.count("|") == 1 and "\x1b" not in out
    assert "1 networks wait for re-authorisation" in out
