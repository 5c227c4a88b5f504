"""What the claim's index range holds is what is due (issue 45): a claim moves `scheduledTo` with its lease, a
network that cannot run leaves the range (parked) and comes back by itself, and what other programs write —
no `scheduledTo`, one that is no date, a mode nobody serves, a flag set or cleared — is repaired apart from the
claim's filter, within a bound. Time is passed in; the repair's clock is monkeypatched, never slept."""

from __future__ import annotations

from datetime import timedelta

import mongomock
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from pymongo import MongoClient

from collector import run_once
from collector.devtools.fakeapi import make_stars
from collector.devtools.mongowire import WireServer as MongoWire
from collector.engine import Collector
from collector.engine.rules import on_failure
from collector.engine.store import PARK_SECONDS, Store, due_range
from collector.engine.store import networks as network_store
from collector.engine.store.filters import flag_clear, not_true
from collector.sdk.errors import Interrupted, Retired, Unauthorized

from helpers import T0, GitHubStub, add_network, examples, network

LEASE = timedelta(seconds=300)
PARK = timedelta(seconds=PARK_SECONDS)


def in_range(db, mode: str, now) -> set:
    return {d["user"] for d in db.networks.find(due_range(mode, now))}


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=1), timedelta(days=30)])
def test_a_claim_moves_scheduled_to_with_its_lease_and_returns_the_time_it_was_due(db, late):
    doc = add_network(db, mode="normal", scheduledTo=T0 - late)
    store = Store(db)
    (won,) = store.claim("normal", T0, 10, "a", T0 + LEASE)
    assert won["scheduledTo"] == T0 - late  # what the lag and a give-back read
    assert network(db, doc)["scheduledTo"] == T0 + LEASE  # out of the due range while held
    assert in_range(db, "normal", T0 + LEASE - timedelta(seconds=1)) == set()
    assert store.count_due("normal", T0) == 0
    store.renew([doc["_id"]], "a", T0 + 2 * LEASE)
    assert network(db, doc)["scheduledTo"] == T0 + 2 * LEASE
    store.release([(doc["_id"], 1, won["scheduledTo"])])  # given back unrun: due as it was
    state = network(db, doc)
    assert state["scheduledTo"] == T0 - late and "leaseOwner" not in state
    assert store.count_due("normal", T0) == 1


@pytest.mark.system
def test_leases_given_back_go_in_one_round_trip_each_fenced_by_its_epoch():
    """On a real driver (pymongo, on the mongowire stand-in's socket) a stop's give-back is one command, however
    many networks: each update still fenced by its lease epoch and putting back the date it was due at."""
    with MongoWire() as wire:
        client = MongoClient(wire.uri, tz_aware=True)
        db = client.get_default_database()
        docs = [
            add_network(db, user=f"u{k}@x.test", mode="normal", scheduledTo=T0 - timedelta(minutes=k)) for k in range(6)
        ]
        store = Store(db)
        won = store.claim("normal", T0, 10, "a", T0 + LEASE)
        taken = db.networks.update_one({"_id": docs[0]["_id"]}, {"$inc": {"leaseEpoch": 1}})  # another's lease now
        before = wire.commands
        store.release([(w["_id"], w["leaseEpoch"], w["scheduledTo"]) for w in won])
        assert wire.commands - before == 1
        states = {d["_id"]: d for d in db.networks.find({})}
        client.close()
    assert len(won) == 6 and taken.modified_count == 1
    assert states[docs[0]["_id"]]["leaseOwner"] == "a"  # fenced: its epoch moved on, left as the other holds it
    for k, doc in enumerate(docs[1:], start=1):
        assert "leaseOwner" not in states[doc["_id"]] and states[doc["_id"]]["scheduledTo"] == T0 - timedelta(minutes=k)


def test_a_network_given_back_by_a_stop_is_due_again_at_once(db, settings):
    docs = [add_network(db, user=f"u{k}@x.test", scheduledTo=T0 - timedelta(minutes=k)) for k in range(3)]
    collector = Collector(db, settings, instance_id="a")
    claimed = collector.claims.claim("initial", 10, T0)
    leases = collector.claims.leases(lambda: T0, lambda: [])
    leases.give_back(c.network for c in claimed)
    assert [network(db, d)["scheduledTo"] for d in docs] == [T0 - timedelta(minutes=k) for k in range(3)]
    assert Store(db).count_due("initial", T0) == 3


@pytest.mark.parametrize(("error", "flag"), [(Unauthorized("401"), "unauthorized"), (Retired("retired"), "disabled")])
def test_a_run_that_ends_unable_to_run_parks_the_network(settings, error, flag):
    update = on_failure({"scheduledTo": T0}, "normal", error, settings, T0, 0.5)
    assert update.values[flag] is True and update.values["scheduledTo"] == T0 + PARK


@pytest.mark.parametrize("errors", [4, 9, 50])
def test_the_failure_that_disables_a_network_parks_it(settings, errors):
    from collector.sdk.errors import Transient

    update = on_failure({"errors": errors}, "normal", Transient("503"), settings.with_(max_errors=5), T0, 0.5)
    assert update.values["disabled"] is True and update.values["scheduledTo"] == T0 + PARK


@pytest.mark.parametrize("due_at", [T0 - timedelta(hours=3), T0, "tomorrow", None])
def test_an_interrupted_run_leaves_the_network_due_as_it_was(settings, due_at):
    update = on_failure({"scheduledTo": due_at}, "normal", Interrupted("stop"), settings, T0, 0.5)
    assert update.values == {"scheduledTo": due_at if due_at not in ("tomorrow", None) else T0}


@pytest.mark.parametrize(
    ("value", "runs"),
    [
        (True, False),
        ([True], False),
        (False, True),
        (None, True),
        (1, True),
        ("yes", True),
        ({"a": 1}, True),
        ([False, True], True),
    ],
)
def test_a_claim_parks_a_network_another_program_flagged_and_claims_the_rest(db, value, runs):
    """A flag holds a network back when it is true (or an array with nothing but true in it), as the counts say."""
    assert flag_clear(value) == runs
    for flag in ("disabled", "skip", "unauthorized"):
        doc = add_network(db, user=f"{flag}@x.test", mode="normal", scheduledTo=T0 - timedelta(days=1), **{flag: value})
        store = Store(db)
        counted = store.count_due("normal", T0)
        won = store.claim("normal", T0, 10, "a", T0 + LEASE)
        assert [w["_id"] for w in won] == ([doc["_id"]] if runs else []) and counted == int(runs)
        if not runs:
            assert network(db, doc)["scheduledTo"] == T0 + PARK and "leaseOwner" not in network(db, doc)
        db.networks.delete_many({})


def test_networks_parked_at_the_front_do_not_hide_the_due_ones_behind_them(db):
    for k in range(12):
        add_network(
            db, user=f"off{k}@x.test", mode="normal", disabled=True, scheduledTo=T0 - timedelta(days=9, minutes=k)
        )
    for k in range(3):
        add_network(db, user=f"on{k}@x.test", mode="normal", scheduledTo=T0 - timedelta(hours=1))
    won = Store(db).claim("normal", T0, 5, "a", T0 + LEASE)
    assert sorted(w["user"] for w in won) == ["on0@x.test", "on1@x.test", "on2@x.test"]
    assert db.networks.count_documents({"scheduledTo": T0 + PARK}) == 12


@pytest.mark.parametrize("flag", ["disabled", "skip", "unauthorized"])
def test_a_flag_cleared_by_another_program_counts_within_the_park(db, flag):
    doc = add_network(db, mode="normal", scheduledTo=T0 - timedelta(minutes=5), **{flag: True})
    store = Store(db)
    assert store.claim("normal", T0, 10, "a", T0 + LEASE) == []  # parked
    db.networks.update_one({"_id": doc["_id"]}, {"$unset": {flag: ""}})  # the web app, scheduledTo untouched
    for seconds in (1, 600, PARK_SECONDS - 1):
        assert store.claim("normal", T0 + timedelta(seconds=seconds), 10, "a", T0 + LEASE) == []
    later = T0 + PARK
    assert [w["_id"] for w in store.claim("normal", later, 10, "a", later + LEASE)] == [doc["_id"]]


@pytest.mark.parametrize("value", ["missing", None, "tomorrow", 5, {"$date": 1}, [], b"x"])
def test_a_network_without_a_usable_schedule_is_due_and_repaired_apart(db, settings, value, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(network_store.time, "monotonic", lambda: clock[0])
    store = Store(db)
    assert store.claim("normal", T0, 10, "a", T0 + LEASE) == []  # the first claim repairs: nothing yet
    fields = {} if value == "missing" else {"scheduledTo": value}
    doc = add_network(db, mode="normal", **fields)  # the web app creates a network
    assert store.count_due("normal", T0) == 1  # counted as due at once
    clock[0] += network_store.REPAIR_EVERY - 0.5
    assert store.claim("normal", T0, 10, "a", T0 + LEASE) == []  # not repaired yet: within the bound
    clock[0] += 0.5
    won = store.claim("normal", T0 + timedelta(seconds=5), 10, "a", T0 + LEASE)
    assert [w["_id"] for w in won] == [doc["_id"]] and won[0]["scheduledTo"] == T0 + timedelta(seconds=5)


@pytest.mark.parametrize("mode", ["sideways", 7, True, {"m": 1}, "Normal", "rateLimitX", ""])
def test_a_mode_nobody_serves_is_reported_as_its_run_would_be_without_running(db, settings, http_mock, mode):
    stub = GitHubStub(http_mock, stars=make_stars(2))
    settings = settings.with_(initial_interval=60.0, initial_intervals={})
    bad = add_network(db, user="bad@x.test", mode=mode, scheduledTo=T0 - timedelta(minutes=1))
    off = add_network(db, user="off@x.test", mode=mode, disabled=True)
    assert run_once(db, "initial", settings, now=T0).tasks == 0
    state = network(db, bad)
    assert (
        state["errors"] == 1 and state["lastError"]["kind"] == "malformed" and "mode" in state["lastError"]["message"]
    )
    assert state["scheduledTo"] == T0 + timedelta(seconds=60) and stub.requests == []
    assert network(db, off)["scheduledTo"] == T0 + PARK and "lastError" not in network(db, off)
    assert run_once(db, "initial", settings, now=T0 + timedelta(seconds=1)).tasks == 0
    assert network(db, bad)["errors"] == 1  # reported once per run it would have had


def test_a_claim_that_leaves_services_out_names_the_ones_it_takes(db, settings):
    for service in ("github", "gist", "reddit", "myspace"):
        add_network(db, user=f"{service}@x.test", service=service, scheduledTo=T0 - timedelta(minutes=1))
    collector = Collector(db, settings, instance_id="a")
    won = collector.claims.claim("initial", 10, T0, skip_services={"gist"})
    assert sorted(c.network["service"] for c in won) == ["github", "reddit"]  # myspace: no connector registered
    won = collector.claims.claim("initial", 10, T0)
    assert [c.network["service"] for c in won] == ["gist", "myspace"]


@pytest.mark.parametrize("at", [T0 - timedelta(days=2), T0 + timedelta(hours=5), "soon"])
def test_a_run_by_hand_moves_scheduled_to_with_its_lease_too(db, at):
    doc = add_network(db, mode="normal", scheduledTo=at)
    won = Store(db).claim_one(doc["_id"], T0, "operator", T0 + LEASE)
    assert won is not None and won["scheduledTo"] == at
    assert network(db, doc)["scheduledTo"] == T0 + LEASE and network(db, doc)["leaseOwner"] == "operator"


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.binary(max_size=2),
    st.just(T0),
    st.dictionaries(st.sampled_from("ab"), st.booleans(), max_size=1),
)


@hsettings(max_examples=examples(200), deadline=None, derandomize=True)
@given(st.one_of(SCALARS, st.lists(SCALARS, max_size=3)))
def test_what_the_claim_reads_as_a_flag_is_what_the_counts_query(value):
    """`runnable` (the claim, in Python) and `not_true` (the counts, in the query) agree on any value."""
    db = mongomock.MongoClient(tz_aware=True)["flags"]
    db.networks.insert_one({"disabled": value})
    assert db.networks.count_documents(not_true("disabled")) == int(flag_clear(value)), value


def test_networks_list_due_lists_what_its_state_column_calls_due(db):
    from collector.ops import networks as admin

    for user, fields in {
        "past@x.test": {"scheduledTo": T0 - timedelta(minutes=1)},
        "none@x.test": {},
        "text@x.test": {"scheduledTo": "tomorrow"},
        "later@x.test": {"scheduledTo": T0 + timedelta(minutes=1)},
        "off@x.test": {"scheduledTo": T0 - timedelta(minutes=1), "disabled": True},
    }.items():
        add_network(db, user=user, mode="normal", **fields)
    rows = admin.list_networks(db, T0, state="due")
    assert sorted(r["user"] for r in rows) == ["none@x.test", "past@x.test", "text@x.test"]
    assert {r["state"] for r in rows} == {"due"}
    assert {r["user"]: r["state"] for r in admin.list_networks(db, T0)}["none@x.test"] == "due"
