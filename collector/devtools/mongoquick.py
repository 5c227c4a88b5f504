"""Quicker answers of the MongoDB stand-in (mongocommands.py) to the queries a sink service repeats, exactly as
mongomock answers them, where a MongoDB reads an index and mongomock copies, filters and sorts every document.

A find with a sort and a limit (a sink's due entries, its oldest entry): mongomock copies every matching document
whole, then sorts them all. Here the order is found on copies holding only `_id` and the sort's fields (mongomock's
own sort, stable: ties in the same order), and only the first `limit` documents are read whole, by `_id`. An
`_id: {$nin: [...]}` in the filter (the entries in flight, up to a thousand) is taken out of mongomock's filter,
which compared every document with every value (21 s for 20,000 entries and 1,000 values), and applied to the
sorted ids instead, from `limit` + that many more.
"""

from __future__ import annotations

from typing import Any

from .idlookup import key


def sorted_first(coll: Any, command: dict) -> list[dict] | None:
    """The answer to `command` (a find) when it has a sort and a limit, no skip, and a projection that only
    includes fields; None otherwise (mongomock answers it as it is)."""
    sort, limit, projection = command.get("sort"), abs(command.get("limit") or 0), command.get("projection")
    if not sort or not limit or command.get("skip") or not including(projection):
        return None
    query = dict(command.get("filter") or {})
    left_out: set = set()
    wanted = query.get("_id")
    if isinstance(wanted, dict) and set(wanted) == {"$nin"} and isinstance(wanted["$nin"], list):
        keys = [key(value) for value in wanted["$nin"]]
        if any(k is None for k in keys):
            return None
        left_out = set(keys)
        del query["_id"]
    order = coll.find(query, dict.fromkeys(sort, 1)).sort(list(sort.items())).limit(limit + len(left_out))
    ids = [doc["_id"] for doc in order if key(doc["_id"]) not in left_out][:limit]
    if any(key(i) is None for i in ids):
        return None
    whole = {key(doc["_id"]): doc for doc in coll.find({"_id": {"$in": ids}}, projection)}
    return [whole[key(i)] for i in ids if key(i) in whole]


def including(projection: Any) -> bool:
    """No projection, or one that names fields to include (`_id` kept)."""
    if projection is None:
        return True
    return isinstance(projection, dict) and all(v in (1, True) for v in projection.values())
