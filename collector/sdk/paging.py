"""Paged services: a connector declares its URL, its paging strategy and where the entries are, and writes `map`;
the walk is shared.

initial: one page per run, newest first; the position is kept in the network's `cursor` (a page number, a
         token or an id: never a URL, which may carry credentials).
normal:  from the newest page until an item seen before shows up; `seenIds` keeps the newest item ids.

The end of the list, one rule for every strategy (and for a connector's own `Paging`):
- Only the service's own end-of-list signal ends the walk: no next-page token (absent, null or ""), a "more?"
  signal that says no, or, where the service documents it (`stop_on_empty`), a page without entries.
- A next-page token must be one the collector can keep as the cursor (a string of at most 2,048 characters, or
  a whole number from 0 to 2^53). Anything else — an object, a list, a boolean, a float, a number beyond that —
  is `BadResponse` naming the field, never the end: the run fails and the walk stays where it was. So is a
  "more?" signal that is neither a boolean, a link (a string), a list of entries nor null, and a token equal to
  the one sent (the walk would not move).
- Entries never end a walk and never fail a page: an entry the collector cannot keep is skipped and counted
  (`skippedItems`), one of a page or all of it. A page whose entries are all unusable is a page like another:
  the last one ends the walk normally, any other leads on to the next.
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
from .errors import BadResponse, Quota
from .items import Item
from .validate import cursor_problem, kind_of

SEEN_KEPT = 20
More = Callable[[Any, requests.Response], bool]


@dataclass
class Page:
    items: list[Item]
    next: Any = None  # cursor of the next (older) page; None at the end of the history
    quota: Quota | None = None
    wait_until: datetime | None = None


# --- reading the end-of-list signals strictly ----------------------------------------------------------------------
def at(body: Any, path: tuple[str, ...]) -> Any:
    """The value at `path`; None where a step is absent or null; BadResponse where a step is there but is not an
    object (a signal the page garbles is an error, not the end)."""
    for depth, key in enumerate(path):
        if body is None:
            return None
        if not isinstance(body, dict):
            where = ".".join(path[:depth]) or "the body"
            raise BadResponse(f"{where} is {kind_of(body)}, not an object: cannot read {'.'.join(path)}")
        body = body.get(key)
    return body


def next_token(value: Any, field: str) -> Any:
    """A next-page token as the cursor keeps it: None at the end (absent, null, ""); BadResponse naming `field`
    for one the collector cannot keep."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    problem = cursor_problem(value)
    if problem is not None:
        raise BadResponse(f"next-page token {field} is {kind_of(value)}: the cursor must be {problem}")
    return value


def more_signal(value: Any, field: str) -> bool:
    """A "more?" signal: a boolean, a link that is there (a string) or not (null, absent), or a list of entries
    (more while a page has any); BadResponse naming `field` for anything else."""
    if value is None or isinstance(value, (bool, list)):
        return bool(value)
    if isinstance(value, str):
        return value != ""
    raise BadResponse(f"{field} is {kind_of(value)}, not a boolean, a link or null: cannot tell whether more follows")


def whole_number(value: Any, field: str) -> int:
    """A count or page number a service sends as a JSON number or as digits (Flickr does both)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    raise BadResponse(f"{field} is {kind_of(value)}, not a whole number")


# --- "is there more?" signals, for page-number and offset paging -------------------------------------------------
def link_next(body: Any, response: requests.Response) -> bool:
    """A `Link: <…>; rel="next"` header."""
    return "next" in response.links


def body_true(*path: str) -> More:
    """A boolean or a link at `path` in the body (`has_more`, `next`, `paging.next`); null or absent: no more."""
    field = ".".join(path)
    return lambda body, response: more_signal(at(body, path), field)


# --- strategies ----------------------------------------------------------------------------------------------------
class Paging:
    """How a cursor goes into a request, and how the next one comes out of an answer."""

    def params(self, cursor: Any) -> dict[str, Any]:
        raise NotImplementedError

    def next(self, cursor: Any, body: Any, response: requests.Response, entries: list) -> Any:
        """The next page's cursor, None at the end. `entries`: the page's entries as the API sent them (mapped or
        not: whether a page was empty is the service's fact, not the collector's)."""
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

    def next(self, cursor: Any, body: Any, response: requests.Response, entries: list) -> Any:
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

    def next(self, cursor: Any, body: Any, response: requests.Response, entries: list) -> Any:
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

    def next(self, cursor: Any, body: Any, response: requests.Response, entries: list) -> Any:
        if self.stop_on_empty and not entries:
            return None
        if self.when is not None and not more_signal(at(body, self.when), ".".join(self.when)):
            return None
        return next_token(at(body, self.path), ".".join(self.path))


@dataclass(frozen=True)
class LinkCursor(Paging):
    """The value of `param` in the URL of the `Link: rel="next"` header (Mastodon's max_id: the ids are internal,
    never derived from the body)."""

    param: str = "max_id"
    size: int | None = None
    size_param: str | None = "limit"

    def params(self, cursor: Any) -> dict[str, Any]:
        return cursor_params(cursor, self.param, self.size, self.size_param)

    def next(self, cursor: Any, body: Any, response: requests.Response, entries: list) -> Any:
        url = response.links.get("next", {}).get("url")
        if not url:
            return None
        field = f'{self.param} of the Link rel="next" URL'
        values = parse_qs(urlsplit(url).query).get(self.param)
        if not values:
            raise BadResponse(f'the Link rel="next" URL has no {self.param}: cannot page on')
        return next_token(values[0], field)


def cursor_params(cursor: Any, param: str, size: int | None, size_param: str | None) -> dict[str, Any]:
    """The page size (if any) and the cursor (if not the first page) as query parameters."""
    params: dict[str, Any] = {}
    if size_param and size:
        params[size_param] = size
    if cursor is not None and cursor != "":  # a token of 0 is a token (the first page has none)
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
            self.paging.next(cursor, body, response, entries),
            self.page_quota(job, response, body),
            self.wait_until(job, body),
        )

    def initial(self, job: Job) -> Result:
        cursor = job.network.get("cursor")
        page = self.fetch(job, cursor)
        if page.next is not None and page.next == cursor:
            raise BadResponse(f"{self.name}: the next-page token is the one just sent ({kind_of(cursor)}): no progress")
        state: dict[str, Any] = {"cursor": page.next}
        if page.items and not job.network.get("seenIds"):  # the newest items: the first page that had any
            state["seenIds"] = ids(page.items)
        return Result(page.items, state, done=page.next is None, quota=page.quota, wait_until=page.wait_until)

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
