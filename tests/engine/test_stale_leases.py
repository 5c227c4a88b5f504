"""A lease is held only by a living holder: a network's `leaseUntil` counts only while it lies in the future and
no further ahead than LEASE_SECONDS (plus LEASE_SKEW for clocks) — further, no collector that renews wrote it, and
the next claim takes it over and says so. The same rule wherever "leased" is decided: the claim, a run by hand,
`networks list`, `collector status` and its `--check`, the monitor. Time passed in, never slept."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from collector.engine import Collector
from collector.engine.store import LEASE_SKEW, due_query, lease_state
from collector.monitor import reading, view
from collector.ops import networks as admin
from collector.ops import status, statuscheck

from helpers import T0, add_network, network

LEASE = 300.0  # the test settings' LEASE_SECONDS
BOUND = LEASE + LEASE_SKEW

# (end date as a dead holder or a shell wrote it, whether a newcomer takes the network at T0)
ENDS = [
    (datetime(2099, 1, 1, tzinfo=T0.tzinfo), True),  # years ahead
    (T0 + timedelta(days=40), True),
    (T0 + timedelta(seconds=BOUND + 1), True),  # just past the bound
    (T0 + timedelta(seconds=BOUND - 1), False),  # within the bound: a holder whose clock runs a little ahead
    (T0 + timedelta(seconds=LEASE / 2), False),  # a lease renewed a while ago
    (T0 - timedelta(seconds=1), True),  # lapsed
    (T0 - timedelta(days=365), True),
    ("2099-01-01", True),  # text a shell wrote
    ({"$date": 4102444800000}, True),
    (None, True),
]


@pytest.fixture
def lease_settings(settings):
    return settings.with_(lease_seconds=LEASE)


def leased(db, until, **fields) -> dict:
    return add_network(
        db, **{"scheduledTo": T0 - timedelta(minutes=5), "leaseOwner": "ghost", **fields}, leaseUntil=until
    )


@pytest.mark.parametrize(("until", "taken"), ENDS)
def test_a_claim_takes_a_network_whose_lease_no_live_holder_keeps(db, lease_settings, until, taken):
    doc = leased(db, until)
    collector = Collector(db, lease_settings, instance_id="newcomer")
    won = collector.claims.claim("initial", 50, T0)
    assert [c.network["_id"] for c in won] == ([doc["_id"]] if taken else [])
    assert network(db, doc)["leaseOwner"] == ("newcomer" if taken else "ghost")
    assert collector.due("initial", T0) == 0  # claimed now, or held by a live holder: due for no one else


def test_the_claim_says_in_one_line_that_it_took_over_stale_leases(db, lease_settings, caplog):
    for k in range(3):
        leased(db, datetime(2099, 1, 1, tzinfo=T0.tzinfo), user=f"u{k}\x1b[31m@x.test", leaseOwner="ghost\x1b[2J")
    leased(db, T0 - timedelta(seconds=5), user="lapsed@x.test")  # an ordinary lapse: taken silently, as always
    caplog.set_level(logging.INFO, logger="collector.engine.store")
    won = Collector(db, lease_settings, instance_id="newcomer").claims.claim("initial", 50, T0)
    assert len(won) == 4
    lines = [r.getMessage() for r in caplog.records if "took over" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("took over 3 networks whose lease no live holder keeps")
    assert "2099-01-01" in lines[0] and "\x1b" not in lines[0] and "ghost" in lines[0]


def test_a_live_holder_keeps_its_networks_and_a_renewed_lease_stays_its_own(db, lease_settings):
    doc = add_network(db, scheduledTo=T0 - timedelta(minutes=5))
    a = Collector(db, lease_settings, instance_id="a")
    b = Collector(db, lease_settings, instance_id="b")
    assert len(a.claims.claim("initial", 10, T0)) == 1
    for seconds in (1, 100, 299):
        assert b.claims.claim("initial", 10, T0 + timedelta(seconds=seconds)) == []
    assert network(db, doc)["leaseOwner"] == "a"


@pytest.mark.parametrize(("until", "taken"), ENDS[:6])
def test_a_run_by_hand_takes_a_stale_lease_and_leaves_a_live_one(db, lease_settings, until, taken):
    doc = leased(db, until)
    claimed = Collector(db, lease_settings, instance_id="operator").claims.claim_one(doc["_id"], T0)
    assert (claimed is not None) == taken
    assert network(db, doc)["leaseOwner"] == ("operator" if taken else "ghost")


def test_the_rule_is_the_same_in_python_and_in_the_query(db):
    """`lease_state` (networks list, show, the monitor, a dry run) and the claim's filter agree on every end."""
    for until, _ in ENDS:
        doc = leased(db, until)
        free = db.networks.count_documents({"_id": doc["_id"], **due_query("initial", T0, LEASE)}) == 1
        assert free == (lease_state(until, T0, LEASE) != "held"), until
        db.networks.delete_one({"_id": doc["_id"]})


def test_networks_list_says_stale_lease_and_leased_lists_only_live_ones(db):
    live = leased(db, T0 + timedelta(seconds=100), user="live@x.test")
    stale = leased(db, datetime(2099, 1, 1, tzinfo=T0.tzinfo), user="stale@x.test")
    rows = {r["user"]: r["state"] for r in admin.list_networks(db, T0, lease_seconds=LEASE)}
    assert rows == {"live@x.test": "leased", "stale@x.test": "staleLease"}
    chosen = admin.list_networks(db, T0, state="leased", lease_seconds=LEASE)
    assert [r["user"] for r in chosen] == ["live@x.test"]
    assert admin.count_networks(db, T0, state="leased", lease_seconds=LEASE) == 1
    assert admin.shown(network(db, stale), T0, LEASE)["state"] == "staleLease"
    # a longer LEASE_SECONDS believes a further end
    assert admin.state_of(network(db, stale), T0, lease_seconds=100 * 365 * 86400) == "leased"
    # an operator's change never goes under a lease, a stale one included; the line says the claim takes it over
    lines = admin.reset(db, T0, [str(stale["_id"]), str(live["_id"])])
    assert lines.refused == 2 and "takes it over at its next claim" in lines[0]
    assert "takes it over" not in lines[1]


def test_status_counts_far_leases_apart_and_check_warns(db, lease_settings):
    leased(db, datetime(2099, 1, 1, tzinfo=T0.tzinfo), user="far1@x.test")
    leased(db, T0 + timedelta(seconds=BOUND + 5), user="far2@x.test", mode="normal")
    leased(db, T0 + timedelta(seconds=60), user="live@x.test", leaseOwner="alive")
    leased(db, T0 - timedelta(seconds=60), user="lapsed@x.test")
    report = status.gather(db, T0, 60.0, LEASE)
    initial, normal = report["modes"]["initial"], report["modes"]["normal"]
    assert (initial["farLeases"], initial["leased"], initial["expiredLeases"]) == (1, {"alive": 1}, 1)
    assert normal["farLeases"] == 1
    assert initial["due"] == 2 and normal["due"] == 1  # the far ones are due: the next claim takes them
    assert "STALE LEASES: mode initial, 1 networks" in status.render(report)
    code, line = statuscheck.check(report, lease_settings)
    assert code >= statuscheck.WARNING
    assert "mode initial: 1 network leases end further ahead than LEASE_SECONDS allows" in line
    assert "mode normal: 1 network leases end further ahead" in line


def test_status_check_is_quiet_about_leases_within_the_bound(db, lease_settings):
    leased(db, T0 + timedelta(seconds=BOUND - 1), leaseOwner="alive")
    report = status.gather(db, T0, 60.0, LEASE)
    assert report["modes"]["initial"]["farLeases"] == 0
    assert "further ahead" not in statuscheck.check(report, lease_settings)[1]


def test_the_monitor_judges_leases_by_the_same_rule(db):
    leased(db, datetime(2099, 1, 1, tzinfo=T0.tzinfo), user="far@x.test")
    leased(db, T0 + timedelta(seconds=30), user="live@x.test", leaseOwner="alive")
    work = view.work(reading.read_work(db, T0, LEASE), T0)
    assert work["modes"]["initial"]["farLeases"] == 1 and work["modes"]["initial"]["leased"] == 1
    assert work["modes"]["initial"]["due"] == 1
    assert [b["user"] for b in work["behind"]] == ["far@x.test"]


def test_housekeeping_clears_a_lease_no_claim_would_take(db, lease_settings, caplog):
    """A disabled network (or one not due for a year) with a lease left years ahead: no claim takes it over, so
    housekeeping clears it, as it clears a lease that lapsed long ago; a live one stays."""
    far = leased(db, datetime(2099, 1, 1, tzinfo=T0.tzinfo), disabled=True, leaseToken="t1", leaseEpoch=9)
    later = leased(
        db, T0 + timedelta(days=3), scheduledTo=T0 + timedelta(days=365), leaseToken="t2", leaseOwner="gone\x1b[2J"
    )
    live = leased(db, T0 + timedelta(seconds=BOUND - 1), leaseToken="t3", leaseOwner="alive")
    collector = Collector(db, lease_settings)
    with caplog.at_level(logging.INFO, logger="collector.housekeeping"):
        assert collector.housekeep(T0)["leasesCleared"] == 2
    for doc in (far, later):
        assert not {"leaseOwner", "leaseUntil", "leaseToken"} & set(network(db, doc))
    assert network(db, far)["leaseEpoch"] == 9  # a late save of the old lease stays fenced
    assert network(db, live)["leaseOwner"] == "alive"
    assert "further ahead than a lease reaches" in caplog.text and "\x1b" not in caplog.text
    assert status.gather(db, T0, 60.0, LEASE)["modes"]["initial"]["farLeases"] == 0
    collector.close()
