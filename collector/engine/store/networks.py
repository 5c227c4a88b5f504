"""Reads and writes of `networks`: claims and leases, state and token writes, the backlog count."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, WriteError

from ...sdk.redaction import clip
from ...textout import printable
from .filters import (
    BAD_EPOCH,
    FLAGS,
    LEASE_DEFAULT,
    LEASE_FIELDS,
    LEASE_SKEW,
    StateWrite,
    claim_query,
    due_query,
    lease_claim,
    lease_free,
    lease_state,
    not_date,
    not_true,
    odd_modes,
    park,
    runnable,
    unavailable,
    unscheduled,
    unscheduled_due,
    usable_epoch,
)
from .sealing import Keys, seal_credentials, sealed_state_write

log = logging.getLogger("collector.engine.store")
REPAIR_EVERY = 5.0  # seconds between two repairs of the schedules other programs left unusable (by claims)
CLAIM_LOOKS = 4  # reads of the due range per claim when what it met had to be parked


def _key(value: Any) -> Any:
    """A network id as a dict key (ids may be any value, a dict or a list too)."""
    try:
        hash(value)
    except TypeError:
        return ("unhashable", repr(value))
    return (type(value).__name__, value)


class Repairs:
    """What moves networks in and out of the due range apart from claims and saves: parking what cannot run, the
    repair of what other programs wrote (a mixin of NetworkStore)."""

    networks: Collection
    repaired_at: dict[str, float]  # monotonic time of each mode's next repair (`repair_schedules`)

    def park(self, ids: list, now: datetime) -> int:
        """Networks that cannot run (disabled, skip, unauthorized) leave the due range: `scheduledTo` PARK_SECONDS
        ahead; the claim reads them again then (a flag another program cleared counts from there)."""
        due = [{"scheduledTo": {"$lte": now}}, *not_date("scheduledTo")["$or"]]  # not one that moved meanwhile
        query = {"_id": {"$in": ids}, "$or": due}
        return self.networks.update_many(query, {"$set": {"scheduledTo": park(now)}}).modified_count

    def repair_schedules(self, mode: str, now: datetime, limit: int = 1000) -> int:
        """Networks of the `mode` collector whose `scheduledTo` another program left missing or no date become due
        now (up to `limit` of them), through the (mode, scheduledTo) index; returns how many. A claim does it
        first when the last repair of its mode is REPAIR_EVERY seconds old."""
        self.repaired_at[mode] = time.monotonic() + REPAIR_EVERY
        ids = [d["_id"] for d in self.networks.find(unscheduled(mode), {"_id": 1}).limit(limit)]
        if not ids:
            return 0
        query = {**unscheduled(mode), "_id": {"$in": ids}}
        return self.networks.update_many(query, {"$set": {"scheduledTo": now}}).modified_count

    def odd_modes(self, now: datetime, limit: int = 100) -> list[dict]:
        """Networks due by `now` whose `mode` is none of the known ones (`odd_modes`): the initial collector
        reports them as a run would."""
        return list(self.networks.find(odd_modes(now)).limit(limit))


class Steering:
    """The writes of the sweep and of the operator's tools on `networks` (a mixin of NetworkStore): skipped and
    revived users, a change fenced on the lease as read, tokens sealed again."""

    networks: Collection
    keys: Keys

    def skip_inactive(self, emails: list[str], reason: str) -> int:
        """Networks of these users not skipped yet get `skip: true, skipReason: reason`; how many changed."""
        return self.networks.update_many(
            {"user": {"$in": emails}, **not_true("skip")}, {"$set": {"skip": True, "skipReason": reason}}
        ).modified_count

    def revive(self, emails: list[str], reason: str, now: datetime) -> int:
        """Networks of these users skipped for `reason` (only ours) are taken back, scheduled now."""
        return self.networks.update_many(
            {"user": {"$in": emails}, "skip": True, "skipReason": reason},
            {"$unset": {"skip": "", "skipReason": ""}, "$set": {"scheduledTo": now}},
        ).modified_count

    def change_unless_leased(self, network_id: Any, lease_read: Any, update: dict) -> bool:
        """An operator's change of one network, fenced on the lease as it was read: False when a collector
        claimed the network meanwhile (the write matched nothing)."""
        fence = {"_id": {"$eq": network_id}, "leaseUntil": {"$eq": lease_read}}  # values read, compared whole
        return self.networks.update_one(fence, update).matched_count == 1

    def reseal_tokens(
        self, network_id: Any, lease_read: Any, before: Mapping[str, str], after: Mapping[str, str]
    ) -> bool:
        """`networks reseal`'s write of one network's tokens (`after`, sealed by ops/reseal.py), fenced on the lease
        and on every token as read (`before`): False when a collector claimed the network or anything wrote a
        token meanwhile."""
        fence = {"_id": {"$eq": network_id}, "leaseUntil": {"$eq": lease_read}}
        fence |= {name: {"$eq": value} for name, value in before.items()}
        return self.networks.update_one(fence, {"$set": dict(after)}).matched_count == 1


def released(due_at: Any) -> dict[str, Any]:
    """The update that gives a lease back: its fields unset, `scheduledTo` back at the date it was due at."""
    unset = {"$unset": dict.fromkeys(LEASE_FIELDS, "")}
    return {**unset, "$set": {"scheduledTo": due_at}} if isinstance(due_at, datetime) else unset


class NetworkStore(Repairs, Steering):
    """The `networks` part of the Store (a mixin: `self.networks` and `self.mongomock` come from Store)."""

    networks: Collection
    mongomock: bool
    keys: Keys  # TOKEN_KEY and the old keys: what the saves seal with (sealing.py)

    def claim(
        self,
        mode: str,
        now: datetime,
        limit: int,
        owner: str,
        until: datetime,
        skip_services: Iterable[str] = (),
        only_services: Iterable[str] | None = None,
    ) -> list[dict]:
        """Lease up to `limit` due networks, the most overdue first: read the due range (`claim_query`, served by
        the (mode, scheduledTo) index), park what cannot run (disabled, skip, unauthorized: `park`), claim the rest
        with one update carrying a fresh claim token (each document's filter re-checks that it is still due and
        free, so two collectors never both win one) and read back what this collector won. The claim moves
        `scheduledTo` to the lease's end: a leased network leaves the due range; the documents returned carry
        the `scheduledTo` they were due at. Each claim increments `leaseEpoch`; the won documents carry the epoch
        that fences their state save. Networks of `skip_services` are left for later (services the caller
        cannot start more of now). A read that met only networks to park looks again (CLAIM_LOOKS times at most).

        One bad document must not break the batch: an epoch that cannot be incremented (not a number, or
        absurdly large) is reset first, and if the batch update still fails, the networks are claimed one by one
        and the one that fails is left out."""
        seconds = (until - now).total_seconds()  # the lease's length: a longer end was written by no live holder
        if time.monotonic() >= self.repaired_at.get(mode, 0.0):
            self.repair_schedules(mode, now)
        query = claim_query(mode, now, seconds)
        skipped = set(skip_services)
        if only_services is not None:  # chosen services (SERVICES, or the services with room now): the index
            query["service"] = {"$in": sorted(set(only_services) - skipped)}  # (mode, service, scheduledTo)
        elif skipped:
            raise ValueError("skip_services needs only_services: the services that may be claimed, by name")
        won: list[dict] = []
        for _ in range(CLAIM_LOOKS):
            fields = {"leaseEpoch": 1, "leaseUntil": 1, "leaseOwner": 1, "scheduledTo": 1, **dict.fromkeys(FLAGS, 1)}
            found = list(self.networks.find(query, fields).sort("scheduledTo", ASCENDING).limit(limit - len(won)))
            held = [d["_id"] for d in found if not runnable(d)]
            if held:
                self.park(held, now)
            won += self._lease([d for d in found if runnable(d)], query, owner, until, now)
            if not held or len(won) >= limit:
                break
        return won

    def _lease(self, found: list[dict], query: dict, owner: str, until: datetime, now: datetime) -> list[dict]:
        """Claim the networks read (`found`), moving `scheduledTo` to `until`; the ones won, in the order read,
        with the `scheduledTo` each was due at."""
        if not found:
            return []
        ids = [d["_id"] for d in found]
        token, claim = lease_claim(owner, until, move=True)
        suspect = [d["_id"] for d in found if not usable_epoch(d)]
        if suspect:  # rare: the filter, not this look, decides what is reset
            repaired = self.networks.update_many({**BAD_EPOCH, "_id": {"$in": suspect}}, {"$set": {"leaseEpoch": 0}})
            if repaired.modified_count:
                log.warning(
                    "%d networks had a leaseEpoch that was not a usable number: reset to 0", repaired.modified_count
                )
        try:
            # the id list last: an in-memory database (mongomock) tests the cheap conditions first
            self.networks.update_many({**query, "_id": {"$in": ids}}, claim)
        except Exception as exc:
            if unavailable(exc):
                raise
            log.warning(
                "claiming %d networks at once failed (%s: %s); claiming them one by one",
                len(ids),
                type(exc).__name__,
                clip(exc, 200),
            )
            self._claim_each(ids, query, claim)
        got = {_key(d["_id"]): d for d in self.networks.find({"leaseToken": token})}
        won = []
        for doc in found:  # as read: the most overdue first, each with the scheduledTo it was due at
            mine = got.get(_key(doc["_id"]))
            if mine is not None:
                mine["scheduledTo"] = doc.get("scheduledTo")
                won.append(mine)
        say_taken_over(found, won, now, (until - now).total_seconds())
        return won

    def claim_one(self, network_id: Any, now: datetime, owner: str, until: datetime) -> dict | None:
        """Lease one network by id, due or not (a run by hand), unless another collector holds it now (a lease
        whose end lies further ahead than `until`, plus LEASE_SKEW, holds nothing: it is taken over). Like a claim,
        it moves `scheduledTo` to the lease's end; the document returned carries the one it had."""
        token, claim = lease_claim(owner, until, move=True)
        one = {"$eq": network_id}  # an operator's id, compared whole: a document is never run as a query
        seconds = (until - now).total_seconds()
        self.networks.update_many({"_id": one, **BAD_EPOCH}, {"$set": {"leaseEpoch": 0}})
        before = self.networks.find_one({"_id": one}, {"leaseUntil": 1, "leaseOwner": 1, "scheduledTo": 1})
        self.networks.update_one({"_id": one, **lease_free(now, seconds)}, claim)
        won = self.networks.find_one({"_id": one, "leaseToken": token})
        if won is not None and before is not None:
            won["scheduledTo"] = before.get("scheduledTo")
        say_taken_over([before] if before else [], [won] if won else [], now, seconds)
        return won

    def _claim_each(self, ids: list, query: dict, claim: dict) -> None:
        for network_id in ids:
            try:
                self.networks.update_one({"_id": network_id, **query}, claim)
            except Exception as exc:
                if unavailable(exc):
                    raise
                log.error(
                    "network %s cannot be claimed (%s: %s): left out", network_id, type(exc).__name__, clip(exc, 200)
                )

    def renew(self, ids: list, owner: str, until: datetime) -> int:
        """Extend the leases this collector still holds on `ids`."""
        if not ids:
            return 0
        update = {"$set": {"leaseUntil": until, "scheduledTo": until}}  # out of the due range while held
        return self.networks.update_many({"_id": {"$in": ids}, "leaseOwner": owner}, update).modified_count

    def release(self, leases: list[tuple[Any, Any, Any]]) -> None:
        """Give back leases of networks that were claimed but not run (e.g. on shutdown): (id, epoch, the
        `scheduledTo` it was due at, back in the due range; one that was no date is due `now` of the claim), in
        one round trip: a `bulk_write` of fenced `UpdateOne`s, unordered."""
        writes = [({"_id": {"$eq": one}, "leaseEpoch": {"$eq": epoch}}, released(due)) for one, epoch, due in leases]
        if not writes:
            return
        if self.mongomock:  # mongomock 4.3 cannot bulk_write UpdateOne under pymongo >= 4.11 (TypeError)
            for query, update in writes:
                self.networks.update_one(query, update)
            return
        self.networks.bulk_write([UpdateOne(query, update) for query, update in writes], ordered=False)

    def clear_lapsed_leases(
        self, before: datetime, limit: int = 1000, beyond: datetime | None = None
    ) -> tuple[int, dict[str, int]]:
        """Unset the lease fields of networks whose lease lapsed before `before` (their collector died or gave
        up), or ends after `beyond` (further ahead than a lease reaches: no holder renews it; a network no claim
        takes, disabled or not due, would keep it for ever): up to `limit` of them, found through the sparse
        `leaseToken` index. `leaseEpoch` stays, so a late save of the old lease is still fenced as before. Returns
        how many were cleared and their owners."""
        ends: list[dict[str, Any]] = [{"leaseUntil": {"$lt": before}}]
        if beyond is not None:
            ends.append({"leaseUntil": {"$gt": beyond}})
        query = {"leaseToken": {"$exists": True}, "$or": ends}
        found = list(self.networks.find(query, {"leaseOwner": 1}).limit(limit))
        if not found:
            return 0, {}
        owners: dict[str, int] = {}
        for doc in found:
            owner = clip(doc.get("leaseOwner"), 80)
            owners[owner] = owners.get(owner, 0) + 1
        # the filter is checked again per document: a network claimed meanwhile is left alone
        ids = [d["_id"] for d in found]
        result = self.networks.update_many({**query, "_id": {"$in": ids}}, {"$unset": dict.fromkeys(LEASE_FIELDS, "")})
        return result.modified_count, owners

    def bound_rate_limit_waits(self, latest: datetime, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> int:
        """Bring rateLimit networks scheduled after `latest` back to `latest` (a reset no collector of ours would
        keep, written by an older collector or another program); one a collector holds now is left alone. Served
        by the (mode, scheduledTo) index. Returns how many were moved."""
        query = {"mode": "rateLimit", "scheduledTo": {"$gt": latest}, **lease_free(now, lease_seconds)}
        return self.networks.update_many(query, {"$set": {"scheduledTo": latest}}).modified_count

    def count_due(self, mode: str, now: datetime, lease_seconds: float = LEASE_DEFAULT) -> int:
        """Networks of `mode` due and free at `now` (the backlog), counted on the (mode, scheduledTo) index: the due
        range, and those whose `scheduledTo` the next claim repairs."""
        due = self.networks.count_documents(due_query(mode, now, lease_seconds))
        return due + self.networks.count_documents(unscheduled_due(mode, now, lease_seconds))

    def save_tokens(self, network_id: Any, tokens: dict, previous_refresh: Any) -> bool:
        """Write tokens a refresh obtained, on their own and whatever the lease: a rotating refresh token is
        spent once used, so losing the new one locks the user out. Only if the document still holds the refresh
        token that was used, as the database held it (sealed or plain: sealing.stored_value), nobody having
        stored newer ones meanwhile. Sealed with TOKEN_KEY when one is set."""
        query: dict[str, Any] = {"_id": network_id}
        if isinstance(previous_refresh, str):
            query["refreshToken"] = previous_refresh
        sealed = seal_credentials(tokens, network_id=network_id, keys=self.keys)
        return self.networks.update_one(query, {"$set": sealed}).matched_count == 1

    def save_state(
        self,
        network_id: Any,
        set_fields: dict,
        unset_fields: Iterable[str] = (),
        epoch: int | None = None,
        reseal: Mapping[str, tuple[str, str]] | None = None,
    ) -> bool:
        """Save a run's state and release its lease. With `epoch`, only if the lease epoch is still the one
        claimed: a collector that lost its lease cannot overwrite newer state. Returns whether it was saved.
        Tokens are sealed with TOKEN_KEY when one is set; `reseal` (sealing.reseal_plan) seals tokens read plain
        or sealed with an old key in the same write, only where each still holds what was read: when another
        program wrote one meanwhile, the state is saved without them."""
        query, update, written = sealed_state_write(self.keys, network_id, set_fields, unset_fields, epoch, reseal)
        saved = self.networks.update_one(query, update).matched_count == 1
        if saved or not written:
            return saved
        return self.save_state(network_id, set_fields, unset_fields, epoch)

    def save_states(self, writes: list[StateWrite]) -> list[bool | Exception]:
        """Save many runs' states in one round trip (`bulk_write` of fenced `UpdateOne`s, unordered). For each
        write: True (saved), False (its lease epoch moved on: refused alone), or the error the database gave that
        document. A database that cannot be reached raises."""
        if not writes:
            return []
        if self.mongomock:  # mongomock 4.3 cannot bulk_write UpdateOne under pymongo >= 4.11 (TypeError)
            return [self._save_one(write) for write in writes]
        prepared = [sealed_state_write(self.keys, *write) for write in writes]
        ops = [UpdateOne(query, update) for query, update, _ in prepared]
        errors: dict[int, Exception] = {}
        try:
            matched = self.networks.bulk_write(ops, ordered=False).matched_count
        except BulkWriteError as exc:
            matched = exc.details.get("nMatched", 0)
            errors = {e["index"]: WriteError(e.get("errmsg", ""), e.get("code")) for e in exc.details["writeErrors"]}
        if matched == len(writes) - len(errors):
            return [errors.get(i, True) for i in range(len(writes))]
        # some writes matched nothing: fenced off (their epoch moved on), or a token they sealed changed meanwhile
        sealed = {name: 1 for _, _, written in prepared for name in written}
        docs = {
            d["_id"]: d
            for d in self.networks.find({"_id": {"$in": [w[0] for w in writes]}}, {"leaseEpoch": 1, **sealed})
        }
        return [
            errors[i] if i in errors else self._settled(write, docs.get(write[0]), written)
            for i, (write, (_, _, written)) in enumerate(zip(writes, prepared, strict=True))
        ]

    def _settled(self, write: StateWrite, doc: dict | None, written: dict[str, str]) -> bool:
        """Whether a write of a batch that did not match as a whole was saved; one that sealed a token another
        program changed meanwhile is saved again without sealing it."""
        epoch = write[3]
        if doc is None or (epoch is not None and doc.get("leaseEpoch") != epoch):
            return doc is None and epoch is None
        if all(doc.get(name) == value for name, value in written.items()):
            return True
        return self.save_state(*write[:4])

    def _save_one(self, write: StateWrite) -> bool | Exception:
        try:
            return self.save_state(*write)
        except Exception as exc:
            if unavailable(exc):
                raise
            return exc

    # --- writes on behalf of the daemon's sweep and the operator's commands -----------------------------------


def say_taken_over(found: list[dict], won: list[dict], now: datetime, seconds: float) -> None:
    """One line when a claim took networks whose lease no live holder keeps: an end further ahead than a lease
    of `seconds` reaches (plus LEASE_SKEW), or no date (a shell, a holder that stopped long ago)."""
    stale = [d for d in found if lease_state(d.get("leaseUntil"), now, seconds) in ("far", "junk")]
    if stale:  # (ids may be any value, a dict too: compared, not hashed)
        ids = [d["_id"] for d in won]
        stale = [d for d in stale if d["_id"] in ids]
    if not stale:
        return
    first = stale[0]
    log.warning(
        "took over %d networks whose lease no live holder keeps (an end further ahead than LEASE_SECONDS %gs plus "
        "%gs, or no date), e.g. %s held by %s until %s",
        len(stale),
        seconds,
        LEASE_SKEW,
        printable(clip(first["_id"], 80)),
        printable(clip(first.get("leaseOwner"), 80)),
        printable(clip(first.get("leaseUntil"), 80)),
    )
