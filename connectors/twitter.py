"""X (Twitter) liked posts, API v2: GET https://api.x.com/2/users/{id}/liked_tweets, `pagination_token` paging.

The user id comes from the network (`serviceUserId`) or, once, from /2/users/me. User tokens last about two
hours: an expired one is refreshed with the refreshToken and TWITTER_CLIENT_ID (and TWITTER_CLIENT_SECRET for a
confidential client). x-rate-limit-reset is epoch seconds. The last page has no `data` and no `next_token`.
"""

from __future__ import annotations

from typing import Any

import requests
from typing_extensions import override

from collector.sdk import (
    BadResponse,
    BodyCursor,
    IdentityLookup,
    Item,
    Job,
    OAuth2Refresh,
    PagedConnector,
    RateLimitHeaders,
    WhoAmI,
    dig,
    entry_id,
    optional_date,
)

API = "https://api.x.com/2"


class TwitterConnector(PagedConnector):
    name = "twitter"
    identity = IdentityLookup("serviceUserId", f"{API}/users/me", ("data", "id"))
    whoami = WhoAmI(
        f"{API}/users/me",
        ("data", "id"),
        (("data", "username"), ("data", "name")),
        fields={"serviceUserId": ("data", "id")},
    )
    token_refresh = OAuth2Refresh(
        f"{API}/oauth2/token", "TWITTER_CLIENT_ID", "TWITTER_CLIENT_SECRET", basic_auth="if_secret"
    )
    rate_limit = RateLimitHeaders("x-rate-limit-")
    query = {
        # note_tweet: a post longer than 280 characters comes with `text` cut short, its whole text in note_tweet
        "tweet.fields": "created_at,author_id,note_tweet",
        "expansions": "author_id",
        "user.fields": "profile_image_url,username",
    }
    paging = BodyCursor("pagination_token", ("meta", "next_token"), size=100, size_param="max_results")
    entries = ("data",)
    entries_optional = True

    @override
    def url(self, job: Job) -> str:
        return f"{API}/users/{job.network['serviceUserId']}/liked_tweets"

    @override
    def check_body(self, job: Job, response: requests.Response, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("meta"), dict):
            raise BadResponse("twitter: expected an object with meta")

    @override
    def read_page(self, body: Any) -> None:
        users = dig(body, ("includes", "users")) or []
        self.users = {u.get("id"): u for u in users if isinstance(u, dict)} if isinstance(users, list) else {}

    @override
    def map(self, post: Any) -> Item:
        author = self.users.get(post.get("author_id")) or {}
        username = author.get("username") or "i"
        return {
            "itemId": entry_id(post["id"]),
            "source": f"https://x.com/{username}/status/{post['id']}",
            "description": whole_text(post),
            "authorName": author.get("username") or author.get("name"),  # the original kept the screen name
            "authorUrl": f"https://x.com/{author['username']}" if author.get("username") else None,
            "avatarUrl": author.get("profile_image_url"),
            "created": optional_date(post.get("created_at")),
        }


def whole_text(post: dict) -> str:
    """A long post's whole text (`note_tweet.text`; `note_post.text` in the newest API description), else `text`."""
    for field in ("note_tweet", "note_post"):
        text = dig(post, (field, "text"))
        if isinstance(text, str) and text:
            return text
    return post["text"]
