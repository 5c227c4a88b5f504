"""Vimeo likes: GET https://api.vimeo.com/me/likes?per_page=100&page=N, versioned Accept, `paging.next`.
X-RateLimit-Reset is a date-time (epoch accepted too)."""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from collector.sdk import (
    Bearer,
    Item,
    PagedConnector,
    PageNumber,
    RateLimitHeaders,
    WhoAmI,
    body_true,
    dig,
    entry_id,
    optional_date,
)


class VimeoConnector(PagedConnector):
    name = "vimeo"
    authentication = Bearer(scheme="bearer")
    whoami = WhoAmI("https://api.vimeo.com/me", ("uri",), (("name",),))  # uri: /users/{id}
    headers = {"Accept": "application/vnd.vimeo.*+json;version=3.4"}
    rate_limit = RateLimitHeaders("X-RateLimit-", reset="iso")
    endpoint = "https://api.vimeo.com/me/likes"
    paging = PageNumber(body_true("paging", "next"), size=100)
    entries = ("data",)

    @override
    def map(self, video: Any) -> Item:
        user = video.get("user") or {}
        sizes = [s for s in (user.get("pictures") or {}).get("sizes") or [] if isinstance(s, dict)]
        sizes.sort(key=width)
        return {
            "itemId": entry_id(video["uri"].rsplit("/", 1)[-1]),
            "source": video["link"],
            "title": video.get("name"),
            "description": video.get("description"),
            "authorName": user.get("name"),
            "authorUrl": user.get("link"),
            "avatarUrl": sizes[-1].get("link") if sizes else None,
            "created": optional_date(video.get("created_time")),
            # the like's own time: "when the user liked the video" (Vimeo's OpenAPI, video.metadata.interactions)
            "likedAt": optional_date(dig(video, ("metadata", "interactions", "like", "added_time"))),
        }


def width(size: dict) -> int:
    value = size.get("width")
    return value if isinstance(value, int) else 0
