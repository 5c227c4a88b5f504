"""`collector networks reseal`: every network's tokens moved to the current key (TOKEN_KEY) — plain ones sealed,
ones sealed with an old key (TOKEN_KEYS_OLD) sealed again — or, with old keys and no TOKEN_KEY, opened and written
plain (sealing turned off). Idempotent: a token already as it should be is left alone. A network a collector holds
is left for a later run, and each write matches only while the lease and every token are still as they were read
(engine/store: `reseal_tokens`), so a collector's fenced save or a token refresh never loses to it. Never shows a
token: a problem names the network, the field and the key setting."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..engine.store import Store
from ..engine.store.sealing import (
    SEALED_FIELDS,
    Keys,
    SealError,
    is_sealed,
    key_id,
    open_value,
    seal_value,
)
from ..textout import printable
from .ids import equal, format_id
from .networks import _leased


@dataclass
class Tally:
    """What a reseal did (or, dry, would do): tokens by what became of them, networks left alone, and one line
    for each token that could not be opened."""

    networks: int = 0  # networks looked at
    changed: int = 0  # networks written (or to write)
    sealed: int = 0  # plain tokens sealed with the current key
    moved: int = 0  # tokens sealed with an old key, sealed again with the current one
    unsealed: int = 0  # sealed tokens written plain (no current key)
    kept: int = 0  # tokens already as they should be
    leased: int = 0  # networks a collector holds: left for a later run
    raced: int = 0  # networks written meanwhile (a claim, a token refresh): left for a later run
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not (self.leased or self.raced or self.problems)


@dataclass
class Plan:
    """One network's tokens: as read (`before`) and as they are to be (`after`), and what could not be opened."""

    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def plan(network: Mapping[str, Any], keys: Keys) -> Plan:
    """Pure but for the nonces: what reseal does to one network's tokens with `keys`."""
    out = Plan()
    network_id = network.get("_id")
    for name, value in network.items():
        if not isinstance(value, str) or not value or not (name in SEALED_FIELDS or is_sealed(value)):
            continue
        what, plain = _target(value, name, network_id, keys)
        if what == "problem":
            out.problems.append(f"{format_id(network_id)}: {plain}")
            continue
        out.counts[what] = out.counts.get(what, 0) + 1
        if what != "kept":
            out.before[name] = value
            out.after[name] = seal_value(plain, network_id=network_id, name=name, keys=keys) if keys.current else plain
    return out


def _target(value: str, name: str, network_id: Any, keys: Keys) -> tuple[str, str]:
    """(what becomes of the token: sealed, moved, unsealed, kept or problem; its plain value, or the problem)."""
    if not is_sealed(value):
        return ("sealed" if keys.current else "kept"), value
    try:
        plain = open_value(value, network_id=network_id, name=name, keys=keys)
    except SealError as exc:
        return "problem", str(exc)
    if keys.current is None:
        return "unsealed", plain
    return ("kept" if key_id(value) == keys.current.kid else "moved"), plain


def reseal(db: Any, keys: Keys, now: datetime, service: str | None = None, dry_run: bool = False) -> Tally:
    """Move every network's tokens (of `service`, or all) to `keys`' current key; see the module."""
    tally = Tally()
    store = Store(db, keys)
    for network in _networks(db, service):
        tally.networks += 1
        if _leased(network, now):
            tally.leased += 1
            continue
        one = plan(network, keys)
        tally.problems += one.problems
        for what, count in one.counts.items():
            setattr(tally, what, getattr(tally, what) + count)
        if not one.after:
            continue
        if dry_run or store.reseal_tokens(network["_id"], network.get("leaseUntil"), one.before, one.after):
            tally.changed += 1
        else:
            tally.raced += 1
    return tally


def _networks(db: Any, service: str | None) -> Iterator[dict]:
    query = {"service": equal(service)} if service else {}
    yield from db.networks.find(query).sort("_id", 1)


def render(tally: Tally, keys: Keys, dry_run: bool) -> list[str]:
    """The lines `networks reseal` prints: each problem, then the counts."""
    target = f"key {keys.current.kid} (TOKEN_KEY)" if keys.current else "plain (no TOKEN_KEY)"
    verb = "would write" if dry_run else "wrote"
    lines = [printable(line) for line in tally.problems]
    lines.append(
        f"{tally.networks} networks: {verb} {tally.changed} — {tally.sealed} tokens sealed, {tally.moved} moved from "
        f"an old key, {tally.unsealed} written plain, {tally.kept} already as they should be; target: {target}"
    )
    if tally.leased or tally.raced:
        lines.append(
            f"{tally.leased + tally.raced} networks left as they are: a collector held them or wrote them meanwhile "
            "(run reseal again later)"
        )
    if tally.problems:
        lines.append(f"{len(tally.problems)} tokens cannot be opened: give their key in TOKEN_KEYS_OLD")
    return lines
