"""Spotify saved tracks: GET https://api.spotify.com/v1/me/tracks?limit=50&offset=N, newest first.
Over quota: 429 with Retry-After. Tokens last an hour: refreshed with the refreshToken and SPOTIFY_CLIENT_ID /
SPOTIFY_CLIENT_SECRET."""
from __future__ import annotations

from typing import Any

from collector.errors import BadResponse
from collector.timeutil import parse_iso

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
        return Page(items, offset + len(items) if items and data.get("next") else None)

    def refresh(self, job: Job) -> dict[str, Any]:
        return self.oauth2_refresh(job, TOKEN_URL, self.settings.get("SPOTIFY_CLIENT_ID"),
                                   self.settings.get("SPOTIFY_CLIENT_SECRET"), basic_auth=True)

    @staticmethod
    def map(saved: dict) -> dict:
        track = saved["track"]
        artists = track.get("artists") or []
        images = (track.get("album") or {}).get("images") or []
        return {
            "itemId": track["id"],
            "type": "spotify",
            "source": track["external_urls"]["spotify"],
            "title": track["name"],
            "description": ", ".join(a.get("name", "") for a in artists) or None,
            "authorName": artists[0].get("name") if artists else None,
            "authorUrl": (artists[0].get("external_urls") or {}).get("spotify") if artists else None,
            "avatarUrl": images[0].get("url") if images else None,
            "likedAt": parse_iso(saved["added_at"]),
        }
