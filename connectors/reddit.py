"""Reddit saved posts and comments: GET https://oauth.reddit.com/user/{username}/saved, `after` fullnames.

The username comes from the network (`username`) or, once, from /api/v1/me. Tokens are short-lived: an expired
one is refreshed with the network's refreshToken and REDDIT_CLIENT_ID / REDDIT_CLIENT_SECRET.
X-Ratelimit-Reset counts seconds to the end of the window.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from collector.sdk import (
    Bearer,
    BodyCursor,
    IdentityLookup,
    Item,
    Job,
    OAuth2Refresh,
    PagedConnector,
    RateLimitHeaders,
    WhoAmI,
    entry_id,
    optional_epoch,
)

API = "https://oauth.reddit.com"
WEB = "https://www.reddit.com"


class RedditConnector(PagedConnector):
    name = "reddit"
    authentication = Bearer(scheme="bearer")
    # a 403 on /user/{name}/saved for a known name: the account may have been renamed; its name is looked up again
    identity = IdentityLookup("username", f"{API}/api/v1/me", ("name",), recheck_on=(403,))
    whoami = WhoAmI(f"{API}/api/v1/me", ("id",), (("name",),), fields={"username": ("name",)})
    token_refresh = OAuth2Refresh(
        "https://www.reddit.com/api/v1/access_token", "REDDIT_CLIENT_ID", "REDDIT_CLIENT_SECRET", basic_auth=True
    )
    rate_limit = RateLimitHeaders("X-Ratelimit-", reset="seconds")
    query = {"raw_json": 1}
    paging = BodyCursor("after", ("data", "after"), size=100, size_param="limit")  # `after` null: the end
    entries = ("data", "children")

    @override
    def url(self, job: Job) -> str:
        return f"{API}/user/{job.network['username']}/saved"

    @override
    def map(self, child: Any) -> Item:
        kind, data = child["kind"], child["data"]
        comment = kind == "t1"
        return {
            "itemId": entry_id(data["name"]),
            "source": permalink(data, comment),
            "title": data.get("link_title") if comment else data["title"],
            "description": data.get("body") if comment else (data.get("selftext") or data.get("url")),
            "authorName": author(data),
            "authorUrl": f"{WEB}/user/{author(data)}" if author(data) else None,
            "created": optional_epoch(data.get("created_utc")),
        }


GONE = ("[deleted]", "[removed]")  # what Reddit shows for an account deleted or suspended, or a removed author


def author(data: dict) -> str | None:
    """The author's name, or None for a deleted or removed one (no link to a profile that does not exist)."""
    name = data.get("author")
    return name if isinstance(name, str) and name and name not in GONE else None


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
