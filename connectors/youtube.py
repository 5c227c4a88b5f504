"""YouTube liked videos, Data API v3: GET /youtube/v3/videos?myRating=like&part=snippet, `pageToken` paging.

No rate-limit headers: the daily quota (10,000 units) answers 403 `quotaExceeded` and resets at midnight
Pacific time. Access tokens last an hour: an expired one is refreshed with the refreshToken and
YOUTUBE_CLIENT_ID / YOUTUBE_CLIENT_SECRET.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import requests

from collector.errors import BadResponse, RateLimited
from collector.http import where
from collector.timeutil import as_utc, parse_iso

from .base import Job, bearer
from .paging import Page, PagedConnector

API = "https://www.googleapis.com/youtube/v3"
TOKEN_URL = "https://oauth2.googleapis.com/token"
PACIFIC = ZoneInfo("America/Los_Angeles")


class YouTubeConnector(PagedConnector):
    name = "youtube"
    refreshable = True

    def fetch(self, job: Job, cursor: Any) -> Page:
        params: dict[str, Any] = {"myRating": "like", "part": "snippet", "maxResults": 50}
        if cursor:
            params["pageToken"] = cursor
        data, _ = self.get_json(job, f"{API}/videos", params=params, headers=bearer(job))
        if not isinstance(data, dict):
            raise BadResponse("youtube: expected a videoListResponse")
        items = self.map_entries(data.get("items"), self.map)
        return Page(items, data.get("nextPageToken") or None)

    def check(self, job: Job, response: requests.Response) -> None:
        if response.status_code == 403 and "quotaExceeded" in _reasons(response):
            raise RateLimited(f"403 quotaExceeded: GET {where(response.url)}", next_pacific_midnight(job.now), 403)
        super().check(job, response)

    def refresh(self, job: Job) -> dict[str, Any]:
        return self.oauth2_refresh(job, TOKEN_URL, self.settings.get("YOUTUBE_CLIENT_ID"),
                                   self.settings.get("YOUTUBE_CLIENT_SECRET"))

    @staticmethod
    def map(video: dict) -> dict:
        snippet = video["snippet"]
        thumbnails = snippet.get("thumbnails") or {}
        thumbnail = next((thumbnails[size]["url"] for size in ("high", "medium", "default")
                          if isinstance(thumbnails.get(size), dict) and thumbnails[size].get("url")), None)
        return {
            "itemId": video["id"],
            "type": "youtube",
            "source": f"https://www.youtube.com/watch?v={video['id']}",
            "title": snippet["title"],
            "description": snippet.get("description"),
            "authorName": snippet.get("channelTitle"),
            "authorUrl": f"https://www.youtube.com/channel/{snippet['channelId']}" if snippet.get("channelId")
            else None,
            "thumbnailUrl": thumbnail,  # the video's picture, not the author's avatar (not in this answer)
            "thumbnail": thumbnail,  # the original collector's name for it
            "created": parse_iso(snippet["publishedAt"]),
        }


def _reasons(response: requests.Response) -> list[str]:
    try:
        errors = response.json()["error"]["errors"]
        return [str(e.get("reason")) for e in errors]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def next_pacific_midnight(now: datetime) -> datetime:
    local = now.astimezone(PACIFIC)
    midnight = datetime(local.year, local.month, local.day, tzinfo=PACIFIC) + timedelta(days=1)
    return as_utc(midnight)
