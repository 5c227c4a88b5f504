"""Stack Exchange favourites, API 2.3: GET /2.3/me/favorites?site=stackoverflow, newest favourite first.

The token goes in `Authorization: Bearer` (query tokens are rejected from June 2026); the app key from
STACKEXCHANGE_KEY is a query parameter, as the API requires (our messages name host and path only). Bodies are
decoded even when a proxy dropped Content-Encoding; the body's `backoff` is honoured (no call to the method
sooner), `quota_remaining` feeds the quota memory (the daily quota resets at midnight UTC), and errors come as
HTTP 400 with an `error_id`.
"""

from __future__ import annotations

import json
import re
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from typing_extensions import override

from collector.sdk import (
    BadResponse,
    Bearer,
    Item,
    Job,
    PagedConnector,
    PageNumber,
    Quota,
    RateLimited,
    Transient,
    Unauthorized,
    WhoAmI,
    WithAppKey,
    after,
    body_true,
    bounded_decompress,
    clip,
    entry_id,
    html_to_text,
    optional_epoch,
    where,
)

AUTH_ERRORS = {401, 402, 403, 406}  # access_token_required/invalid/denied/compromised


class StackOverflowConnector(PagedConnector):
    name = "stackoverflow"
    required_settings = ("STACKEXCHANGE_KEY",)  # access_token calls need the app key (error 405 otherwise)
    authentication = WithAppKey(Bearer(), "key", "STACKEXCHANGE_KEY")
    rate_limit = None  # the quota is in the body
    endpoint = "https://api.stackexchange.com/2.3/me/favorites"
    # /me on the site: the user's id and display name there
    whoami = WhoAmI(
        "https://api.stackexchange.com/2.3/me",
        ("items", "0", "user_id"),
        (("items", "0", "display_name"),),
        params={"site": "stackoverflow"},
    )
    query = {"site": "stackoverflow", "sort": "added", "order": "desc"}
    paging = PageNumber(body_true("has_more"), size=100, size_param="pagesize")
    entries = ("items",)

    @override
    def parse_json(self, job: Job, response: requests.Response) -> tuple[Any, requests.Response]:
        raw = response.content
        try:
            if raw[:2] == b"\x1f\x8b":
                raw = bounded_decompress(raw, self.http.max_bytes, 16 + zlib.MAX_WBITS)
            elif raw[:1] == b"\x78":
                raw = bounded_decompress(raw, self.http.max_bytes, zlib.MAX_WBITS)
            self.refuse_dense(raw, response)
            body = json.loads(raw)
        except (OSError, zlib.error, ValueError, RecursionError):
            raise BadResponse(
                f"{response.status_code} body is not JSON: GET {where(response.url)}", response.status_code
            ) from None
        if not isinstance(body, dict):
            raise BadResponse(f"expected a JSON object, got {type(body).__name__}", response.status_code)
        self.check_error(job, response, body)
        return body, response

    def check_error(self, job: Job, response: requests.Response, body: dict) -> None:
        status, error_id = response.status_code, body.get("error_id")
        if status < 400 and error_id is None:
            return
        name, text = clip(body.get("error_name") or "error", 60), clip(body.get("error_message") or "", 200)
        message = f"{status} {name} {clip(error_id, 20)}: {text}"
        if error_id in AUTH_ERRORS:
            raise Unauthorized(message, status)
        if error_id == 502:  # throttle_violation: "... more requests available in N seconds"
            match = re.search(r"available in (\d+) seconds", str(body.get("error_message", "")))
            raise RateLimited(message, after(job.now, int(match.group(1)[:12]) if match else 60), status)
        if error_id == 503 or status >= 500:
            raise Transient(message, status)
        raise BadResponse(message, status)

    @override
    def page_quota(self, job: Job, response: requests.Response, body: Any) -> Quota | None:
        remaining = body.get("quota_remaining")
        if not isinstance(remaining, int) or isinstance(remaining, bool):
            return None
        limit = body.get("quota_max")
        return Quota(remaining, limit if isinstance(limit, int) else None, next_utc_midnight(job.now))

    @override
    def wait_until(self, job: Job, body: Any) -> datetime | None:
        backoff = body.get("backoff")
        return after(job.now, backoff) if isinstance(backoff, int) and not isinstance(backoff, bool) else None

    @override
    def map(self, question: Any) -> Item:
        owner = question.get("owner") or {}
        title = html_to_text(question["title"])
        return {
            "itemId": entry_id(question["question_id"]),
            "source": question.get("link") or f"https://stackoverflow.com/questions/{question['question_id']}",
            "title": title,
            "description": title,  # where the original collector kept the title
            "tags": [t for t in question.get("tags") or [] if isinstance(t, str)][:20],
            "authorName": html_to_text(owner.get("display_name")),
            "authorUrl": owner.get("link"),
            "avatarUrl": owner.get("profile_image"),
            "created": optional_epoch(question.get("creation_date")),
        }


def next_utc_midnight(now: datetime) -> datetime:
    return datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
