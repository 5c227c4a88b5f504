"""Vimeo likes: GET https://api.vimeo.com/me/likes?per_page=100&page=N, versioned Accept, `paging.next`.
X-RateLimit-Reset is a date-time (epoch accepted too)."""
from __future__ import annotations

from typing import Any

import requests

from collector.errors import BadResponse, Quota
from collector.timeutil import parse_iso

from .base import Job, header_quota
from .paging import Page, PagedConnector

API = "https://api.vimeo.com"


class VimeoConnector(PagedConnector):
    name = "vimeo"

    def fetch(self, job: Job, cursor: Any) -> Page:
        page = cursor or 1
        headers = {"Authorization": f"bearer {job.token}", "Accept": "application/vnd.vimeo.*+json;version=3.4"}
        data, response = self.get_json(job, f"{API}/me/likes", params={"per_page": 100, "page": page},
                                       headers=headers)
        if not isinstance(data, dict):
            raise BadResponse("vimeo: expected an object with data and paging")
        items = self.map_entries(data.get("data"), self.map)
        more = (data.get("paging") or {}).get("next")
        return Page(items, page + 1 if more else None, self.quota(response))

    def quota(self, response: requests.Response, now=None) -> Quota | None:
        return header_quota(response, "X-RateLimit-", "iso", now)

    @staticmethod
    def map(video: dict) -> dict:
        user = video.get("user") or {}
        sizes = [s for s in (user.get("pictures") or {}).get("sizes") or [] if isinstance(s, dict)]
        sizes.sort(key=lambda s: s.get("width") if isinstance(s.get("width"), int) else 0)
        return {
            "itemId": video["uri"].rsplit("/", 1)[-1],
            "type": "vimeo",
            "source": video["link"],
            "title": video.get("name"),
            "description": video.get("description"),
            "authorName": user.get("name"),
            "authorUrl": user.get("link"),
            "avatarUrl": sizes[-1].get("link") if sizes else None,
            "created": parse_iso(video["created_time"]),
        }
