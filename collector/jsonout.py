"""JSON for operators and programs: strict RFC 8259 (no NaN or Infinity), ASCII only (every control, bidi or
other non-ASCII character escaped, so no text from a document can drive a terminal), datetimes as RFC 3339
strings in UTC with milliseconds (a naive datetime from the database is UTC), anything else (ObjectId, bytes,
Decimal128) as its text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def rfc3339(at: datetime) -> str:
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def plain(value: Any) -> Any:
    """`value` as JSON's types only."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    return str(value)


def dumps(value: Any, indent: int | None = 2) -> str:
    return json.dumps(plain(value), indent=indent, allow_nan=False, ensure_ascii=True)
