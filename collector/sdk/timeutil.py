"""Time helpers. MongoDB keeps datetimes in UTC with millisecond precision; so do we."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

UTC = UTC


def to_ms(value: datetime) -> datetime:
    """The same instant, UTC and aware, cut to whole milliseconds (what MongoDB stores)."""
    value = as_utc(value)
    extra = value.microsecond % 1000
    return value.replace(microsecond=value.microsecond - extra) if extra else value


def utcnow() -> datetime:
    return to_ms(datetime.now(UTC))


def as_utc(value: datetime) -> datetime:
    """Aware UTC datetime; a naive one (a client without tz_aware) is taken as UTC."""
    zone = value.tzinfo
    if zone is UTC:
        return value
    if zone is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_iso(text: str) -> datetime:
    """ISO 8601 as the APIs send it ('2025-03-01T10:00:00Z', with or without fraction/offset)."""
    if not isinstance(text, str):
        raise ValueError(f"expected an ISO 8601 date string, got {type(text).__name__}")
    value = datetime.fromisoformat(text)  # Python 3.11 reads the 'Z' suffix itself
    if value.tzinfo is UTC and not value.microsecond:
        return value  # the common case, already what MongoDB keeps
    return to_ms(value)


FAR_FUTURE = datetime(9999, 12, 31, tzinfo=UTC)
MAX_EPOCH = FAR_FUTURE.timestamp()


def from_epoch(seconds: float) -> datetime:
    """Epoch seconds as a datetime. Beyond year 9999 is the far future (FAR_FUTURE); ValueError for
    values that are not a finite number >= 0."""
    value = float(seconds)
    if value != value or value < 0:
        raise ValueError(f"not a time: {seconds!r}")
    if value >= MAX_EPOCH:
        return FAR_FUTURE
    return to_ms(datetime.fromtimestamp(value, UTC))


def after(now: datetime, seconds: float) -> datetime:
    """`now` plus `seconds`, saturating at FAR_FUTURE instead of overflowing (servers send any number)."""
    value = float(seconds)
    if value != value:
        raise ValueError("not a number of seconds")
    if value >= (FAR_FUTURE - now).total_seconds():
        return FAR_FUTURE
    return now + timedelta(seconds=max(value, 0.0))


def optional_date(value: object) -> datetime | None:
    """An optional date of an entry: an ISO 8601 string read, anything missing or unreadable (an impossible date
    such as month 0) as None — the entry is kept, with that date empty."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_iso(value)
    except (ValueError, OverflowError):
        return None


def optional_epoch(value: object) -> datetime | None:
    """An optional date given as epoch seconds: read, or None when missing or unreadable (the entry is kept)."""
    if value is None or isinstance(value, bool) or value == "":
        return None
    try:
        return from_epoch(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
