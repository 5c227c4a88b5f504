"""Mastodon favourites on the user's own instance: GET {instanceUrl}/api/v1/favourites?limit=40.

Pages are followed only through the Link header (rel="next" carries max_id, an internal favourite id); the
network keeps that max_id as its cursor. X-RateLimit-Reset is an ISO 8601 date. Content is HTML: stored as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typing_extensions import override

from collector.sdk import (
    Credential,
    Item,
    Job,
    LinkCursor,
    PagedConnector,
    RateLimitHeaders,
    WhoAmI,
    entry_id,
    html_to_text,
    optional_date,
    safe_base_url,
)

if TYPE_CHECKING:  # pragma: no cover
    from collector.sdk import ConnectorAPI as Connector


class MastodonConnector(PagedConnector):
    name = "mastodon"
    required_fields = ("accessToken", "instanceUrl")
    credentials = (Credential("accessToken"), Credential("instanceUrl", secret=False, help="https://your.instance"))
    # verify_credentials: the token's account (ids are the instance's own: qualified with its host)
    whoami = WhoAmI(
        lambda connector, job: f"{instance(connector, job)}/api/v1/accounts/verify_credentials",
        ("id",),
        (("acct",), ("username",)),
        per_host=True,
    )
    rate_limit = RateLimitHeaders("X-RateLimit-", reset="iso")
    paging = LinkCursor("max_id", size=40)

    @override
    def url(self, job: Job) -> str:
        return f"{instance(self, job)}/api/v1/favourites"

    @override
    def map(self, status: Any) -> Item:
        account = status.get("account") or {}
        return {
            "itemId": entry_id(status["id"]),
            "source": status.get("url") or status["uri"],
            "title": html_to_text(status.get("spoiler_text")),
            "description": html_to_text(status.get("content")),
            "authorName": account.get("display_name") or account.get("acct"),
            "authorUrl": account.get("url") or profile_url(account.get("acct")),
            "avatarUrl": account.get("avatar"),
            "created": optional_date(status.get("created_at")),
        }


def instance(connector: Connector, job: Job) -> str:
    """The network's instance, checked (https, public unless ALLOW_PRIVATE_HOSTS)."""
    return safe_base_url(job.network.get("instanceUrl"), "instanceUrl", connector.settings.allow_private_hosts)


def profile_url(acct: Any) -> str | None:
    """https://host/@name from a remote account's `name@host` (when the account has no `url`)."""
    if isinstance(acct, str) and acct.count("@") == 1:
        name, host = acct.split("@")
        if name and host and "/" not in host:
            return f"https://{host}/@{name}"
    return None
