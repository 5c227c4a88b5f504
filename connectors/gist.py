"""GitHub starred gists: GET {GITHUB_API_URL}/gists/starred (same token, limits and base URL as GitHub stars).
There is no star time: items carry the gist's creation time.

Stored as the original likeastore collector stored them, so an existing database gets no duplicates and the web
app shows them where it always did: `type: 'github'`, `gist: true`, `repo: 'gist'`, itemId the gist id."""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from collector.sdk import Item, Job, PagedConnector, PageNumber, entry_id, link_next, optional_date

from .github import PER_PAGE, GitHubAPI


class GistConnector(GitHubAPI, PagedConnector):
    name = "gist"
    item_type = "github"
    paging = PageNumber(link_next, size=PER_PAGE)

    @override
    def url(self, job: Job) -> str:
        return f"{self.settings.github_api_url}/gists/starred"

    @override
    def map(self, gist: Any) -> Item:
        owner = gist.get("owner") or gist.get("user") or {}  # `user` in older answers
        files = list((gist.get("files") or {}).keys())
        return {
            "itemId": entry_id(gist["id"]),
            "gist": True,
            "repo": "gist",
            "source": gist["html_url"],
            "title": gist.get("description") or (files[0] if files else str(gist["id"])),
            "description": gist.get("description"),
            "authorName": owner.get("login"),
            "authorUrl": owner.get("html_url"),
            "avatarUrl": owner.get("avatar_url"),
            "created": optional_date(gist.get("created_at")),
        }
