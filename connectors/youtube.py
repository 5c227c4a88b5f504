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
from typing_extensions import override

from collector.sdk import (
    BodyCursor,
    Item,
    Job,
    OAuth2Refresh,
    PagedConnector,
    RateLimited,
    WhoAmI,
    as_utc,
    entry_id,
    error_json,
    optional_date,
    where,
)

PACIFIC = ZoneInfo("America/Los_Angeles")


class YouTubeConnector(PagedConnector):
    name = "youtube"
    token_refresh = OAuth2Refresh("https://oauth2.googleapis.com/token", "YOUTUBE_CLIENT_ID", "YOUTUBE_CLIENT_SECRET")
    # channels.list mine=true: the token's channel (1 unit of the daily quota)
    whoami = WhoAmI(
        "https://www.googleapis.com/youtube/v3/channels",
        ("items", "0", "id"),
        (("items", "0", "snippet", "title"),),
        params={"part": "snippet", "mine": "true"},
    )
    rate_limit = None
    endpoint = "https://www.googleapis.com/youtube/v3/videos"
    query = {"myRating": "like", "part": "snippet"}
    paging = BodyCursor("pageToken", ("nextPageToken",), size=50, size_param="maxResults")
    entries = ("items",)

    @override
    def check(self, job: Job, response: requests.Response) -> None:
        if response.status_code == 403 and "quotaExceeded" in _reasons(response):
            raise RateLimited(f"403 quotaExceeded: GET {where(response.url)}", next_pacific_midnight(job.now), 403)
        super().check(job, response)

    @override
    def map(self, video: Any) -> Item:
        snippet = video["snippet"]
        thumbnails = snippet.get("thumbnails") or {}
        thumbnail = next(
            (
                thumbnails[size]["url"]
                for size in ("high", "medium", "default")
                if isinstance(thumbnails.get(size), dict) and thumbnails[size].get("url")
            ),
            None,
        )
        channel = snippet.get("channelId")
        return {
            "itemId": entry_id(video["id"]),
            "source": f"https://www.youtube.com/watch?v={video['id']}",
            "title": snippet["title"],
            "description": snippet.get("description"),
            "authorName": snippet.get("channelTitle"),
            "authorUrl": f"https://www.youtube.com/channel/{channel}" if channel else None,
            "thumbnailUrl": thumbnail,  # the video's picture; no author avatar in this answer
            "thumbnail": thumbnail,  # the original collector's name for it
            "created": optional_date(snippet.get("publishedAt")),
        }


def _reasons(response: requests.Response) -> list[str]:
    try:
        errors = error_json(response)["error"]["errors"]
        return [str(e.get("reason")) for e in errors]
    except (KeyError, TypeError, AttributeError):
        return []


def next_pacific_midnight(now: datetime) -> datetime:
    local = now.astimezone(PACIFIC)
    midnight = datetime(local.year, local.month, local.day, tzinfo=PACIFIC) + timedelta(days=1)
    return as_utc(midnight)
