"""What a person leaving, or asking for their data, needs: `collector networks remove ID`, `collector users delete
EMAIL` (`--items`, `--dry-run`) and `collector users export EMAIL`.

A network a collector holds now (its lease "held") is never deleted under it: the command first waits (`Patience`,
the commands' `--wait`) for the collector to finish its run and let the network go (its save releases the lease),
then deletes; past that it refuses with one line and changes nothing. Each deletion is fenced on the lease as it was
read (a collector that claimed the network meanwhile wins, and the line says so). A person is found by equality on
`user` (`exactly`: not an array holding the email): a document whose `user` is another person's, or not a string at
all, is never touched. Items are deleted only after every network of the person is gone, so no run of theirs can add
items afterwards. The `users` document is the web app's: left as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..engine.store import LEASE_DEFAULT, Store, lease_state
from ..engine.store.accounts import exactly
from ..sdk.redaction import clip
from ..sdk.timeutil import utcnow
from ..textout import printable
from .accounts import NetworkInFlight
from .ids import AdminError, equal, format_id, parse_id, plain
from .networks import masked

LEASE_FIELDS = {"service": 1, "user": 1, "leaseUntil": 1, "leaseOwner": 1}


@dataclass
class Deletion:
    """What `delete_user` did (or, in a dry run, would do): the networks' lines, the items counted or deleted,
    and the networks left because a collector took them meanwhile."""

    networks: list[str] = field(default_factory=list)
    items: int = 0
    refused: list[str] = field(default_factory=list)


def describe(network: Mapping[str, Any]) -> str:
    return printable(f"{format_id(network['_id'])} {clip(network.get('service'), 40)} {clip(network.get('user'), 120)}")


def in_flight(network: Mapping[str, Any], now: datetime, lease_seconds: float) -> bool:
    return lease_state(network.get("leaseUntil"), now, lease_seconds) == "held"


def held_line(network: Mapping[str, Any]) -> str:
    owner = printable(clip(network.get("leaseOwner"), 80))
    return f"network {describe(network)} is being run by {owner}: nothing deleted (try again in a minute)"


@dataclass(frozen=True)
class Patience:
    """How long to wait for collectors to let networks go, and the clock and the pause to wait with (passed in:
    tests give their own)."""

    seconds: float = 0.0
    clock: Callable[[], datetime] = utcnow
    pause: Callable[[float], None] = time.sleep
    every: float = 1.0


def released(store: Store, query: dict, networks: list[dict], patience: Patience, lease_seconds: float) -> list[dict]:
    """`networks` (read with `query`) read again until no collector holds any of them, or `patience` is spent:
    what was read last."""
    deadline = patience.clock().timestamp() + patience.seconds
    while any(in_flight(n, patience.clock(), lease_seconds) for n in networks):
        if patience.clock().timestamp() >= deadline:
            break
        patience.pause(patience.every)
        networks = list(store.networks.find(query, LEASE_FIELDS).sort("_id", 1))
    return networks


def remove_network(
    db: Any, key: str, *, now: datetime, lease_seconds: float = LEASE_DEFAULT, patience: Patience = Patience()
) -> str:
    """Delete one network by id (its items are kept), once no collector holds it (waiting up to `patience`); the
    line saying so. AdminError when there is none, NetworkInFlight when a collector still holds it."""
    network_id = parse_id(key)
    store = Store(db)
    query = {"_id": equal(network_id)}
    network = store.networks.find_one(query, LEASE_FIELDS)
    if network is None:
        raise AdminError(f"no network with id {printable(clip(key, 200))}")
    if in_flight(network, now, lease_seconds) and patience.seconds > 0:
        found = released(store, query, [network], patience, lease_seconds)
        if not found:
            return f"removed network {describe(network)}: it was gone once its collector let it go"
        network, now = found[0], patience.clock()
    if in_flight(network, now, lease_seconds):
        raise NetworkInFlight(held_line(network))
    if not store.remove_network(network["_id"], network.get("leaseUntil")):
        raise NetworkInFlight(f"network {describe(network)}: a collector took it meanwhile; nothing deleted")
    return f"removed network {describe(network)} (its items are kept)"


def delete_user(
    db: Any,
    email: str,
    *,
    items: bool = False,
    dry_run: bool = False,
    now: datetime,
    lease_seconds: float = LEASE_DEFAULT,
    patience: Patience = Patience(),
) -> Deletion:
    """Delete every network of the person with this email and, with `items`, every item collected for them;
    `dry_run` counts and changes nothing. Networks collectors hold are waited for (up to `patience`);
    NetworkInFlight (nothing deleted) when a collector still holds one; AdminError when the person has neither
    network nor item."""
    store = Store(db)
    query = {"user": exactly(plain(email))}
    networks = list(store.networks.find(query, LEASE_FIELDS).sort("_id", 1))
    count = store.items.count_documents(query)
    if not networks and not count:
        raise AdminError(f"no network or item of user {printable(clip(email, 200))}")
    if not dry_run and patience.seconds > 0 and any(in_flight(n, now, lease_seconds) for n in networks):
        networks, now = released(store, query, networks, patience, lease_seconds), patience.clock()
    held = [n for n in networks if in_flight(n, now, lease_seconds)]
    if held and not dry_run:
        more = f" (and {len(held) - 1} more)" if len(held) > 1 else ""
        raise NetworkInFlight(held_line(held[0]) + more)
    done = Deletion(items=count)
    for network in networks:
        if dry_run:
            note = f" (being run by {printable(clip(network.get('leaseOwner'), 80))} now)" if network in held else ""
            done.networks.append(describe(network) + note)
        elif store.remove_network(network["_id"], network.get("leaseUntil")):
            done.networks.append(describe(network))
        else:
            done.refused.append(f"network {describe(network)}: a collector took it meanwhile; not deleted")
    if items and not dry_run and not done.refused:
        done.items = store.delete_items(email)
    return done


def export_user(db: Any, email: str) -> Iterator[dict[str, Any]]:
    """The person's networks (secrets masked: ops/networks.py `masked`, the redaction's `secret_name` rule), then
    their items, one record each: `{"network": {...}}`, `{"item": {...}}`. AdminError when there is neither."""
    store = Store(db)
    networks = list(store.networks.find({"user": exactly(plain(email))}).sort("_id", 1))
    if not networks and store.items.find_one({"user": exactly(plain(email))}, {"_id": 1}) is None:
        raise AdminError(f"no network or item of user {printable(clip(email, 200))}")
    for network in networks:
        yield {"network": masked(network)}
    for item in store.items.find({"user": exactly(plain(email))}).batch_size(500):
        yield {"item": item}
