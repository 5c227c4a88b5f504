"""mongomock with an `_id` index: a query that names `_id` (a value, or `$in` values) looks those documents up
instead of scanning the collection.

mongomock evaluates every query against every document; MongoDB answers a query on `_id` from its index. The
collector saves each run's state with a query on `_id`, so on mongomock a cycle of 3,000 networks spent ~18 s
of its ~31 s scanning (3,000 saves x 3,000 documents), a cost no MongoDB has. `collector bench` and its
stand-in database (mongowire in its own process) install this for their own process only; the test suite
keeps plain mongomock (`collector demo` installs it while its sink delivers: `installed()`). Only ObjectId and
string `_id` values are looked up (their equality in MongoDB and in Python agree), and documents of them (a sink
queue's `{s, i}`: mongomock keys them by a hashdict, equal whatever the order of the fields, so the lookup finds
a superset); any other query scans as before, and every candidate still passes mongomock's own filter.

The same for a unique index's check: mongomock runs a query on the index's fields for every document written
(each insert or update of n documents costs n scans, with the filter's full generality); where the values are
strings or ObjectIds, the documents are compared field by field instead (an array there still goes through
mongomock's filter), which finds what the query finds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bson import ObjectId
from mongomock import collection as mongomock_collection
from mongomock.filtering import filter_applies
from mongomock.helpers import hashdict

_original = mongomock_collection.Collection._iter_documents
_original_uniques = mongomock_collection.Collection._ensure_uniques
LOOKED_UP = (ObjectId, str)


def key(value: Any) -> Any:
    """The store's key for an `_id` value looked up, or None: an ObjectId, a string, or a document of them."""
    if type(value) in (ObjectId, str):
        return value
    if type(value) is dict and value and all(type(v) in (ObjectId, str) and k[:1] != "$" for k, v in value.items()):
        return hashdict(value)
    return None


def _ids(filter: Any) -> list | None:
    """The store keys of the `_id` values a filter is limited to, or None when it is not limited to looked-up
    values."""
    if not isinstance(filter, dict) or "_id" not in filter:
        return None
    wanted = filter["_id"]
    if (found := key(wanted)) is not None:
        return [found]
    if isinstance(wanted, dict) and set(wanted) == {"$in"} and isinstance(wanted["$in"], list | tuple):
        keys = [key(v) for v in wanted["$in"]]
        return keys if all(k is not None for k in keys) else None
    return None


def _iter_documents(self: Any, filter: Any) -> Iterator[dict]:
    ids = _ids(filter)
    if ids is None or self._store.is_empty:
        return _original(self, filter)
    documents = self._store._documents
    found = [documents[i] for i in dict.fromkeys(ids) if i in documents]
    if len(filter) == 1:  # on `_id` alone: what the keys found is what the filter matches (the property test's)
        return iter(found)
    return (document for document in found if filter_applies(filter, document))


def _same(keys: list[str], values: list[Any], document: dict) -> bool:
    """Whether `document` holds `values` (strings or ObjectIds) at `keys` (top-level fields), as mongomock's filter
    says: an array there is left to the filter."""
    for key, value in zip(keys, values, strict=True):
        held = document.get(key)
        if isinstance(held, list):
            return filter_applies(dict(zip(keys, values, strict=True)), document)
        if type(held) is not type(value) or held != value:
            return False
    return True


def _ensure_uniques(self: Any, new_data: dict) -> None:
    for index in self._store.indexes.values():
        if not index.get("unique"):
            continue
        keys = [key for key, _ in index["key"]]
        values = [new_data.get(key) for key in keys]
        simple = all("." not in key for key in keys) and index.get("partialFilterExpression") is None
        if not simple or not all(type(v) in LOOKED_UP for v in values):
            return _original_uniques(self, new_data)
        if sum(_same(keys, values, doc) for doc in self._store._documents.values()) > 1:
            raise mongomock_collection.DuplicateKeyError("E11000 Duplicate Key Error", 11000)
    return None


PATCHED = {"_iter_documents": _iter_documents, "_ensure_uniques": _ensure_uniques}


def install() -> None:
    """Look `_id` queries and unique keys up in this process's mongomock (idempotent)."""
    for name, patched in PATCHED.items():
        setattr(mongomock_collection.Collection, name, patched)


@contextmanager
def installed() -> Iterator[None]:
    """Installed for the `with` block only (what was there before put back)."""
    previous = {name: getattr(mongomock_collection.Collection, name) for name in PATCHED}
    install()
    try:
        yield
    finally:
        for name, method in previous.items():
            setattr(mongomock_collection.Collection, name, method)
