"""GitHub stars: GET {GITHUB_API_URL}/user/starred, newest star first, with the star time (star+json).

GitHub keeps its own walk (the SDK's paged walk does not fit two of its features):
initial: one page per run (state `page`), until a page has no rel="next" link.
normal:  a poll of the newest POLL_PAGE stars with If-None-Match and the stored `etag` (a 304 means nothing new
         and costs no quota); only when all of them are new, full pages from the newest until a star older
         than the marker `sinceLikedAt` (at most MAX_NORMAL_PAGES).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypedDict

import requests
from typing_extensions import override

from collector.sdk import Connector, Item, Job, Poll, Result, WhoAmI, entry_id, keepable_header, optional_date

PER_PAGE = 100
POLL_PAGE = 10  # a user stars a few repositories between polls, not a hundred
MAX_NORMAL_PAGES = 10
API_VERSION = "2022-11-28"


class GitHubAPI(Connector):
    """What GitHub's REST API asks of every call: the headers, one quota per user, its secondary rate limit."""

    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
    quota_group = "github"
    # GET /user: the authenticated user (id, login, name)
    whoami = WhoAmI(lambda connector, job: f"{connector.settings.github_api_url}/user", ("id",), (("login",),))

    @override
    def rate_limit_reset(self, job: Job, response: requests.Response) -> datetime | None:
        reset = super().rate_limit_reset(job, response)
        if reset is None and "secondary rate limit" in response.text.lower():
            return job.now + timedelta(seconds=60)
        return reset


class Owner(TypedDict, total=False):
    login: Any
    html_url: Any
    avatar_url: Any


class Repository(TypedDict, total=False):
    id: Any
    html_url: Any
    full_name: Any
    name: Any
    description: Any
    created_at: Any
    owner: Owner | None


class Star(TypedDict, total=False):
    """What `map` reads of a star+json entry (of the ~100 fields GitHub sends)."""

    starred_at: Any
    repo: Repository


class GitHubConnector(GitHubAPI):
    name = "github"
    headers = {**GitHubAPI.headers, "Accept": "application/vnd.github.star+json"}
    entry_shape = Star

    def fetch(
        self, job: Job, page: int, etag: str | None = None, per_page: int = PER_PAGE
    ) -> tuple[list[Item] | None, requests.Response]:
        """One page of stars, mapped; None when the server answered 304 Not Modified to `etag`."""
        items, response, _ = self.fetch_page(job, page, etag, per_page)
        return items, response

    def fetch_page(
        self, job: Job, page: int, etag: str | None = None, per_page: int = PER_PAGE
    ) -> tuple[list[Item] | None, requests.Response, int]:
        """As `fetch`, and how many entries the page held as sent (those that could not be mapped too)."""
        url, params = self.page_request(page, per_page)
        response = self.get(job, url, params=params, headers={"If-None-Match": etag} if etag else None)
        if etag and response.status_code == 304:
            return None, response, 0
        data, response = self.parse_entries(job, response)
        return self.map_entries(data, self.map), response, len(data)

    @override
    def initial(self, job: Job) -> Result:
        page = job.state_int("page", 1, minimum=1)
        items, response, sent = self.fetch_page(job, page)
        state: dict[str, Any] = {"page": page + 1}
        latest = newest(items or []) if page == 1 else None
        if latest is not None:  # (no ETag kept: polls ask for another URL, the newest POLL_PAGE stars)
            state["sinceLikedAt"] = latest
        done = not sent or "next" not in response.links  # an empty page, or no next link (the SDK's rule)
        return Result(items or [], state, done=done, quota=self.quota(response))

    @override
    def poll(self, job: Job) -> Poll | None:
        """The poll `normal` sends first, when it has an ETag to send (without one, no answer can be a 304)."""
        etag = self.poll_etag(job)
        if not etag:
            return None
        url, params = self.page_request(1, POLL_PAGE)
        return Poll(url, params, {"If-None-Match": etag})

    @staticmethod
    def poll_etag(job: Job) -> str | None:
        return job.network.get("etag") if job.state_datetime("sinceLikedAt") is not None else None

    def page_request(self, page: int, per_page: int) -> tuple[str, dict[str, int]]:
        return f"{self.settings.github_api_url}/user/starred", {"per_page": per_page, "page": page}

    @override
    def normal(self, job: Job) -> Result:
        """A poll: the newest POLL_PAGE stars, with the stored ETag (a 304 costs no quota). Only when all of
        them are new does it walk full pages from the newest until a star older than the marker."""
        marker = job.state_datetime("sinceLikedAt")
        etag = self.poll_etag(job)
        items, response = self.fetch(job, 1, etag=etag, per_page=POLL_PAGE)
        quota = self.quota(response)
        if items is None:  # 304: nothing new since the stored ETag
            return Result([], quota=quota)
        state: dict[str, Any] = etag_state(response)
        collected = [item for item in items if marker is None or liked_since(item, marker)]
        if marker is not None and len(collected) == len(items) and "next" in response.links:
            if quota and quota.exhausted():  # more new stars wait: keep marker and ETag, poll again later
                return Result([], quota=quota)
            collected, quota, complete = self.walk_new(job, marker)
            if not complete:
                return Result(collected, quota=quota)
        latest = newest(collected)
        if latest is not None:
            state["sinceLikedAt"] = max(latest, marker) if marker else latest
        return Result(collected, state, quota=quota)

    def walk_new(self, job: Job, marker: datetime) -> tuple[list[Item], Any, bool]:
        """Full pages from the newest until a star older than `marker`; False when stopped before reaching it
        (quota spent, or MAX_NORMAL_PAGES), so that the marker is not moved past stars not yet collected."""
        collected: list[Item] = []
        quota = None
        for page in range(1, MAX_NORMAL_PAGES + 1):
            items, response = self.fetch(job, page)
            quota = self.quota(response)
            fresh = [item for item in items or [] if liked_since(item, marker)]
            collected.extend(fresh)
            if len(fresh) < len(items or []) or "next" not in response.links:
                return collected, quota, True
            if quota and quota.exhausted():
                break
        return collected, quota, False

    @staticmethod
    def map(entry: Any) -> Item:
        repo = entry["repo"]
        owner = repo.get("owner") or {}
        return {
            "itemId": entry_id(repo["id"]),
            "source": repo["html_url"],
            "title": repo["full_name"],
            "name": repo["full_name"],  # the original collector's field for it
            "repo": repo.get("name"),
            "description": repo.get("description"),
            "authorName": owner.get("login"),
            "authorUrl": owner.get("html_url"),
            "avatarUrl": owner.get("avatar_url"),
            "created": optional_date(repo.get("created_at")),
            "likedAt": optional_date(entry.get("starred_at")),
        }


def etag_state(response: requests.Response) -> dict[str, Any]:
    """The answer's ETag to poll with next time, when it can be kept (visible ASCII, at most 1,024 characters: the
    RFC also allows other bytes, and nothing bounds its length). One that cannot is left out, and the poll after
    asks without it, rather than failing the run on a state the collector would refuse to save."""
    etag = response.headers.get("ETag")
    return {"etag": etag} if etag and keepable_header(etag) else {}


def liked_since(item: Item, marker: datetime) -> bool:
    liked = item.get("likedAt")
    return liked is not None and liked >= marker


def newest(items: list[Item]) -> datetime | None:
    """The latest star time among `items`; None when none has one (a server that left out or garbled
    `starred_at` on every entry: the items are kept, the marker stays where it was)."""
    return max((liked for item in items if (liked := item.get("likedAt")) is not None), default=None)
