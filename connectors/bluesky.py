"""Bluesky likes: GET {pdsUrl}/xrpc/app.bsky.feed.getActorLikes?actor={did}, `cursor` paging.

The network carries `did` (the user's DID), `accessToken` (accessJwt), `refreshToken` (refreshJwt) and optionally
`pdsUrl` (default https://bsky.social; must be https and public). An `ExpiredToken` answer is refreshed through
com.atproto.server.refreshSession, which needs no app credentials. RateLimit-Reset is epoch seconds.
"""
from __future__ import annotations

from typing import Any

import requests

from collector.errors import BadResponse, Quota, TokenExpired, Unauthorized
from collector.http import where
from collector.safeurl import safe_base_url
from collector.timeutil import parse_iso

from .base import Job, bearer, header_quota
from .paging import Page, PagedConnector

DEFAULT_PDS = "https://bsky.social"
INVALID_HANDLE = "handle.invalid"  # com.atproto.identity.defs: the handle could not be verified


class BlueskyConnector(PagedConnector):
    name = "bluesky"
    refreshable = True
    required_fields = ("accessToken", "did")
    path_fields = ("did",)

    def pds(self, job: Job) -> str:
        return safe_base_url(job.network.get("pdsUrl") or DEFAULT_PDS, "pdsUrl", self.settings.allow_private_hosts)

    def fetch(self, job: Job, cursor: Any) -> Page:
        params: dict[str, Any] = {"actor": job.network["did"], "limit": 100}
        if cursor:
            params["cursor"] = cursor
        data, response = self.get_json(job, f"{self.pds(job)}/xrpc/app.bsky.feed.getActorLikes", params=params,
                                       headers=bearer(job))
        if not isinstance(data, dict):
            raise BadResponse("bluesky: expected an object with a feed")
        items = self.map_entries(data.get("feed"), self.map)
        # the docs: a cursor can come back with an empty page, which is the end
        return Page(items, data.get("cursor") if items else None, self.quota(response))

    def check(self, job: Job, response: requests.Response) -> None:
        if response.status_code == 400 and _error(response) == "ExpiredToken":
            raise TokenExpired(f"400 ExpiredToken: GET {where(response.url)}", 400)
        super().check(job, response)

    def quota(self, response: requests.Response, now=None) -> Quota | None:
        return header_quota(response, "RateLimit-", "epoch", None)

    def refresh(self, job: Job) -> dict[str, Any]:
        url = f"{self.pds(job)}/xrpc/com.atproto.server.refreshSession"
        response = self.http.post(url, headers={"Authorization": f"Bearer {job.network['refreshToken']}"})
        if response.status_code in (400, 401):
            raise Unauthorized(f"token refresh refused: {response.status_code} {_error(response)}: "
                               f"POST {where(url)}", response.status_code)
        body, _ = self.parse_json(job, response)
        if not isinstance(body, dict) or not isinstance(body.get("accessJwt"), str):
            raise BadResponse("bluesky: refreshSession answer has no accessJwt")
        tokens = {"accessToken": body["accessJwt"]}
        if isinstance(body.get("refreshJwt"), str):
            tokens["refreshToken"] = body["refreshJwt"]
        return tokens

    @staticmethod
    def map(entry: dict) -> dict:
        post = entry["post"]
        author, record = post.get("author") or {}, post["record"]
        did = author.get("did") or post["uri"].split("/")[2]
        handle = author.get("handle")
        if not handle or handle == INVALID_HANDLE:  # the documented sentinel: link and name by DID instead
            handle = None
        profile = handle or did
        rkey = post["uri"].rsplit("/", 1)[-1]
        return {
            "itemId": post["uri"],
            "type": "bluesky",
            "source": f"https://bsky.app/profile/{profile}/post/{rkey}",
            "description": record.get("text"),
            "authorName": author.get("displayName") or profile,
            "authorUrl": f"https://bsky.app/profile/{profile}",
            "avatarUrl": author.get("avatar"),
            "created": parse_iso(record["createdAt"]),
        }


def _error(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("error", "")) if isinstance(body, dict) else ""
