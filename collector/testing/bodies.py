"""Pages of a spec's history changed the ways a service's answers go wrong: text HTML-escaped, dates that cannot
be read, a part of the body replaced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ESCAPED_KEYS = {"title", "description", "text", "body", "selftext", "content", "caption", "summary", "link_title"}
ESCAPED_KEYS |= {"name", "spoiler_text"}


def escape_text(body: Any, key: str | None = None) -> Any:
    """A body with every text value of a text-bearing key given an HTML-escaped tail (`&amp; &lt;i&gt;`)."""
    if isinstance(body, dict):
        return {k: escape_text(v, k) for k, v in body.items()}
    if isinstance(body, list):
        return [escape_text(v, key) for v in body]
    if isinstance(body, str) and key in ESCAPED_KEYS and body:
        return body + " &amp; &lt;i&gt;"
    return body


DATE_KEYS = {"created_at", "starred_at", "publishedAt", "created_time", "added_at", "createdAt", "published_at"}
EPOCH_KEYS = {"creation_date", "created_utc", "dateupload", "date_faved"}


def break_first_dates(body: Any) -> Any:
    """A page whose first entry (the newest) carries unreadable dates: every date-bearing key inside it."""

    def spoil(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: spoil(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [spoil(v, key) for v in value]
        if key in DATE_KEYS and isinstance(value, str):
            return "2024-00-10T25:61:00Z"
        if key in EPOCH_KEYS and isinstance(value, int | float | str):
            return "not a time"
        return value

    def first(value: Any) -> Any:
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [spoil(value[0]), *value[1:]]
        if isinstance(value, dict):
            return {k: first(v) for k, v in value.items()}
        return value

    return first(body)


def replace_at(body: Any, path: tuple[str, ...], change: Callable[[Any], Any]) -> Any:
    """A copy of `body` with the value at `path` (the whole body for an empty path) passed through `change`."""
    if not path:
        return change(body)
    return {**body, path[0]: replace_at(body[path[0]], path[1:], change)}
