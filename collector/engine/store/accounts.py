"""The writes of the operator's account commands (collector/ops/accounts.py): a network added, its credentials
replaced, a network removed, a person's items deleted. Every network written with credentials goes through
`add_network` or `replace_credentials`: the one place where what is written as a secret is decided.

Each change of an existing network is fenced on its lease as it was read (a collector that claimed it meanwhile
wins: the write matches nothing), like `NetworkStore.change_unless_leased`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pymongo.collection import Collection


def exactly(value: Any) -> dict[str, Any]:
    """A condition matching a field equal to `value` itself, never an array that holds it (MongoDB's equality
    matches an array by any of its elements: `user: ["ann@x.test"]` is nobody's network)."""
    return {"$eq": value, "$not": {"$type": "array"}}


class AccountStore:
    """A mixin of the Store: `self.networks` and `self.items` come from it."""

    networks: Collection
    items: Collection

    def add_network(self, doc: Mapping[str, Any]) -> Any:
        """Insert a new network unless one of the same user and service exists (a single upsert on the pair, as
        the likeastore web app wrote them): its `_id`, or None when one was there already (nothing written)."""
        pair = {"user": exactly(doc["user"]), "service": exactly(doc["service"])}
        result = self.networks.update_one(pair, {"$setOnInsert": dict(doc)}, upsert=True)
        return result.upserted_id

    def replace_credentials(
        self, network_id: Any, lease_read: Any, set_fields: Mapping[str, Any], unset_fields: Iterable[str] = ()
    ) -> bool:
        """New credentials (and the fields that go with them) on an existing network, fenced on its lease as read:
        False when a collector claimed it meanwhile."""
        update: dict[str, Any] = {"$set": dict(set_fields)}
        unset = [f for f in unset_fields if f not in set_fields]
        if unset:
            update["$unset"] = dict.fromkeys(unset, "")
        fence = {"_id": {"$eq": network_id}, "leaseUntil": {"$eq": lease_read}}
        return self.networks.update_one(fence, update).matched_count == 1

    def remove_network(self, network_id: Any, lease_read: Any) -> bool:
        """Delete one network, fenced on its lease as read: False when a collector claimed it meanwhile (or it is
        gone)."""
        fence = {"_id": {"$eq": network_id}, "leaseUntil": {"$eq": lease_read}}
        return self.networks.delete_one(fence).deleted_count == 1

    def delete_items(self, user: str) -> int:
        """Delete every item of this user (`user` equal to the email, served by the items' unique key); how
        many."""
        return self.items.delete_many({"user": exactly(user)}).deleted_count
