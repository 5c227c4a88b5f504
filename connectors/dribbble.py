"""Dribbble likes (API v2, best effort: some v2 endpoints need an approved app):
GET https://api.dribbble.com/v2/user/likes?per_page=100&page=N, Link paging, X-RateLimit-* with epoch reset."""
from __future__ import annotations

from typing import Any

from collector.htmltext import html_to_text
from collector.timeutil import parse_iso

from .base import Job, bearer
from .paging import Page, PagedConnector

API = "https://api.dribbble.com/v2"


class DribbbleConnector(PagedConnector):
    name = "dribbble"

    def fetch(self, job: Job, cursor: Any) -> Page:
        page = cursor or 1
        data, response = self.get_json(job, f"{API}/user/likes", params={"per_page": 100, "page": page},
                                       headers=bearer(job))
        items = self.map_entries(data, self.map)
        return Page(items, page + 1 if "next" in response.links else None, self.quota(response))

    @staticmethod
    def map(like: dict) -> dict:
        shot = like["shot"]
        user = shot.get("user") or {}
        images = shot.get("images") or {}
        thumbnail = images.get("normal") or images.get("hidpi") or images.get("teaser")
        return {
            "itemId": str(shot["id"]),
            "type": "dribbble",
            "source": shot["html_url"],
            "title": shot.get("title"),
            "description": html_to_text(shot.get("description")),
            "thumbnailUrl": thumbnail,
            "thumbnail": thumbnail,
            "authorName": user.get("name"),
            "authorUrl": user.get("html_url"),
            "avatarUrl": user.get("avatar_url"),
            "created": parse_iso(shot["published_at"]) if shot.get("published_at") else None,
            "likedAt": parse_iso(like["created_at"]) if like.get("created_at") else None,
        }
