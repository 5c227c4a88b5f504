"""`users.loginLastDate` in every form the likeastore web app (Node.js), a mongo shell or another tool may have
stored it: a BSON date (naive ones are UTC), an ISO 8601 string, epoch milliseconds or seconds (a number or a
string of digits, Int64, Decimal128), JavaScript's `Date.toString()` ("Tue Dec 01 2026 16:18:21 GMT+0000
(Coordinated Universal Time)") and `toUTCString()` (RFC 1123), or any of these inside a small document
(`{"$date": …}`, `{"date": …}`, `{"at": …}`, `{"value": …}`).

`login_date(value)` answers MISSING (no date at all: the user never logged in, as far as we know), UNREADABLE
(something is there that we cannot read), or a UTC datetime. The sweep counts an unreadable date as active:
stopping an active user's collection is worse than polling an idle one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from bson import Decimal128, Int64, Timestamp

from ..sdk.timeutil import as_utc, parse_iso


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


MISSING = _Marker("MISSING")
UNREADABLE = _Marker("UNREADABLE")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS_FROM = 100_000_000_000  # a number at or past this is milliseconds (1e11 s is the year 5138)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)
WRAPPERS = ("$date", "date", "at", "value", "$numberLong")
JS_DATE = re.compile(
    r"^(?:[A-Z][a-z]{2} )?([A-Z][a-z]{2}) (\d{1,2}) (\d{4}) (\d{1,2}):(\d{2}):(\d{2})"
    r"(?: GMT([+-]\d{4}))?(?: \(.*\))?$"
)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def login_date(value: Any, depth: int = 0) -> datetime | _Marker:
    if value is None or value == "" or value == {}:
        return MISSING
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, Timestamp):
        return value.as_datetime()
    if isinstance(value, bool):
        return UNREADABLE
    if isinstance(value, (int, float, Int64, Decimal128)):
        return _epoch(value)
    if isinstance(value, str):
        return _text(value.strip())
    if isinstance(value, dict) and depth < 3:
        for key in WRAPPERS:
            if key in value:
                return login_date(value[key], depth + 1)
    return UNREADABLE


def _epoch(number: Any) -> datetime | _Marker:
    try:
        seconds = float(number.to_decimal() if isinstance(number, Decimal128) else number)
    except (ValueError, ArithmeticError):
        return UNREADABLE
    if seconds != seconds or seconds <= 0:  # NaN, 0 (an unset default) or before 1970
        return UNREADABLE
    if seconds >= MS_FROM:
        seconds /= 1000
    try:
        return min(EPOCH + timedelta(seconds=seconds), LATEST)
    except OverflowError:
        return LATEST


def _text(text: str) -> datetime | _Marker:
    if not text or len(text) > 100:
        return UNREADABLE if text else MISSING
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return _epoch(float(text))
    try:
        parsed = parse_iso(text)
        return as_utc(parsed)
    except ValueError:
        pass
    match = JS_DATE.match(text)
    if match and match.group(1) in MONTHS:
        month, day, year, hour, minute, second, offset = match.groups()
        try:
            at = datetime(int(year), MONTHS.index(month) + 1, int(day), int(hour), int(minute), int(second), tzinfo=UTC)
        except ValueError:
            return UNREADABLE
        if offset:
            sign = 1 if offset[0] == "+" else -1
            at -= sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[3:5]))
        return at
    try:
        parsed = parsedate_to_datetime(text)  # RFC 1123 / toUTCString()
    except (TypeError, ValueError, IndexError):
        return UNREADABLE
    return as_utc(parsed)
