"""The fields of a status report, read from documents others may have written (a mongo shell, a bug, an
attacker): numbers that are real numbers, counts within bounds, text masked, cut and escaped; and durations as
the tables print them. Shared by status.py and sinks.py."""

from __future__ import annotations

import math
from typing import Any

from ..sdk.redaction import clip
from ..textout import printable

MAX_TEXT = 80


def number(value: Any) -> float:
    """A finite real number from a document field, else 0 (bools, strings, NaN, infinities are no numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0


def count(value: Any) -> int:
    """A count from a document: a whole number from 0 to 10^12, else 0."""
    n = number(value)
    return int(n) if 0 <= n <= 1e12 else 0


def text(value: Any) -> str:
    return printable(clip(value, MAX_TEXT))[:MAX_TEXT]  # masked, then cut, then escaped


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"
