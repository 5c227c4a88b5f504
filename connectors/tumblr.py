"""Tumblr likes: GET https://api.tumblr.com/v2/user/likes?limit=20, paged back with `before` (a like time): the
answer's `_links.next` when it has one (the /user/likes docs do not promise it), else the oldest
`liked_timestamp` of the page; an empty page ends the walk. Legacy posts carry `title` (text posts), `summary`,
`body` or `caption` (HTML) and `blog_name`, often without a `blog` object.

Two kinds of network: OAuth 1.0a (accessToken + accessTokenSecret, signed with TUMBLR_CONSUMER_KEY /
TUMBLR_CONSUMER_SECRET) and OAuth 2 (a Bearer accessToken that expires; refreshed with the refreshToken and the
same consumer key and secret as client id and secret). Over quota: 429, no headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests
from typing_extensions import override

from collector.sdk import (
    BadResponse,
    Credential,
    Item,
    OAuth1OrBearer,
    OAuth1Signed,
    OAuth2Refresh,
    PagedConnector,
    Paging,
    WhoAmI,
    at,
    entry_id,
    first_line,
    html_to_text,
    next_token,
    optional_epoch,
    whole_number,
)

API = "https://api.tumblr.com/v2"


@dataclass(frozen=True)
class LikedBefore(Paging):
    """`before` = `_links.next.query_params.before`, else the oldest `liked_timestamp` of the page."""

    def params(self, cursor: Any) -> dict[str, Any]:
        return {"limit": 20, "before": cursor} if cursor else {"limit": 20}

    def next(self, cursor: Any, body: Any, response: requests.Response, entries: list) -> Any:
        if not entries:
            return None  # an empty page: the end
        path = ("response", "_links", "next", "query_params", "before")
        before = next_token(at(body, path), ".".join(path))
        if before is None:  # no link: the oldest like of the page (a number, or digits)
            times = [
                whole_number(p["liked_timestamp"], "liked_timestamp")
                for p in entries
                if isinstance(p, dict) and p.get("liked_timestamp") is not None
            ]
            if not times:  # entries, and no way on: an error, never the end of the history
                raise BadResponse(f"tumblr: a page of likes with neither {'.'.join(path)} nor a liked_timestamp")
            before = min(times)
        return str(before)


class TumblrConnector(PagedConnector):
    name = "tumblr"
    authentication = OAuth1OrBearer(OAuth1Signed("TUMBLR_CONSUMER_KEY", "TUMBLR_CONSUMER_SECRET"))
    token_refresh = OAuth2Refresh(
        f"{API}/oauth2/token", "TUMBLR_CONSUMER_KEY", "TUMBLR_CONSUMER_SECRET", unless_field="accessTokenSecret"
    )  # OAuth 1.0a tokens do not expire
    credentials = (
        Credential("accessToken"),
        Credential("accessTokenSecret", required=False, help="OAuth 1.0a networks only"),
        Credential("refreshToken", required=False, help="OAuth 2 networks only"),
    )
    # /user/info: the user's name (Tumblr gives no other account id) and blogs
    whoami = WhoAmI(f"{API}/user/info", ("response", "user", "name"), (("response", "user", "name"),))
    rate_limit = None
    endpoint = f"{API}/user/likes"
    paging = LikedBefore()
    entries = ("response", "liked_posts")

    @override
    def map(self, post: Any) -> Item:
        blog = post.get("blog") or {}
        name = post.get("blog_name") or blog.get("name")
        text = html_to_text(post.get("body") or post.get("caption") or post.get("description"))
        summary = html_to_text(post.get("summary"))
        return {
            "itemId": entry_id(post.get("id_string") or post["id"]),
            "source": post["post_url"],
            "title": html_to_text(post.get("title")) or summary or first_line(text),
            "description": text or summary,
            "authorName": name,
            "authorUrl": blog.get("url") or (f"https://{name}.tumblr.com" if isinstance(name, str) and name else None),
            "avatarUrl": f"{API}/blog/{name}/avatar/64" if name else None,
            "created": optional_epoch(post.get("timestamp")),
            "likedAt": optional_epoch(post.get("liked_timestamp")),
        }
