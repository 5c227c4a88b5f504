"""Reads and writes of `networks`: claims and leases, state and token writes, the backlog count."""

from __future__ import annotations

import logging
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
    LEASE_DEFAULT,
    LEASE_FIELDS,
    LEASE_SKEW,
    StateWrite,
    due_query,
    lease_claim,
    lease_free,
    lease_state,
    unavailable,
    usable_epoch,
)
from .sealing import Keys, seal_credentials, sealed_state_write

log = logging.getLogger("collector.engine.store")


class NetworkStore:
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
        """Lease up to `limit` due networks, the most overdue first, in three round trips: select their ids,
        claim them with one update carrying a fresh claim token (each document's filter re-checks that it is
        still due and free, so two collectors never both win one), and read back what this collector won.
        Each claim increments `leaseEpoch`; the won documents carry the epoch that fences their state save.
        Networks of `skip_services` are left for later (services the caller cannot start more of now).

        One bad document must not break the batch: an epoch that cannot be incremented (not a number, or
        absurdly large) is reset first, and if the batch update still fails, the networks are claimed one by one
        and the one that fails is left out."""
        seconds = (until - now).total_seconds()  # the lease's length: a longer end was written by no live holder
        query = due_query(mode, now, seconds)
        skipped = set(skip_services)
        if only_services is not None:  # a collector that serves chosen services (SERVICES): the index
            query["service"] = {"$in": sorted(set(only_services) - skipped)}  # (mode, service, scheduledTo)
        elif skipped:  # services this collector cannot start more of now, or does not serve
            query["service"] = {"$nin": sorted(skipped)}
        fields = {"leaseEpoch": 1, "leaseUntil": 1, "leaseOwner": 1}
        found = list(self.networks.find(query, fields).sort("scheduledTo", ASCENDING).limit(limit))
        if not found:
            return []
        ids = [d["_id"] for d in found]
        token, claim = lease_claim(owner, until)
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
        won = list(self.networks.find({"leaseToken": token}).sort("scheduledTo", ASCENDING))
        say_taken_over(found, won, now, seconds)
        return won

    def claim_one(self, network_id: Any, now: datetime, owner: str, until: datetime) -> dict | None:
        """Lease one network by id, due or not (a run by hand), unless another collector holds it now (a lease
        whose end lies further ahead than `until`, plus LEASE_SKEW, holds nothing: it is taken over)."""
        token, claim = lease_claim(owner, until)
        one = {"$eq": network_id}  # an operator's id, compared whole: a document is never run as a query
        seconds = (until - now).total_seconds()
        self.networks.update_many({"_id": one, **BAD_EPOCH}, {"$set": {"leaseEpoch": 0}})
        before = self.networks.find_one({"_id": one}, {"leaseUntil": 1, "leaseOwner": 1})
        self.networks.update_one({"_id": one, **lease_free(now, seconds)}, claim)
        won = self.networks.find_one({"_id": one, "leaseToken": token})
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
        result = self.networks.update_many({"_id": {"$in": ids}, "leaseOwner": owner}, {"$set": {"leaseUntil": until}})
        return result.modified_count

    def release(self, leases: list[tuple[Any, Any]]) -> None:
        """Give back leases of networks that were claimed but not run (e.g. on shutdown)."""
        for network_id, epoch in leases:
            self.networks.update_one(
                {"_id": network_id, "leaseEpoch": epoch}, {"$unset": dict.fromkeys(LEASE_FIELDS, "")}
            )

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
        """Networks of `mode` due and free at `now` (the backlog), counted on the (mode, scheduledTo) index."""
        return self.networks.count_documents(due_query(mode, now, lease_seconds))

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
    def skip_inactive(self, emails: list[str], reason: str) -> int:
        """Networks of these users not skipped yet get `skip: true, skipReason: reason`; how many changed."""
        return self.networks.update_many(
            {"user": {"$in": emails}, "skip": {"$ne": True}}, {"$set": {"skip": True, "skipReason": reason}}
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
