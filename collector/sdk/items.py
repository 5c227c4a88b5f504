"""The shape of an item a connector returns (the engine adds `type`, `user`, `userData`, `date` and `_id`)."""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict


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
