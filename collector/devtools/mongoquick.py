"""Quicker answers of the MongoDB stand-in (mongocommands.py) to the queries a sink service repeats, exactly as
mongomock answers them, where a MongoDB reads an index and mongomock copies, filters and sorts every document.

A find with a limit and no sort (the mover's marked items): mongomock copies every match before it takes the
first ones; here the scan stops at the limit. With a sort too (a sink's due entries, its oldest entry): it copies
every matching document whole, then sorts them all; here the documents are sorted as they are stored (mongomock's
own sort key and order, stable: ties in the same order), and only the first `limit` documents are
read whole, by `_id`. An `_id: {$nin: [...]}` in the filter (the entries in flight, up to a thousand) is taken out
of mongomock's filter, which compared every document with every value (21 s for 20,000 entries and 1,000 values),
and applied to the sorted documents instead.
"""

from __future__ import annotations

from functools import partial
from itertools import islice
from typing import Any

from mongomock.filtering import resolve_sort_key
from mongomock.helpers import patch_datetime_awareness_in_document

from .idlookup import key


def sorted_first(coll: Any, command: dict) -> list[dict] | None:
    """The answer to `command` (a find) when it has a limit, no skip, and a projection that only includes fields;
    None otherwise (mongomock answers it as it is)."""
    sort, limit, projection = command.get("sort"), abs(command.get("limit") or 0), command.get("projection")
    if not limit or command.get("skip") or not including(projection):
        return None
    query = dict(command.get("filter") or {})
    if not sort:  # the first `limit` matches in the store's order, the scan stopped there
        matches = coll._iter_documents(patch_datetime_awareness_in_document(query))
        return whole(coll, [doc["_id"] for doc in islice(matches, limit)], projection)
    left_out: set = set()
    wanted = query.get("_id")
    if isinstance(wanted, dict) and set(wanted) == {"$nin"} and isinstance(wanted["$nin"], list):
        keys = [key(value) for value in wanted["$nin"]]
        if any(k is None for k in keys):
            return None
        left_out = set(keys)
        del query["_id"]
    if any(field.startswith("$") for field in sort):
        return None
    matches = coll._iter_documents(patch_datetime_awareness_in_document(query))
    for field, direction in reversed(list(sort.items())):  # as mongomock sorts (Collection._get_dataset)
        matches = sorted(matches, key=partial(resolve_sort_key, field), reverse=direction < 0)
    kept = (doc["_id"] for doc in matches if key(doc["_id"]) not in left_out)
    return whole(coll, list(islice(kept, limit)), projection)


def whole(coll: Any, ids: list, projection: Any) -> list[dict] | None:
    """The documents of `ids`, in that order, as `projection` shows them (None for an id not looked up)."""
    if any(key(i) is None for i in ids):
        return None
    found = {key(doc["_id"]): doc for doc in coll.find({"_id": {"$in": ids}}, projection)}
    return [found[key(i)] for i in ids if key(i) in found]


def including(projection: Any) -> bool:
    """No projection, or one that names fields to include (`_id` kept)."""
    if projection is None:
        return True
    return isinstance(projection, dict) and all(v in (1, True) for v in projection.values())
