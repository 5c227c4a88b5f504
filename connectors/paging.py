"""The page walk most services share, so a connector only says how to fetch one page and map its items.

initial: one page per run, newest first; the position is kept in the network's `cursor` (a page number, a
         token or an id: never a URL, which may carry credentials). The history is complete when the service's
         own end-of-list signal says so (`Page.next` is None) or the cursor stops moving; an empty page that
         carries a next cursor (Facebook documents them) does not end the walk.
normal:  from the newest page until an item seen before shows up; `seenIds` keeps the newest item ids.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import takewhile
from typing import Any, ClassVar

from collector.errors import Quota

from .base import Connector, Job, Result

SEEN_KEPT = 20


@dataclass
class Page:
    items: list[dict]
    next: Any = None  # cursor of the next (older) page; None at the end of the history
    quota: Quota | None = None
    wait_until: datetime | None = None


class PagedConnector(Connector):
    max_normal_pages: ClassVar[int] = 5

    def fetch(self, job: Job, cursor: Any) -> Page:  # pragma: no cover - abstract
        """One page: `cursor` None is the newest page."""
        raise NotImplementedError

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
        collected: list[dict] = []
        newest: list[str] = []
        cursor, page = None, None
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


def ids(items: list[dict]) -> list[str]:
    return [item["itemId"] for item in items[:SEEN_KEPT] if isinstance(item.get("itemId"), str)]
