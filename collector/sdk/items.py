"""The shape of an item a connector returns (the engine adds `type`, `user`, `userData`, `date` and `_id`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

MAX_ENTRY_ID = 512  # characters of a service's id; longer is not an id


def entry_id(value: Any) -> str:
    """A service's id of an entry as the itemId string: a non-empty string or a whole number (not a bool). A float
    (1e16 would lose digits; NaN is no id), a bool, an object or an empty string raise ValueError, so the entry is
    skipped and counted (never stored under "nan" or "True")."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"entry id must be a string or a whole number, got {type(value).__name__}")
    text = str(value)
    if not text.strip() or len(text) > MAX_ENTRY_ID:
        raise ValueError("entry id is empty or too long")
    return text


class Item(TypedDict, total=False):
    itemId: str  # required: the service's id of the liked thing, as a string
    source: str  # required: the canonical URL of the liked thing
    type: str  # stamped by the engine (the connector's item_type or name)
    title: str | None
    description: str | None  # plain text (see html_to_text)
    authorName: str | None
    authorUrl: str | None
    avatarUrl: str | None  # the author's picture
    thumbnailUrl: str | None  # the thing's own picture
    thumbnail: str | None  # the same, under the original likeastore collector's name
    created: datetime | None  # when the thing itself was made
    likedAt: datetime | None  # when the user liked it, where the API says
    # fields some services keep as the original likeastore collector stored them
    name: str | None
    repo: str | None
    gist: bool
    tags: list[str]
