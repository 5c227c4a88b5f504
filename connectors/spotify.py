"""Spotify saved tracks: GET https://api.spotify.com/v1/me/tracks?limit=50&offset=N, newest first.
Over quota: 429 with Retry-After. Tokens last an hour: refreshed with the refreshToken and SPOTIFY_CLIENT_ID /
SPOTIFY_CLIENT_SECRET."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from typing_extensions import override

from collector.sdk import (
    UTC,
    Item,
    OAuth2Refresh,
    Offset,
    PagedConnector,
    WhoAmI,
    body_true,
    entry_id,
    optional_date,
)


class SpotifyConnector(PagedConnector):
    name = "spotify"
    whoami = WhoAmI("https://api.spotify.com/v1/me", ("id",), (("display_name",),))
    token_refresh = OAuth2Refresh(
        "https://accounts.spotify.com/api/token", "SPOTIFY_CLIENT_ID", "SPOTIFY_CLIENT_SECRET", basic_auth=True
    )
    rate_limit = None
    endpoint = "https://api.spotify.com/v1/me/tracks"
    paging = Offset(body_true("next"), size=50)  # `next` null: the end
    entries = ("items",)

    @override
    def map(self, saved: Any) -> Item:
        track = saved["track"]
        artists = track.get("artists") or []
        album = track.get("album") or {}
        images = album.get("images") or []
        cover = images[0].get("url") if images else None
        return {
            "itemId": entry_id(track["id"]),
            "source": track["external_urls"]["spotify"],
            "title": track["name"],
            "description": ", ".join(a.get("name", "") for a in artists) or None,
            "authorName": artists[0].get("name") if artists else None,
            "authorUrl": (artists[0].get("external_urls") or {}).get("spotify") if artists else None,
            "thumbnailUrl": cover,  # the album cover
            "thumbnail": cover,
            "created": release_date(album.get("release_date")),
            "likedAt": optional_date(saved.get("added_at")),
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
