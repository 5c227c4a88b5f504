"""Reads and writes of the other collections: `items` (inserted once each), `users` (read only), `quotas`
(shared blocks), `collectors` (heartbeats), and the indexes of all of them."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, ServerSelectionTimeoutError

from ...sdk.redaction import clip
from .filters import DUPLICATE_KEY, ITEM_KEY, USER_FIELDS, unavailable

log = logging.getLogger("collector.engine.store")


class IndexRefused(OperationFailure):
    """The database refused an index the collector cannot run without (the unique key of items)."""


def equivalent_exists(collection: Any, keys: list, options: dict) -> bool:
    """An index on exactly these keys already exists with the uniqueness asked for (under another name)."""
    try:
        indexes = collection.index_information()
    except Exception:
        return False
    return any(
        list(info.get("key", [])) == list(keys) and bool(info.get("unique")) == bool(options.get("unique"))
        for info in indexes.values()
    )


class ItemStore:
    """`items`, `users`, `quotas` and `collectors` (a mixin: the collections come from Store)."""

    networks: Collection
    items: Collection
    users: Collection
    quotas: Collection
    collectors: Collection
    control: Collection

    def beat(self, instance_id: str, doc: dict) -> None:
        """Upsert this collector's heartbeat document."""
        self.collectors.update_one({"_id": instance_id}, {"$set": doc}, upsert=True)

    def forget_instance(self, instance_id: str) -> None:
        self.collectors.delete_one({"_id": instance_id})

    def save_quotas(self, facts: dict[str, Any]) -> None:
        """Share blocking quota facts (by token hash): one upsert each, expiring with the block (TTL index)."""
        for key, fact in facts.items():
            if fact.blocked_until is None:
                continue
            self.quotas.update_one(
                {"_id": key},
                {
                    "$set": {
                        "blockedUntil": fact.blocked_until,
                        "remaining": fact.remaining,
                        "limit": fact.limit,
                        "expiresAt": fact.blocked_until,
                    }
                },
                upsert=True,
            )

    def load_quotas(self, keys: Iterable[str], now: datetime) -> dict[str, tuple[Any, Any, datetime]]:
        """The blocks other collectors shared for these token hashes that still hold at `now` (a date only)."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        found = self.quotas.find({"_id": {"$in": wanted}, "blockedUntil": {"$gt": now}})
        return {
            d["_id"]: (d.get("remaining"), d.get("limit"), d["blockedUntil"])
            for d in found
            if isinstance(d.get("blockedUntil"), datetime)
        }

    def bound_quota_blocks(self, latest: datetime) -> int:
        """Shared blocks that end after `latest` end at `latest` (their TTL too), found by `expiresAt`, which the
        collector writes equal to `blockedUntil` and which has an index (the TTL's). Returns how many moved."""
        query = {"expiresAt": {"$gt": latest}}
        return self.quotas.update_many(query, {"$set": {"blockedUntil": latest, "expiresAt": latest}}).modified_count

    def users_by_email(self, emails: Iterable[str]) -> dict[str, dict]:
        wanted = sorted({e for e in emails if isinstance(e, str)})
        if not wanted:
            return {}
        projection = dict.fromkeys(USER_FIELDS, 1) | {"_id": 1}
        found = {}
        for user in self.users.find({"email": {"$in": wanted}}, projection):
            # public profile fields that are plain short text only: a user document is not ours to trust
            data = {f: user[f] for f in USER_FIELDS if isinstance(user.get(f), str) and len(user[f]) <= 1024}
            found[user["email"]] = {"_id": user["_id"], **data}
        return found

    def insert_items(self, items: list[dict]) -> list[tuple[int, int | None, str]]:
        """Insert items in one unordered batch. Returns (index, error code, message) of each item not inserted:
        code 11000 for one stored already, another code (or None) for one the database refused. A database
        that cannot be reached raises; a batch the driver refuses as a whole is retried item by item."""
        if not items:
            return []
        try:
            self.items.insert_many(items, ordered=False)
        except BulkWriteError as exc:
            return [
                (e["index"], e.get("code"), clip(e.get("errmsg", ""), 300)) for e in exc.details.get("writeErrors", [])
            ]
        except Exception as exc:
            if unavailable(exc):
                raise
            log.warning(
                "a batch of %d items was refused as a whole (%s: %s); inserting one by one",
                len(items),
                type(exc).__name__,
                clip(exc, 200),
            )
            return self._insert_each(items)
        return []

    def _insert_each(self, items: list[dict]) -> list[tuple[int, int | None, str]]:
        errors: list[tuple[int, int | None, str]] = []
        for index, item in enumerate(items):
            try:
                self.items.insert_one(item)
            except DuplicateKeyError:
                errors.append((index, DUPLICATE_KEY, "duplicate"))
            except Exception as exc:
                if unavailable(exc):
                    raise
                errors.append((index, getattr(exc, "code", None), f"{type(exc).__name__}: {clip(exc, 200)}"))
        return errors

    def ensure_indexes(self, attempts: int = 5, pause: float = 1.0) -> None:
        """Create the indexes (idempotent). The unique index on items must exist before any item is written —
        without it, items the original collector stored (random `_id`s) would be stored again — so a database
        that cannot be reached is retried (`attempts` times, the pause doubling), then the start fails; it is
        never worked around. Other indexes only speed things up: refused, they are logged and skipped."""
        self._index(self.items, ITEM_KEY, attempts, pause, required=True, unique=True)
        self._index(self.networks, [("mode", ASCENDING), ("scheduledTo", ASCENDING)], attempts, pause)
        # the claim of a collector that serves chosen services (SERVICES): mode, then service, then the most overdue
        self._index(
            self.networks, [("mode", ASCENDING), ("service", ASCENDING), ("scheduledTo", ASCENDING)], attempts, pause
        )
        self._index(self.networks, [("leaseToken", ASCENDING)], attempts, pause, sparse=True)
        self._index(self.networks, [("user", ASCENDING)], attempts, pause)  # the sweep's skips and revivals
        self._index(self.networks, [("errors", ASCENDING)], attempts, pause)  # `status`: the erroring networks
        self._index(self.networks, [("lastError.at", ASCENDING)], attempts, pause)  # the monitor: latest errors
        # `status --check` and the monitor: the networks waiting for re-authorisation, first few by id
        self._index(self.networks, [("unauthorized", ASCENDING), ("_id", ASCENDING)], attempts, pause)
        self._index(self.items, [("date", ASCENDING)], attempts, pause)  # `status`: items of the last hour and day
        self._index(self.quotas, [("expiresAt", ASCENDING)], attempts, pause, expireAfterSeconds=0)
        self._index(self.collectors, [("heartbeatAt", ASCENDING)], attempts, pause, expireAfterSeconds=86400)

    @staticmethod
    def _index(collection, keys, attempts: int, pause: float, required: bool = False, **options) -> None:
        for attempt in range(1, attempts + 1):
            try:
                collection.create_index(keys, **options)
                return
            except OperationFailure as exc:
                if required and not unavailable(exc) and not equivalent_exists(collection, keys, options):
                    raise IndexRefused(f"the index {keys} on {collection.name} cannot be created: {exc}") from exc
                if not unavailable(exc):  # e.g. an existing index on the same keys with other options
                    log.warning("index %s on %s not created: %s", keys, collection.name, exc)
                    return
                error: Exception = exc
            except Exception as exc:
                # a fail-over (a connection reset, no primary for a moment) is retried; a database that no
                # server selection reached has been waited for already (serverSelectionTimeoutMS): the start fails
                if not unavailable(exc) or isinstance(exc, ServerSelectionTimeoutError) or attempt == attempts:
                    raise
                error = exc
            if attempt == attempts:
                raise error
            wait = pause * 2 ** (attempt - 1)
            log.warning("creating index %s on %s failed (%s); retrying in %gs", keys, collection.name, error, wait)
            time.sleep(wait)

    # --- the operator's control documents (pauses) -----------------------------------------------------------
    def pauses(self) -> list[dict]:
        """Every pause document (a handful at most)."""
        return list(self.control.find({"_id": {"$regex": "^pause:"}}).limit(1000))

    def set_pause(self, scope: str, fields: dict) -> None:
        self.control.update_one({"_id": scope}, {"$set": fields}, upsert=True)

    def clear_pause(self, scope: str) -> bool:
        return self.control.delete_one({"_id": scope}).deleted_count == 1
