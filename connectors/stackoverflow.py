"""Stack Exchange favourites, API 2.3: GET /2.3/me/favorites?site=stackoverflow, newest favourite first.

The token goes in `Authorization: Bearer` (query tokens are rejected from June 2026); the app key from
STACKEXCHANGE_KEY is a query parameter, as the API requires (our messages name host and path only). The body's
`backoff` is honoured (no call to the method sooner), `quota_remaining` feeds the quota memory (the daily quota
resets at midnight UTC), and errors come as HTTP 400 with an `error_id`.
"""
from __future__ import annotations

import json
import re
import zlib
from datetime import datetime, timedelta, timezone
from typing import Any

import requests

from collector.errors import BadResponse, Quota, RateLimited, Transient, Unauthorized
from collector.htmltext import html_to_text
from collector.http import bounded_decompress, where
from collector.timeutil import after, from_epoch

from .base import Job, bearer
from .paging import Page, PagedConnector

API = "https://api.stackexchange.com/2.3"
AUTH_ERRORS = {401, 402, 403, 406}  # access_token_required/invalid/denied/compromised


class StackOverflowConnector(PagedConnector):
    name = "stackoverflow"
    required_settings = ("STACKEXCHANGE_KEY",)  # access_token calls need the app key (error 405 otherwise)

    def fetch(self, job: Job, cursor: Any) -> Page:
        page = cursor or 1
        params = {"site": "stackoverflow", "page": page, "pagesize": 100, "sort": "added", "order": "desc"}
        params["key"] = self.setting("STACKEXCHANGE_KEY")
        response = self.http.get(f"{API}/me/favorites", params=params, headers=bearer(job))
        body = self.body(response)
        self.check_body(job, response, body)
        items = self.map_entries(body.get("items"), self.map)
        backoff = body.get("backoff")
        wait = after(job.now, backoff) if isinstance(backoff, int) and not isinstance(backoff, bool) else None
        quota = None
        if isinstance(body.get("quota_remaining"), int):
            quota = Quota(body["quota_remaining"], body.get("quota_max"), next_utc_midnight(job.now))
        return Page(items, page + 1 if body.get("has_more") else None, quota, wait)

    def body(self, response: requests.Response) -> dict:
        """JSON, decompressed even when a proxy dropped Content-Encoding."""
        raw = response.content
        try:
            if raw[:2] == b"\x1f\x8b":
                raw = bounded_decompress(raw, self.http.max_bytes, 16 + zlib.MAX_WBITS)
            elif raw[:1] == b"\x78":
                raw = bounded_decompress(raw, self.http.max_bytes, zlib.MAX_WBITS)
            body = json.loads(raw)
        except (OSError, zlib.error, ValueError, RecursionError):
            raise BadResponse(f"{response.status_code} body is not JSON: GET {where(response.url)}",
                              response.status_code) from None
        if not isinstance(body, dict):
            raise BadResponse(f"expected a JSON object, got {type(body).__name__}", response.status_code)
        return body

    def check_body(self, job: Job, response: requests.Response, body: dict) -> None:
        status, error_id = response.status_code, body.get("error_id")
        if status < 400 and error_id is None:
            return
        message = f"{status} {body.get('error_name') or 'error'} {error_id}: " \
                  f"{str(body.get('error_message') or '')[:200]}"
        if error_id in AUTH_ERRORS:
            raise Unauthorized(message, status)
        if error_id == 502:  # throttle_violation: "... more requests available in N seconds"
            match = re.search(r"available in (\d+) seconds", str(body.get("error_message", "")))
            raise RateLimited(message, after(job.now, int(match.group(1)[:12]) if match else 60), status)
        if error_id == 503 or status >= 500:
            raise Transient(message, status)
        raise BadResponse(message, status)

    @staticmethod
    def map(question: dict) -> dict:
        owner = question.get("owner") or {}
        title = html_to_text(question["title"])
        return {
            "itemId": str(question["question_id"]),
            "type": "stackoverflow",
            "source": question.get("link") or f"https://stackoverflow.com/questions/{question['question_id']}",
            "title": title,
            "description": title,  # where the original collector kept the title
            "tags": [t for t in question.get("tags") or [] if isinstance(t, str)][:20],
            "authorName": html_to_text(owner.get("display_name")),
            "authorUrl": owner.get("link"),
            "avatarUrl": owner.get("profile_image"),
            "created": from_epoch(question["creation_date"]),
        }


def next_utc_midnight(now: datetime) -> datetime:
    return datetime(now.year, now.month, now.day, tzinfo=timezone.utc) + timedelta(days=1)
