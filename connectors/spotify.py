"""Spotify saved tracks: GET https://api.spotify.com/v1/me/tracks?limit=50&offset=N, newest first.
Over quota: 429 with Retry-After. Tokens last an hour: refreshed with the refreshToken and SPOTIFY_CLIENT_ID /
SPOTIFY_CLIENT_SECRET."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from collector.errors import BadResponse
from collector.timeutil import UTC, parse_iso

from .base import Job, bearer
from .paging import Page, PagedConnector

API = "https://api.spotify.com/v1"
TOKEN_URL = "https://accounts.spotify.com/api/token"
LIMIT = 50


class SpotifyConnector(PagedConnector):
    name = "spotify"
    refreshable = True

    def fetch(self, job: Job, cursor: Any) -> Page:
        offset = cursor or 0
        data, _ = self.get_json(job, f"{API}/me/tracks", params={"limit": LIMIT, "offset": offset},
                                headers=bearer(job))
        if not isinstance(data, dict):
            raise BadResponse("spotify: expected a paging object")
        items = self.map_entries(data.get("items"), self.map)
        return Page(items, offset + LIMIT if data.get("next") else None)  # `next` null: the end

    def refresh(self, job: Job) -> dict[str, Any]:
        return self.oauth2_refresh(job, TOKEN_URL, self.settings.get("SPOTIFY_CLIENT_ID"),
                                   self.settings.get("SPOTIFY_CLIENT_SECRET"), basic_auth=True)

    @staticmethod
    def map(saved: dict) -> dict:
        track = saved["track"]
        artists = track.get("artists") or []
        album = track.get("album") or {}
        images = album.get("images") or []
        return {
            "itemId": track["id"],
            "type": "spotify",
            "source": track["external_urls"]["spotify"],
            "title": track["name"],
            "description": ", ".join(a.get("name", "") for a in artists) or None,
            "authorName": artists[0].get("name") if artists else None,
            "authorUrl": (artists[0].get("external_urls") or {}).get("spotify") if artists else None,
            "thumbnailUrl": images[0].get("url") if images else None,  # the album cover
            "thumbnail": images[0].get("url") if images else None,
            "created": release_date(album.get("release_date")),
            "likedAt": parse_iso(saved["added_at"]),
        }


def release_date(value: Any) -> datetime | None:
    """An album's release date at its precision: '2023-01-20', '2023-01' or '2023'."""
    if not isinstance(value, str):
        return None
    parts = value.split("-")
    try:
        numbers = [int(p) for p in parts[:3]] + [1] * (3 - min(len(parts), 3))
        return datetime(numbers[0], numbers[1], numbers[2], tzinfo=UTC)
    except (ValueError, IndexError):
        return None
