"""Reddit saved posts and comments: GET https://oauth.reddit.com/user/{username}/saved, `after` fullnames.

The username comes from the network (`username`) or, once, from /api/v1/me. Tokens are short-lived: an expired
one is refreshed with the network's refreshToken and REDDIT_CLIENT_ID / REDDIT_CLIENT_SECRET.
X-Ratelimit-Reset counts seconds to the end of the window.
"""
from __future__ import annotations

from typing import Any

import requests

from collector.errors import BadResponse, Quota
from collector.timeutil import from_epoch

from .base import Job, header_quota
from .paging import Page, PagedConnector

API = "https://oauth.reddit.com"
TOKEN_URL = "https://www.reddit.com/api/v1/access_token"
WEB = "https://www.reddit.com"


class RedditConnector(PagedConnector):
    name = "reddit"
    refreshable = True
    identity_field = "username"

    def headers(self, job: Job) -> dict[str, str]:
        return {"Authorization": f"bearer {job.token}"}

    def lookup_identity(self, job: Job) -> str:
        data, _ = self.get_json(job, f"{API}/api/v1/me", headers=self.headers(job))
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise BadResponse("reddit: /api/v1/me has no name")
        return data["name"]

    def fetch(self, job: Job, cursor: Any) -> Page:
        params: dict[str, Any] = {"limit": 100, "raw_json": 1}
        if cursor:
            params["after"] = cursor
        data, response = self.get_json(job, f"{API}/user/{job.network['username']}/saved", params=params,
                                       headers=self.headers(job))
        if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
            raise BadResponse("reddit: expected a Listing")
        listing = data["data"]
        items = self.map_entries(listing.get("children"), self.map)
        return Page(items, listing.get("after") or None, self.quota(response, job.now))  # `after` null: the end

    def quota(self, response: requests.Response, now=None) -> Quota | None:
        return header_quota(response, "X-Ratelimit-", "seconds", now)

    def refresh(self, job: Job) -> dict[str, Any]:
        return self.oauth2_refresh(job, TOKEN_URL, self.settings.get("REDDIT_CLIENT_ID"),
                                   self.settings.get("REDDIT_CLIENT_SECRET"), basic_auth=True)

    @staticmethod
    def map(child: dict) -> dict:
        kind, data = child["kind"], child["data"]
        comment = kind == "t1"
        return {
            "itemId": data["name"],
            "type": "reddit",
            "source": permalink(data, comment),
            "title": data.get("link_title") if comment else data["title"],
            "description": data.get("body") if comment else (data.get("selftext") or data.get("url")),
            "authorName": data.get("author"),
            "authorUrl": f"{WEB}/user/{data['author']}" if data.get("author") else None,
            "created": from_epoch(data["created_utc"]),
        }


def permalink(data: dict, comment: bool) -> str:
    """The item's page: its `permalink`; for a comment without one (older listings), the comment's canonical URL
    built from its link and id, else the link's own permalink or URL."""
    if data.get("permalink"):
        return WEB + data["permalink"]
    if comment:
        link_id, comment_id = data.get("link_id"), data.get("id")
        if isinstance(link_id, str) and link_id.startswith("t3_") and comment_id:
            return f"{WEB}/comments/{link_id[3:]}/_/{comment_id}/"
        if data.get("link_permalink"):
            return data["link_permalink"]
        if data.get("link_url"):
            return data["link_url"]
    return data["url"]
