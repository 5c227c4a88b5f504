"""MongoDB access: the likeastore collections `networks`, `items` and `users`.

Only documented pymongo operations. Item uniqueness on (user, type, itemId) comes from the item `_id`, a
12-byte hash of those three fields, so re-collecting is idempotent and costs no extra index on a fresh database;
the unique index on (user, type, itemId) is created as well, so that items written by the original collector
(random `_id`s) are never duplicated either.
"""
from __future__ import annotations

import hashlib
import logging
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
    executor then reports); a missing or non-date scheduledTo counts as due.
    """
    modes = {"mode": "normal"} if mode == "normal" else {"mode": {"$nin": ["normal"]}}
    return {
        **modes,
        "disabled": {"$ne": True},
        "skip": {"$ne": True},
        "unauthorized": {"$ne": True},
        "$or": [{"scheduledTo": {"$lte": now}}, {"scheduledTo": {"$not": {"$type": "date"}}}],
    }


class Store:
    def __init__(self, db: Database, unique_items_index: bool = True):
        self.db = db
        self.networks = db["networks"]
        self.items = db["items"]
        self.users = db["users"]
        self.unique_items_index = unique_items_index

    def ensure_indexes(self) -> None:
        self._index(self.networks, [("mode", ASCENDING), ("scheduledTo", ASCENDING)])
        if self.unique_items_index:
            self._index(self.items, [("user", ASCENDING), ("type", ASCENDING), ("itemId", ASCENDING)],
                        unique=True)

    @staticmethod
    def _index(collection, keys, **options) -> None:
        try:
            collection.create_index(keys, **options)
        except OperationFailure as exc:  # e.g. an existing index on the same keys with other options
            log.warning("index %s on %s not created: %s", keys, collection.name, exc)

    def due(self, mode: str, now: datetime, limit: int) -> list[dict]:
        cursor = self.networks.find(due_query(mode, now)).sort("scheduledTo", ASCENDING).limit(limit)
        return list(cursor)

    def users_by_email(self, emails: Iterable[str]) -> dict[str, dict]:
        wanted = sorted({e for e in emails if isinstance(e, str)})
        if not wanted:
            return {}
        projection = {f: 1 for f in USER_FIELDS} | {"_id": 1}
        found = {}
        for user in self.users.find({"email": {"$in": wanted}}, projection):
            found[user["email"]] = {f: user[f] for f in ("_id",) + USER_FIELDS if f in user}
        return found

    def insert_items(self, items: list[dict]) -> int:
        """Insert items that are not stored yet; returns how many were new. Duplicates are skipped."""
        if not items:
            return 0
        try:
            return len(self.items.insert_many(items, ordered=False).inserted_ids)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            others = [e for e in errors if e.get("code") != DUPLICATE_KEY]
            if others:
                raise
            return exc.details.get("nInserted", len(items) - len(errors))

    def save_state(self, network_id: Any, set_fields: dict, unset_fields: Iterable[str] = ()) -> None:
        update: dict[str, Any] = {"$set": set_fields}
        unset = {name: "" for name in unset_fields if name not in set_fields}
        if unset:
            update["$unset"] = unset
        self.networks.update_one({"_id": network_id}, update)
