"""Paged services: a connector declares its URL, its paging strategy and where the entries are, and writes `map`;
the walk is shared.

initial: one page per run, newest first; the position is kept in the network's `cursor` (a page number, a
         token or an id: never a URL, which may carry credentials). The history is complete when the service's
         own end-of-list signal says so (the strategy's `next` gives None) or the cursor stops moving; an empty
         page that still carries a next cursor (Facebook documents them) does not end the walk.
normal:  from the newest page until an item seen before shows up; `seenIds` keeps the newest item ids.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import takewhile
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import requests

from .connector import Connector, Job, Result, dig
from .errors import Quota
from .items import Item

SEEN_KEPT = 20
More = Callable[[Any, requests.Response], bool]


@dataclass
class Page:
    items: list[Item]
    next: Any = None  # cursor of the next (older) page; None at the end of the history
    quota: Quota | None = None
    wait_until: datetime | None = None


# --- "is there more?" signals, for page-number and offset paging -------------------------------------------------
def link_next(body: Any, response: requests.Response) -> bool:
    """A `Link: <…>; rel="next"` header."""
    return "next" in response.links


def body_true(*path: str) -> More:
    """A truthy value at `path` in the body (`has_more`, `next`, `paging.next`)."""
    return lambda body, response: bool(dig(body, path))


# --- strategies ----------------------------------------------------------------------------------------------------
class Paging:
    """How a cursor goes into a request, and how the next one comes out of an answer."""

    def params(self, cursor: Any) -> dict[str, Any]:
        raise NotImplementedError

    def next(self, cursor: Any, body: Any, response: requests.Response, items: list[Item]) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class PageNumber(Paging):
    """page=1, 2, … with a page size, while `more` says there is more."""

    more: More
    size: int = 100
    param: str = "page"
    size_param: str | None = "per_page"

    def params(self, cursor: Any) -> dict[str, Any]:
        params: dict[str, Any] = {self.param: cursor or 1}
        if self.size_param:
            params[self.size_param] = self.size
        return params

    def next(self, cursor: Any, body: Any, response: requests.Response, items: list[Item]) -> Any:
        return (cursor or 1) + 1 if self.more(body, response) else None


@dataclass(frozen=True)
class Offset(Paging):
    """offset=0, size, 2·size, … while `more` says there is more."""

    more: More
    size: int = 50
    param: str = "offset"
    size_param: str = "limit"

    def params(self, cursor: Any) -> dict[str, Any]:
        return {self.size_param: self.size, self.param: cursor or 0}

    def next(self, cursor: Any, body: Any, response: requests.Response, items: list[Item]) -> Any:
        return (cursor or 0) + self.size if self.more(body, response) else None


@dataclass(frozen=True)
class BodyCursor(Paging):
    """An opaque cursor from the body (`after`, `cursor`, `next_token`, `nextPageToken`) sent back as `param`.
    `when`: the cursor counts only if this other path is truthy too (Facebook: `paging.next`);
    `stop_on_empty`: an empty page is the end whatever the cursor (Bluesky documents it)."""

    param: str
    path: tuple[str, ...]
    size: int | None = None
    size_param: str | None = None
    when: tuple[str, ...] | None = None
    stop_on_empty: bool = False

    def params(self, cursor: Any) -> dict[str, Any]:
        return cursor_params(cursor, self.param, self.size, self.size_param)

    def next(self, cursor: Any, body: Any, response: requests.Response, items: list[Item]) -> Any:
        if self.stop_on_empty and not items:
            return None
        if self.when is not None and not dig(body, self.when):
            return None
        value = dig(body, self.path)
        return value if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "" else None


@dataclass(frozen=True)
class LinkCursor(Paging):
    """The value of `param` in the URL of the `Link: rel="next"` header (Mastodon's max_id: the ids are internal,
    never derived from the body)."""

    param: str = "max_id"
    size: int | None = None
    size_param: str | None = "limit"

    def params(self, cursor: Any) -> dict[str, Any]:
        return cursor_params(cursor, self.param, self.size, self.size_param)

    def next(self, cursor: Any, body: Any, response: requests.Response, items: list[Item]) -> Any:
        url = response.links.get("next", {}).get("url")
        if not url:
            return None
        values = parse_qs(urlsplit(url).query).get(self.param)
        return values[0] if values else None


def cursor_params(cursor: Any, param: str, size: int | None, size_param: str | None) -> dict[str, Any]:
    """The page size (if any) and the cursor (if not the first page) as query parameters."""
    params: dict[str, Any] = {}
    if size_param and size:
        params[size_param] = size
    if cursor:
        params[param] = cursor
    return params


class PagedConnector(Connector):
    """A service whose likes come in pages: declare `endpoint`, `paging`, `entries` (where the list is in the
    body; empty for a body that is the list) and `query` (fixed parameters), and write `map`."""

    endpoint: ClassVar[str] = ""
    paging: ClassVar[Paging]
    entries: ClassVar[tuple[str, ...]] = ()
    entries_optional: ClassVar[bool] = False  # an answer without the list is an empty page (X's last page)
    query: ClassVar[Mapping[str, Any]] = {}
    max_normal_pages: ClassVar[int] = 5

    @abstractmethod
    def map(self, entry: Any) -> Item:
        """One entry of the API's list as an item (raise KeyError/TypeError/… for one that cannot be read)."""

    def url(self, job: Job) -> str:
        """The list's URL; override for one built from the network or the settings."""
        return self.endpoint

    def params(self, job: Job) -> dict[str, Any]:
        """The query besides the paging; override for one built from the network."""
        return dict(self.query)

    def read_page(self, body: Any) -> None:
        """Look at the whole answer before its entries are mapped (X's `includes.users`)."""

    def page_quota(self, job: Job, response: requests.Response, body: Any) -> Quota | None:
        """The rate-limit facts of a page: its headers by `rate_limit`; override for quotas sent in the body."""
        return self.quota(response, job.now)

    def check_body(self, job: Job, response: requests.Response, body: Any) -> None:
        """Errors some APIs send with a 200 (Flickr's `stat: fail`): raise the typed error they mean."""

    def wait_until(self, job: Job, body: Any) -> datetime | None:
        """A pause the API asked for in its body (Stack Exchange's `backoff`)."""
        return None

    def fetch(self, job: Job, cursor: Any) -> Page:
        """One page: `cursor` None is the newest page."""
        body, response = self.get_json(job, self.url(job), params={**self.params(job), **self.paging.params(cursor)})
        self.check_body(job, response, body)
        self.read_page(body)
        entries = dig(body, self.entries) if self.entries else body
        if entries is None and self.entries_optional and isinstance(body, dict):
            entries = []
        items = self.map_entries(entries, self.map)
        return Page(
            items,
            self.paging.next(cursor, body, response, items),
            self.page_quota(job, response, body),
            self.wait_until(job, body),
        )

    def initial(self, job: Job) -> Result:
        cursor = job.network.get("cursor")
        page = self.fetch(job, cursor)
        state: dict[str, Any] = {"cursor": page.next}
        if page.items and not job.network.get("seenIds"):  # the newest items: the first page that had any
            state["seenIds"] = ids(page.items)
        done = page.next is None or page.next == cursor
        return Result(page.items, state, done=done, quota=page.quota, wait_until=page.wait_until)

    def normal(self, job: Job) -> Result:
        seen = set(job.network.get("seenIds") or [])
        collected: list[Item] = []
        newest: list[str] = []
        cursor: Any = None
        page = Page([])
        for number in range(self.max_normal_pages):
            page = self.fetch(job, cursor)
            if number == 0:
                newest = ids(page.items)
            fresh = list(takewhile(lambda item: item["itemId"] not in seen, page.items))
            collected.extend(fresh)
            if not seen or len(fresh) < len(page.items) or page.next is None:
                break  # reached items seen before, or the end
            if page.quota and page.quota.exhausted():  # more new items wait: keep seenIds, walk again
                return Result(collected, quota=page.quota, wait_until=page.wait_until)
            cursor = page.next
        state = {"seenIds": newest} if newest else {}
        return Result(collected, state, quota=page.quota, wait_until=page.wait_until)


def ids(items: list[Item]) -> list[str]:
    return [item["itemId"] for item in items[:SEEN_KEPT] if isinstance(item.get("itemId"), str)]
