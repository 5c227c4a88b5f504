"""GitHub starred gists: GET {GITHUB_API_URL}/gists/starred (same token, limits and base URL as GitHub stars).
There is no star time: items carry the gist's creation time.

Stored as the original likeastore collector stored them, so an existing database gets no duplicates and the web
app shows them where it always did: `type: 'github'`, `gist: true`, `repo: 'gist'`, itemId the gist id."""
from __future__ import annotations

from typing import Any

from collector.timeutil import parse_iso

from .base import Job
from .github import PER_PAGE, GitHubAPI
from .paging import Page, PagedConnector


class GistConnector(GitHubAPI, PagedConnector):
    name = "gist"
    item_type = "github"

    def fetch(self, job: Job, cursor: Any) -> Page:
        page = cursor or 1
        data, response = self.get_json(job, f"{self.settings.github_api_url}/gists/starred",
                                       params={"per_page": PER_PAGE, "page": page}, headers=self.headers(job))
        items = self.map_entries(data, self.map)
        return Page(items, page + 1 if "next" in response.links else None, self.quota(response))

    @staticmethod
    def map(gist: Any) -> dict:
        owner = gist.get("owner") or gist.get("user") or {}  # `user` in older answers
        files = list((gist.get("files") or {}).keys())
        return {
            "itemId": str(gist["id"]),
            "type": "github",
            "gist": True,
            "repo": "gist",
            "source": gist["html_url"],
            "title": gist.get("description") or (files[0] if files else str(gist["id"])),
            "description": gist.get("description"),
            "authorName": owner.get("login"),
            "authorUrl": owner.get("html_url"),
            "avatarUrl": owner.get("avatar_url"),
            "created": parse_iso(gist["created_at"]),
        }
