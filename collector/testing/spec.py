"""What a connector package writes for the conformance kit: a `Spec` of its service's fake API (the pages of a
numbered history in the real API's shape, its quota and revoked-token answers), and the values the kit tries
where a page says what comes next."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # the kit's "now": a spec's times (a quota's reset) count from it
Answer = tuple[int, dict, Any]  # status, headers, body (a str is sent as it is, anything else as JSON)
# next-page tokens the collector cannot keep as a cursor, and "more?" signals it cannot read (collector/sdk/paging.py)
UNKEEPABLE_TOKENS = ({"after": "x"}, ["x"], True, False, 1.5, 2**64, -1, "x" * 3000, "a\x00b")
UNREADABLE_SIGNALS = ({"more": True}, 1.5, 7, 2**64)
UNUSABLE = 7  # an entry no connector can map


class Spec:
    """A service's fake API for the kit: a history of numbered items (a larger number is newer), served in pages
    of the real API's shape."""

    service: str
    url: str  # the list endpoint, without query
    page_size: int
    network: dict = {}  # more network fields the connector needs
    settings: dict = {}  # settings (app keys) the connector needs
    refresh_url: str | None = None  # token endpoint, for services whose tokens expire
    ends_on_empty_page = False  # the service's end-of-list signal is an empty page (one more request)
    # where a page says what comes next, for specs that implement `with_next` (None: a Link header, no value)
    next_field: str | None = None
    next_values: tuple = UNKEEPABLE_TOKENS  # values there that must fail the run (UNREADABLE_SIGNALS for flags)
    refused_cursor: Any = "\ud800x"  # a token of the right type the database cannot store (a lone surrogate)

    def start(self, query: dict[str, str]) -> int:
        """Where the requested page starts in the history (default: `page` numbers from 1)."""
        return (int(query.get("page", 1)) - 1) * self.page_size

    def render(self, numbers: list[int], next_start: int | None, url: str) -> Answer:
        raise NotImplementedError

    def rate_limited(self) -> tuple[int, dict, Any, datetime]:
        """A quota answer, and when the network must come back."""
        raise NotImplementedError

    def unauthorized(self) -> Answer:
        raise NotImplementedError

    def error_answer(self, message: str) -> Answer:
        """An error answer carrying `message` where the service puts its own error text."""
        return 400, {}, {"message": message}

    def unusable_entry(self, entry: Any) -> Any:
        """An entry of the service's list that no connector can keep, in place of `entry` (default: a number);
        a spec whose paging reads something of each entry keeps that (Tumblr: the like's time)."""
        return UNUSABLE

    def with_next(self, answer: Answer, value: Any) -> Answer:
        """`answer`, a first page with more after it, with `value` where its next-page token (or its "more?"
        signal) goes. Implement it, with `next_field`, wherever the page carries one."""
        raise NotImplementedError

    def expired(self) -> Answer:
        return self.unauthorized()

    def refreshed(self) -> dict:
        """The token endpoint's answer."""
        return {
            "access_token": "new-access-token-0001",
            "refresh_token": "new-refresh-token-0001",
            "expires_in": 3600,
            "token_type": "bearer",
        }
