"""GitHub stars: GET {GITHUB_API_URL}/user/starred, newest star first, with the star time (star+json).

GitHub keeps its own walk (the SDK's paged walk does not fit two of its features):
initial: one page per run (state `page`), until a page has no rel="next" link.
normal:  pages from the newest until a star older than the marker `sinceLikedAt` (at most MAX_NORMAL_PAGES).
         The first page is asked for with If-None-Match and the stored `etag`: a 304 means nothing new and
         costs no quota.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import requests
from typing_extensions import override

from collector.sdk import Connector, Item, Job, Result, parse_iso

PER_PAGE = 100
MAX_NORMAL_PAGES = 10
API_VERSION = "2022-11-28"


class GitHubAPI(Connector):
    """What GitHub's REST API asks of every call: the headers, one quota per user, its secondary rate limit."""

    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
    quota_group = "github"

    @override
    def rate_limit_reset(self, job: Job, response: requests.Response) -> datetime | None:
        reset = super().rate_limit_reset(job, response)
        if reset is None and "secondary rate limit" in response.text.lower():
            return job.now + timedelta(seconds=60)
        return reset


class GitHubConnector(GitHubAPI):
    name = "github"
    headers = {**GitHubAPI.headers, "Accept": "application/vnd.github.star+json"}

    def fetch(self, job: Job, page: int, etag: str | None = None) -> tuple[list[Item] | None, requests.Response]:
        """One page of stars, mapped; None when the server answered 304 Not Modified to `etag`."""
        response = self.get(
            job,
            f"{self.settings.github_api_url}/user/starred",
            params={"per_page": PER_PAGE, "page": page},
            headers={"If-None-Match": etag} if etag else None,
        )
        if etag and response.status_code == 304:
            return None, response
        data, response = self.parse_json(job, response)
        return self.map_entries(data, self.map), response

    @override
    def initial(self, job: Job) -> Result:
        page = job.state_int("page", 1, minimum=1)
        items, response = self.fetch(job, page)
        state: dict[str, Any] = {"page": page + 1}
        if page == 1:
            state.update(etag_state(response))
            if items:
                state["sinceLikedAt"] = newest(items)
        done = not items or "next" not in response.links
        return Result(items or [], state, done=done, quota=self.quota(response))

    @override
    def normal(self, job: Job) -> Result:
        marker = job.state_datetime("sinceLikedAt")
        etag = job.network.get("etag") if marker is not None else None
        collected: list[Item] = []
        state: dict[str, Any] = {}
        for page in range(1, MAX_NORMAL_PAGES + 1):
            items, response = self.fetch(job, page, etag=etag if page == 1 else None)
            quota = self.quota(response)
            if items is None:  # 304: nothing new since the stored ETag
                return Result([], quota=quota)
            if page == 1:
                state.update(etag_state(response))
            fresh = [item for item in items if marker is None or liked_since(item, marker)]
            collected.extend(fresh)
            if marker is None or len(fresh) < len(items) or "next" not in response.links:
                break  # reached stars seen before, or the end
            if quota and quota.exhausted():  # more new stars wait on later pages: keep marker and ETag, walk again
                return Result(collected, quota=quota)
        if collected:
            state["sinceLikedAt"] = max(newest(collected), marker) if marker else newest(collected)
        return Result(collected, state, quota=quota)

    @staticmethod
    def map(entry: Any) -> Item:
        repo = entry["repo"]
        owner = repo.get("owner") or {}
        return {
            "itemId": str(repo["id"]),
            "source": repo["html_url"],
            "title": repo["full_name"],
            "name": repo["full_name"],  # the original collector's field for it
            "repo": repo.get("name"),
            "description": repo.get("description"),
            "authorName": owner.get("login"),
            "authorUrl": owner.get("html_url"),
            "avatarUrl": owner.get("avatar_url"),
            "created": parse_iso(repo["created_at"]),
            "likedAt": parse_iso(entry["starred_at"]),
        }


def etag_state(response: requests.Response) -> dict[str, Any]:
    etag = response.headers.get("ETag")
    return {"etag": etag} if etag else {}


def liked_since(item: Item, marker: datetime) -> bool:
    liked = item.get("likedAt")
    return liked is not None and liked >= marker


def newest(items: list[Item]) -> datetime:
    return max(liked for item in items if (liked := item.get("likedAt")) is not None)
