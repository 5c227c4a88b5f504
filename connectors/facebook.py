"""Facebook likes (Pages the user liked), Graph API: GET https://graph.facebook.com/v25.0/me/likes, cursor paging.

The token goes in the Authorization header, never the query. Errors are `{"error": {"code": N}}`: 190 is an
expired or revoked token, 4/17/32/613 are throttling. X-App-Usage reports usage in percent. A page may be empty
yet carry `paging.next`: only the absence of `next` ends the list.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import requests
from typing_extensions import override

from collector.sdk import (
    BodyCursor,
    Item,
    Job,
    PagedConnector,
    Quota,
    RateLimited,
    Unauthorized,
    WhoAmI,
    clip,
    entry_id,
    error_json,
    optional_date,
    where,
)

THROTTLED = {4, 17, 32, 613}


class FacebookConnector(PagedConnector):
    name = "facebook"
    whoami = WhoAmI("https://graph.facebook.com/v25.0/me", ("id",), (("name",),), params={"fields": "id,name"})
    endpoint = "https://graph.facebook.com/v25.0/me/likes"
    query = {"fields": "id,name,link,picture,created_time"}
    paging = BodyCursor("after", ("paging", "cursors", "after"), size=100, size_param="limit", when=("paging", "next"))
    entries = ("data",)

    @override
    def check(self, job: Job, response: requests.Response) -> None:
        if response.status_code >= 400:
            error = _error(response)
            message = (
                f"{response.status_code} facebook error {clip(error.get('code'), 20)}: "
                f"{clip(error.get('message', ''), 200)}: GET {where(response.url)}"
            )
            if error.get("code") == 190:
                raise Unauthorized(message, response.status_code)
            if error.get("code") in THROTTLED:
                raise RateLimited(message, None, response.status_code)
        super().check(job, response)

    @override
    def quota(self, response: requests.Response, now: datetime | None = None) -> Quota | None:
        """X-App-Usage: the highest of call_count/total_cputime/total_time, as remaining percent."""
        try:
            usage = json.loads(response.headers.get("X-App-Usage", ""))
            used = max(float(v) for v in usage.values())
        except (ValueError, TypeError, AttributeError, RecursionError):
            return None
        return Quota(remaining=max(int(100 - min(used, 100)), 0), limit=100)

    @override
    def map(self, page: Any) -> Item:
        picture = ((page.get("picture") or {}).get("data") or {}).get("url")
        return {
            "itemId": entry_id(page["id"]),
            "source": page.get("link") or f"https://www.facebook.com/{page['id']}",
            "title": page["name"],
            "name": page["name"],  # the original collector's field for it
            "authorName": page["name"],
            "authorUrl": page.get("link") or f"https://www.facebook.com/{page['id']}",
            "avatarUrl": picture,
            # on /me/likes, created_time is when the user liked the Page (Graph API reference), not the Page's
            # own creation: the API gives no creation time here, so `created` stays empty
            "likedAt": optional_date(page.get("created_time")),
        }


def _error(response: requests.Response) -> dict:
    body = error_json(response)
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}
