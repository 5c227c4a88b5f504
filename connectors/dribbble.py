"""Dribbble likes (API v2, best effort: some v2 endpoints need an approved app):
GET https://api.dribbble.com/v2/user/likes?per_page=100&page=N, Link paging, X-RateLimit-* with epoch reset."""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from collector.sdk import Item, PagedConnector, PageNumber, WhoAmI, entry_id, html_to_text, link_next, optional_date


class DribbbleConnector(PagedConnector):
    name = "dribbble"
    whoami = WhoAmI("https://api.dribbble.com/v2/user", ("id",), (("login",), ("name",)))
    endpoint = "https://api.dribbble.com/v2/user/likes"
    paging = PageNumber(link_next, size=100)

    @override
    def map(self, like: Any) -> Item:
        shot = like["shot"]
        user = shot.get("user") or {}
        images = shot.get("images") or {}
        thumbnail = images.get("normal") or images.get("hidpi") or images.get("teaser")
        return {
            "itemId": entry_id(shot["id"]),
            "source": shot["html_url"],
            "title": shot.get("title"),
            "description": html_to_text(shot.get("description")),
            "thumbnailUrl": thumbnail,
            "thumbnail": thumbnail,
            "authorName": user.get("name"),
            "authorUrl": user.get("html_url"),
            "avatarUrl": user.get("avatar_url"),
            # v2 gives published_at; the older v1 shape only created_at
            "created": optional_date(shot.get("published_at") or shot.get("created_at")),
            "likedAt": optional_date(like.get("created_at")),
        }
