"""One stored item as a destination receives it (sdk.Doc): its `_id` as text, its other fields made JSON-ready —
ObjectIds as their 24 hex digits, dates ISO 8601 in UTC (one outside Python's calendar, which the service's
client reads as a DatetimeMS — JavaScript's Date reaches year 275760 — as null), bytes as hex, Decimal128 as
text, a NaN or an infinity as null, any other value as its text — without `_id` and the collector's bookkeeping
field (`sinkPending`).

An item is a document anyone may have written: one nested deeper than MAX_DEPTH, or larger than MAX_BYTES once
encoded, is refused with DocRefused (the delivery dead-letters it at once with that reason), never a crash and
never a walk through gigabytes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from bson import DatetimeMS, Decimal128, ObjectId
from bson.errors import InvalidBSON

from .sdk import Doc

MAX_DEPTH = 32  # levels of documents and lists below the item
MAX_BYTES = 1024 * 1024  # the body encoded as JSON, about: a liked item is a few KiB
MAX_ID = 1024  # characters of an `_id` as text
BOOKKEEPING = ("_id", "sinkPending")


class DocRefused(ValueError):
    """The item cannot be handed to a destination: too deep, too large, or without a usable `_id`."""


def as_doc(item: Mapping[str, Any]) -> Doc:
    """The item as a Doc; DocRefused when it is too deep or too large (see the module's text)."""
    if "_id" not in item:
        raise DocRefused("the item has no _id")
    doc_id = _id_text(item["_id"])
    budget = _Budget()
    body = {str(key): _value(value, 1, budget) for key, value in item.items() if key not in BOOKKEEPING}
    budget.spend(len(doc_id))
    return Doc(id=doc_id, body=body)


def _id_text(value: Any) -> str:
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).hex()
    elif isinstance(value, (str, int)) and not isinstance(value, bool):
        text = str(value)
    else:
        raise DocRefused(f"the item's _id is a {type(value).__name__}, not an id a destination can take")
    if not text or len(text) > MAX_ID:
        raise DocRefused(f"the item's _id is {len(text)} characters long (1 to {MAX_ID} are taken)")
    return text


class _Budget:
    """What is left of MAX_BYTES as the body is built, in characters of JSON, about."""

    def __init__(self) -> None:
        self.left = MAX_BYTES

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise DocRefused(f"the item is larger than {MAX_BYTES // 1024} KiB as JSON")


def _value(value: Any, depth: int, budget: _Budget) -> Any:
    """`value` made JSON-ready, its size spent from `budget` (every scalar and every key costs its length)."""
    if isinstance(value, Mapping):
        _deeper(depth)
        out = {}
        for key, inner in value.items():
            text = str(key) if isinstance(key, str) else _scalar(key)
            budget.spend(len(str(text)) + 4)
            out[str(text)] = _value(inner, depth + 1, budget)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        _deeper(depth)
        budget.spend(2)
        return [_value(inner, depth + 1, budget) for inner in value]
    scalar = _scalar(value)
    budget.spend(len(scalar) + 2 if isinstance(scalar, str) else 8)
    return scalar


def _deeper(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise DocRefused(f"the item is nested deeper than {MAX_DEPTH} levels")


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value) if -(2**63) <= value < 2**64 else _text(value)  # BSON's; a larger one travels as text
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, datetime):
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) > MAX_BYTES:
            raise DocRefused(f"the item is larger than {MAX_BYTES // 1024} KiB as JSON")
        return bytes(value).hex()
    if isinstance(value, DatetimeMS):
        try:
            return _scalar(value.as_datetime())
        except (InvalidBSON, OverflowError, ValueError):  # past year 9999 or before year 1: no destination reads it
            return None
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return str(number) if number.is_finite() else None
    return _text(value)


def _text(value: Any) -> str:
    """Any other value (a UUID, a regular expression, a timestamp) as its text, which must stay small."""
    try:
        text = str(value)
    except Exception as exc:  # a value whose __str__ fails is refused, never a crash
        raise DocRefused(f"a value of type {type(value).__name__} has no text ({type(exc).__name__})") from None
    if len(text) > MAX_BYTES:
        raise DocRefused(f"the item is larger than {MAX_BYTES // 1024} KiB as JSON")
    return text
