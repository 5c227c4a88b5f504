"""Tumblr likes: GET https://api.tumblr.com/v2/user/likes?limit=20, paged back with `before` (a like time).

Two kinds of network: OAuth 1.0a (accessToken + accessTokenSecret, signed with requests-oauthlib and
TUMBLR_CONSUMER_KEY / TUMBLR_CONSUMER_SECRET) and OAuth 2 (a Bearer accessToken that expires; refreshed with the
refreshToken and the same consumer key and secret as client id and secret). Over quota: 429, no headers.
"""
from __future__ import annotations

from typing import Any

from requests_oauthlib import OAuth1

from collector.errors import BadResponse
from collector.timeutil import from_epoch

from .base import Job, bearer
from .paging import Page, PagedConnector

API = "https://api.tumblr.com/v2"


class TumblrConnector(PagedConnector):
    name = "tumblr"
    refreshable = True  # OAuth 2 networks; OAuth 1.0a tokens do not expire

    def signed(self, job: Job) -> dict[str, Any]:
        """Request arguments carrying the credentials: an OAuth 1.0a signature or a Bearer header."""
        secret = job.network.get("accessTokenSecret")
        if isinstance(secret, str) and secret:
            return {"auth": OAuth1(self.setting("TUMBLR_CONSUMER_KEY"), self.setting("TUMBLR_CONSUMER_SECRET"),
                                   resource_owner_key=job.token, resource_owner_secret=secret,
                                   signature_type="auth_header")}
        return {"headers": bearer(job)}

    def fetch(self, job: Job, cursor: Any) -> Page:
        params: dict[str, Any] = {"limit": 20}
        if cursor:
            params["before"] = cursor
        response = self.http.get(f"{API}/user/likes", params=params, **self.signed(job))
        data, response = self.parse_json(job, response)
        body = data.get("response") if isinstance(data, dict) else None
        if not isinstance(body, dict):
            raise BadResponse("tumblr: expected {meta, response}")
        items = self.map_entries(body.get("liked_posts"), self.map)
        next_link = (body.get("_links") or {}).get("next") or {}
        before = (next_link.get("query_params") or {}).get("before")
        return Page(items, str(before) if items and before else None)

    def can_refresh(self, job: Job) -> bool:
        return super().can_refresh(job) and not job.network.get("accessTokenSecret")

    def refresh(self, job: Job) -> dict[str, Any]:
        return self.oauth2_refresh(job, f"{API}/oauth2/token", self.settings.get("TUMBLR_CONSUMER_KEY"),
                                   self.settings.get("TUMBLR_CONSUMER_SECRET"))

    @staticmethod
    def map(post: dict) -> dict:
        blog = post.get("blog") or {}
        name = post.get("blog_name") or blog.get("name")
        return {
            "itemId": str(post.get("id_string") or post["id"]),
            "type": "tumblr",
            "source": post["post_url"],
            "title": post.get("summary") or None,
            "description": post.get("summary") or post.get("type"),
            "authorName": name,
            "authorUrl": blog.get("url"),
            "avatarUrl": f"{API}/blog/{name}/avatar/64" if name else None,
            "created": from_epoch(post["timestamp"]),
            "likedAt": from_epoch(post["liked_timestamp"]) if post.get("liked_timestamp") else None,
        }
