"""Bluesky likes: GET {pdsUrl}/xrpc/app.bsky.feed.getActorLikes?actor={did}, `cursor` paging.

The network carries `did` (the user's DID), `accessToken` (accessJwt), `refreshToken` (refreshJwt) and optionally
`pdsUrl` (default https://bsky.social; must be https and public). An `ExpiredToken` answer is refreshed through
com.atproto.server.refreshSession, which needs no app credentials. RateLimit-Reset is epoch seconds. The docs:
a cursor can come back with an empty page, which is the end. A handle may be the sentinel `handle.invalid`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import requests
from typing_extensions import override

from collector.sdk import (
    BadResponse,
    BodyCursor,
    Credential,
    Item,
    Job,
    PagedConnector,
    RateLimitHeaders,
    TokenExpired,
    Unauthorized,
    WhoAmI,
    entry_id,
    error_json,
    optional_date,
    safe_base_url,
    where,
)

if TYPE_CHECKING:  # pragma: no cover
    from collector.sdk import ConnectorAPI as Connector

DEFAULT_PDS = "https://bsky.social"
INVALID_HANDLE = "handle.invalid"  # com.atproto.identity.defs: the handle could not be verified


@dataclass(frozen=True)
class SessionRefresh:
    """atproto's refreshSession: POST with the refreshJwt as Bearer; a new accessJwt (and refreshJwt) back."""

    def applies(self, job: Job) -> bool:
        return bool(job.network.get("refreshToken"))

    def refresh(self, connector: Connector, job: Job) -> dict[str, Any]:
        url = f"{pds(connector, job)}/xrpc/com.atproto.server.refreshSession"
        response = connector.http.post(url, headers={"Authorization": f"Bearer {job.network['refreshToken']}"})
        if response.status_code in (400, 401):
            raise Unauthorized(
                f"token refresh refused: {response.status_code} {_error(response)}: POST {where(url)}",
                response.status_code,
            )
        body, _ = connector.parse_json(job, response)
        if not isinstance(body, dict) or not isinstance(body.get("accessJwt"), str):
            raise BadResponse("bluesky: refreshSession answer has no accessJwt")
        tokens = {"accessToken": body["accessJwt"]}
        if isinstance(body.get("refreshJwt"), str):
            tokens["refreshToken"] = body["refreshJwt"]
        return tokens


def pds(connector: Connector, job: Job) -> str:
    return safe_base_url(job.network.get("pdsUrl") or DEFAULT_PDS, "pdsUrl", connector.settings.allow_private_hosts)


class BlueskyConnector(PagedConnector):
    name = "bluesky"
    required_fields = ("accessToken", "did")
    path_fields = ("did",)
    token_refresh = SessionRefresh()
    credentials = (
        Credential("accessToken", help="the session's accessJwt"),
        Credential("refreshToken", required=False, help="the session's refreshJwt"),
        Credential("pdsUrl", required=False, secret=False, help=f"the PDS, {DEFAULT_PDS} when not given"),
    )
    # getSession: the session's account (its DID, which the likes are asked for, and its handle)
    whoami = WhoAmI(
        lambda connector, job: f"{pds(connector, job)}/xrpc/com.atproto.server.getSession",
        ("did",),
        (("handle",),),
        fields={"did": ("did",)},
    )
    rate_limit = RateLimitHeaders("RateLimit-")
    paging = BodyCursor("cursor", ("cursor",), size=100, size_param="limit", stop_on_empty=True)
    entries = ("feed",)

    @override
    def url(self, job: Job) -> str:
        return f"{pds(self, job)}/xrpc/app.bsky.feed.getActorLikes"

    @override
    def params(self, job: Job) -> dict[str, Any]:
        return {"actor": job.network["did"]}

    @override
    def check(self, job: Job, response: requests.Response) -> None:
        if response.status_code == 400 and _error(response) == "ExpiredToken":
            raise TokenExpired(f"400 ExpiredToken: GET {where(response.url)}", 400)
        super().check(job, response)

    @override
    def map(self, entry: Any) -> Item:
        post = entry["post"]
        author, record = post.get("author") or {}, post["record"]
        did = author.get("did") or post["uri"].split("/")[2]
        handle = author.get("handle")
        profile = handle if handle and handle != INVALID_HANDLE else did  # the sentinel: link and name by DID
        rkey = post["uri"].rsplit("/", 1)[-1]
        return {
            "itemId": entry_id(post["uri"]),
            "source": f"https://bsky.app/profile/{profile}/post/{rkey}",
            "description": record.get("text"),
            "authorName": author.get("displayName") or profile,
            "authorUrl": f"https://bsky.app/profile/{profile}",
            "avatarUrl": author.get("avatar"),
            "created": optional_date(record.get("createdAt")),  # an impossible date (month 0): kept, date empty
        }


def _error(response: requests.Response) -> str:
    body = error_json(response)
    return str(body.get("error", "")) if isinstance(body, dict) else ""
