"""X (Twitter) liked posts, API v2: GET https://api.x.com/2/users/{id}/liked_tweets, `pagination_token` paging.

The user id comes from the network (`serviceUserId`) or, once, from /2/users/me. User tokens last about two
hours: an expired one is refreshed with the refreshToken and TWITTER_CLIENT_ID (and TWITTER_CLIENT_SECRET for a
confidential client). x-rate-limit-reset is epoch seconds.
"""
from __future__ import annotations

from typing import Any

import requests

from collector.errors import BadResponse, Quota
from collector.timeutil import parse_iso

from .base import Job, bearer, header_quota
from .paging import Page, PagedConnector

API = "https://api.x.com/2"


class TwitterConnector(PagedConnector):
    name = "twitter"
    refreshable = True
    identity_field = "serviceUserId"

    def lookup_identity(self, job: Job) -> str:
        data, _ = self.get_json(job, f"{API}/users/me", headers=bearer(job))
        if not isinstance(data, dict) or not isinstance((data.get("data") or {}).get("id"), str):
            raise BadResponse("twitter: /2/users/me has no id")
        return data["data"]["id"]

    def fetch(self, job: Job, cursor: Any) -> Page:
        params: dict[str, Any] = {"max_results": 100, "tweet.fields": "created_at,author_id",
                                  "expansions": "author_id", "user.fields": "profile_image_url,username"}
        if cursor:
            params["pagination_token"] = cursor
        data, response = self.get_json(job, f"{API}/users/{job.network['serviceUserId']}/liked_tweets",
                                       params=params, headers=bearer(job))
        if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
            raise BadResponse("twitter: expected an object with meta")
        users = {u.get("id"): u for u in (data.get("includes") or {}).get("users") or [] if isinstance(u, dict)}
        items = self.map_entries(data.get("data", []), lambda post: self.map(post, users))
        return Page(items, (data.get("meta") or {}).get("next_token"), self.quota(response))  # no next_token: end

    def quota(self, response: requests.Response, now=None) -> Quota | None:
        return header_quota(response, "x-rate-limit-", "epoch", None)

    def refresh(self, job: Job) -> dict[str, Any]:
        secret = self.settings.get("TWITTER_CLIENT_SECRET")
        return self.oauth2_refresh(job, f"{API}/oauth2/token", self.settings.get("TWITTER_CLIENT_ID"), secret,
                                   basic_auth=bool(secret))

    @staticmethod
    def map(post: dict, users: dict) -> dict:
        author = users.get(post.get("author_id")) or {}
        username = author.get("username") or "i"
        return {
            "itemId": str(post["id"]),
            "type": "twitter",
            "source": f"https://x.com/{username}/status/{post['id']}",
            "description": post["text"],
            "authorName": author.get("username") or author.get("name"),  # the original kept the screen name
            "authorUrl": f"https://x.com/{author['username']}" if author.get("username") else None,
            "avatarUrl": author.get("profile_image_url"),
            "created": parse_iso(post["created_at"]) if post.get("created_at") else None,
        }
