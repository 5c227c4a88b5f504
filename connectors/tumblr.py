"""Tumblr likes: GET https://api.tumblr.com/v2/user/likes?limit=20, paged back with `before` (a like time): the
answer's `_links.next` when it has one (the /user/likes docs do not promise it), else the oldest
`liked_timestamp` of the page; an empty page ends the walk. Legacy posts carry `title` (text posts), `summary`,
`body` or `caption` (HTML) and `blog_name`, often without a `blog` object.

Two kinds of network: OAuth 1.0a (accessToken + accessTokenSecret, signed with requests-oauthlib and
TUMBLR_CONSUMER_KEY / TUMBLR_CONSUMER_SECRET) and OAuth 2 (a Bearer accessToken that expires; refreshed with the
refreshToken and the same consumer key and secret as client id and secret). Over quota: 429, no headers.
"""
from __future__ import annotations

from typing import Any

from requests_oauthlib import OAuth1

from collector.errors import BadResponse
from collector.htmltext import first_line, html_to_text
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
        posts = body.get("liked_posts")
        items = self.map_entries(posts, self.map)
        next_link = (body.get("_links") or {}).get("next") or {}
        before = (next_link.get("query_params") or {}).get("before") if isinstance(next_link, dict) else None
        if before is None and items:
            times = [p["liked_timestamp"] for p in posts if isinstance(p, dict)
                     and isinstance(p.get("liked_timestamp"), int) and not isinstance(p["liked_timestamp"], bool)]
            before = min(times) if times else None
        return Page(items, str(before) if before is not None else None)

    def can_refresh(self, job: Job) -> bool:
        return super().can_refresh(job) and not job.network.get("accessTokenSecret")

    def refresh(self, job: Job) -> dict[str, Any]:
        return self.oauth2_refresh(job, f"{API}/oauth2/token", self.settings.get("TUMBLR_CONSUMER_KEY"),
                                   self.settings.get("TUMBLR_CONSUMER_SECRET"))

    @staticmethod
    def map(post: dict) -> dict:
        blog = post.get("blog") or {}
        name = post.get("blog_name") or blog.get("name")
        text = html_to_text(post.get("body") or post.get("caption") or post.get("description"))
        summary = html_to_text(post.get("summary"))
        return {
            "itemId": str(post.get("id_string") or post["id"]),
            "type": "tumblr",
            "source": post["post_url"],
            "title": html_to_text(post.get("title")) or summary or first_line(text),
            "description": text or summary,
            "authorName": name,
            "authorUrl": blog.get("url") or (f"https://{name}.tumblr.com" if isinstance(name, str) and name else None),
            "avatarUrl": f"{API}/blog/{name}/avatar/64" if name else None,
            "created": from_epoch(post["timestamp"]),
            "likedAt": from_epoch(post["liked_timestamp"]) if post.get("liked_timestamp") else None,
        }
