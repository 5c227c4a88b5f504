"""Mastodon favourites on the user's own instance: GET {instanceUrl}/api/v1/favourites?limit=40.

Pages are followed only through the Link header (rel="next" carries max_id, an internal favourite id); the
network keeps that max_id as its cursor. X-RateLimit-Reset is an ISO 8601 date.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests

from collector.errors import Quota
from collector.htmltext import html_to_text
from collector.safeurl import safe_base_url
from collector.timeutil import parse_iso

from .base import Job, bearer, header_quota
from .paging import Page, PagedConnector

class MastodonConnector(PagedConnector):
    name = "mastodon"
    required_fields = ("accessToken", "instanceUrl")

    def fetch(self, job: Job, cursor: Any) -> Page:
        base = safe_base_url(job.network.get("instanceUrl"), "instanceUrl", self.settings.allow_private_hosts)
        params: dict[str, Any] = {"limit": 40}
        if cursor:
            params["max_id"] = cursor
        data, response = self.get_json(job, f"{base}/api/v1/favourites", params=params, headers=bearer(job))
        items = self.map_entries(data, self.map)
        return Page(items, next_max_id(response), self.quota(response))  # the Link header alone says "more"

    def quota(self, response: requests.Response, now=None) -> Quota | None:
        return header_quota(response, "X-RateLimit-", "iso", None)

    @staticmethod
    def map(status: dict) -> dict:
        account = status.get("account") or {}
        return {
            "itemId": str(status["id"]),
            "type": "mastodon",
            "source": status.get("url") or status["uri"],
            "title": html_to_text(status.get("spoiler_text")),
            "description": html_to_text(status.get("content")),
            "authorName": account.get("display_name") or account.get("acct"),
            "authorUrl": account.get("url") or profile_url(account.get("acct")),
            "avatarUrl": account.get("avatar"),
            "created": parse_iso(status["created_at"]),
        }


def profile_url(acct: Any) -> str | None:
    """https://host/@name from a remote account's `name@host` (when the account has no `url`)."""
    if isinstance(acct, str) and acct.count("@") == 1:
        name, host = acct.split("@")
        if name and host and "/" not in host:
            return f"https://{host}/@{name}"
    return None


def next_max_id(response: requests.Response) -> str | None:
    url = response.links.get("next", {}).get("url")
    if not url:
        return None
    values = parse_qs(urlsplit(url).query).get("max_id")
    return values[0] if values else None
