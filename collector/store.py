"""MongoDB access: the likeastore collections `networks`, `items` and `users`.

Only documented pymongo operations. Item uniqueness on (user, type, itemId) comes from the item `_id`, a
12-byte hash of those three fields, so re-collecting is idempotent and costs no extra index on a fresh database;
the unique index on (user, type, itemId) is created as well, so that items written by the original collector
(random `_id`s) are never duplicated either.
"""
from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import datetime
from typing import Any, Iterable

from bson import ObjectId
from pymongo import ASCENDING
from pymongo.database import Database
from pymongo.errors import BulkWriteError, OperationFailure

log = logging.getLogger(__name__)

DUPLICATE_KEY = 11000
# Fields copied from `users` into each item's `userData`: public profile fields only.
USER_FIELDS = ("email", "name", "displayName", "username", "avatar")


def item_key(user: str, service: str, item_id: str) -> ObjectId:
    digest = hashlib.sha256(f"{user}\x00{service}\x00{item_id}".encode()).digest()
    return ObjectId(digest[:12])


def due_query(mode: str, now: datetime) -> dict[str, Any]:
    """Networks the `mode` collector should run at `now`.

    The initial collector takes every mode but normal (missing, initial, rateLimit, and garbage, which the
    executor then reports); a missing or non-date scheduledTo counts as due. A network leased to a collector
    (leaseUntil in the future) is not due for anyone else until the lease expires.
    """
    modes = {"mode": "normal"} if mode == "normal" else {"mode": {"$nin": ["normal"]}}
    return {
        **modes,
        "disabled": {"$ne": True},
        "skip": {"$ne": True},
        "unauthorized": {"$ne": True},
        "$and": [
            {"$or": [{"scheduledTo": {"$lte": now}}, {"scheduledTo": {"$not": {"$type": "date"}}}]},
            {"$or": [{"leaseUntil": {"$lte": now}}, {"leaseUntil": {"$not": {"$type": "date"}}}]},
        ],
    }


LEASE_FIELDS = ("leaseOwner", "leaseUntil", "leaseToken")


class Store:
    def __init__(self, db: Database, unique_items_index: bool = True):
        self.db = db
        self.networks = db["networks"]
        self.items = db["items"]
        self.users = db["users"]
        self.unique_items_index = unique_items_index

    def ensure_indexes(self) -> None:
        self._index(self.networks, [("mode", ASCENDING), ("scheduledTo", ASCENDING)])
        self._index(self.networks, [("leaseToken", ASCENDING)], sparse=True)
        if self.unique_items_index:
            self._index(self.items, [("user", ASCENDING), ("type", ASCENDING), ("itemId", ASCENDING)],
                        unique=True)

    @staticmethod
    def _index(collection, keys, **options) -> None:
        try:
            collection.create_index(keys, **options)
        except OperationFailure as exc:  # e.g. an existing index on the same keys with other options
            log.warning("index %s on %s not created: %s", keys, collection.name, exc)

    def claim(self, mode: str, now: datetime, limit: int, owner: str, until: datetime) -> list[dict]:
        """Lease up to `limit` due networks, the most overdue first, in three round trips: select their ids,
        claim them with one update carrying a fresh claim token (each document's filter re-checks that it is
        still due and free, so two collectors never both win one), and read back what this collector won.
        Each claim increments `leaseEpoch`; the won documents carry the epoch that fences their state save."""
        query = due_query(mode, now)
        ids = [d["_id"] for d in self.networks.find(query, {"_id": 1}).sort("scheduledTo", ASCENDING).limit(limit)]
        if not ids:
            return []
        token = uuid.uuid4().hex
        self.networks.update_many({"_id": {"$in": ids}, **query},
                                  {"$set": {"leaseOwner": owner, "leaseUntil": until, "leaseToken": token},
                                   "$inc": {"leaseEpoch": 1}})
        return list(self.networks.find({"leaseToken": token}).sort("scheduledTo", ASCENDING))

    def renew(self, ids: list, owner: str, until: datetime) -> int:
        """Extend the leases this collector still holds on `ids`."""
        if not ids:
            return 0
        result = self.networks.update_many({"_id": {"$in": ids}, "leaseOwner": owner},
                                           {"$set": {"leaseUntil": until}})
        return result.modified_count

    def release(self, leases: list[tuple[Any, int]]) -> None:
        """Give back leases of networks that were claimed but not run (e.g. on shutdown)."""
        for network_id, epoch in leases:
            self.networks.update_one({"_id": network_id, "leaseEpoch": epoch},
                                     {"$unset": {name: "" for name in LEASE_FIELDS}})

    def users_by_email(self, emails: Iterable[str]) -> dict[str, dict]:
        wanted = sorted({e for e in emails if isinstance(e, str)})
        if not wanted:
            return {}
        projection = {f: 1 for f in USER_FIELDS} | {"_id": 1}
        found = {}
        for user in self.users.find({"email": {"$in": wanted}}, projection):
            found[user["email"]] = {f: user[f] for f in ("_id",) + USER_FIELDS if f in user}
        return found

    def insert_items(self, items: list[dict]) -> set[int]:
        """Insert items in one batch, skipping those stored already. Returns the indexes of the skipped ones."""
        if not items:
            return set()
        try:
            self.items.insert_many(items, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(e.get("code") != DUPLICATE_KEY for e in errors):
                raise
            return {e["index"] for e in errors}
        return set()

    def save_state(self, network_id: Any, set_fields: dict, unset_fields: Iterable[str] = (),
                   epoch: int | None = None) -> bool:
        """Save a run's state and release its lease. With `epoch`, only if the lease epoch is still the one
        claimed: a collector that lost its lease cannot overwrite newer state. Returns whether it was saved."""
        unset = {name: "" for name in (*unset_fields, *LEASE_FIELDS) if name not in set_fields}
        update: dict[str, Any] = {"$set": set_fields, "$unset": unset}
        query: dict[str, Any] = {"_id": network_id}
        if epoch is not None:
            query["leaseEpoch"] = epoch
        return self.networks.update_one(query, update).matched_count == 1
