"""Facebook likes (Pages the user liked), Graph API: GET https://graph.facebook.com/v25.0/me/likes, cursor paging.

The token goes in the Authorization header, never the query. Errors are `{"error": {"code": N}}`: 190 is an
expired or revoked token, 4/17/32/613 are throttling. X-App-Usage reports usage in percent.
"""
from __future__ import annotations

import json
from typing import Any

import requests

from collector.errors import BadResponse, Quota, RateLimited, Unauthorized
from collector.http import where
from collector.timeutil import parse_iso

from .base import Job, bearer
from .paging import Page, PagedConnector

API = "https://graph.facebook.com/v25.0"
THROTTLED = {4, 17, 32, 613}


class FacebookConnector(PagedConnector):
    name = "facebook"

    def fetch(self, job: Job, cursor: Any) -> Page:
        params: dict[str, Any] = {"fields": "id,name,link,picture,created_time", "limit": 100}
        if cursor:
            params["after"] = cursor
        data, response = self.get_json(job, f"{API}/me/likes", params=params, headers=bearer(job))
        if not isinstance(data, dict):
            raise BadResponse("facebook: expected an object with data and paging")
        items = self.map_entries(data.get("data"), self.map)
        paging = data.get("paging") or {}
        # the Graph API: a page may be empty yet carry `paging.next`; only its absence ends the list
        after = (paging.get("cursors") or {}).get("after") if paging.get("next") else None
        return Page(items, after, self.quota(response))

    def check(self, job: Job, response: requests.Response) -> None:
        if response.status_code >= 400:
            error = _error(response)
            message = f"{response.status_code} facebook error {error.get('code')}: " \
                      f"{str(error.get('message', ''))[:200]}: GET {where(response.url)}"
            if error.get("code") == 190:
                raise Unauthorized(message, response.status_code)
            if error.get("code") in THROTTLED:
                raise RateLimited(message, None, response.status_code)
        super().check(job, response)

    def quota(self, response: requests.Response, now=None) -> Quota | None:
        """X-App-Usage: the highest of call_count/total_cputime/total_time, as remaining percent."""
        try:
            usage = json.loads(response.headers.get("X-App-Usage", ""))
            used = max(float(v) for v in usage.values())
        except (ValueError, TypeError, AttributeError):
            return None
        return Quota(remaining=max(int(100 - used), 0), limit=100)

    @staticmethod
    def map(page: dict) -> dict:
        picture = ((page.get("picture") or {}).get("data") or {}).get("url")
        return {
            "itemId": str(page["id"]),
            "type": "facebook",
            "source": page.get("link") or f"https://www.facebook.com/{page['id']}",
            "title": page["name"],
            "name": page["name"],  # the original collector's field for it
            "authorName": page["name"],
            "authorUrl": page.get("link") or f"https://www.facebook.com/{page['id']}",
            "avatarUrl": picture,
            "created": parse_iso(page["created_time"]) if page.get("created_time") else None,
        }


def _error(response: requests.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}
