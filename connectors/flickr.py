"""Flickr favourites: flickr.favorites.getList, signed with OAuth 1.0a (requests-oauthlib; FLICKR_API_KEY and
FLICKR_API_SECRET, the network's accessToken and accessTokenSecret). Errors come with HTTP 200 and
`{"stat": "fail", "code": N}`; there are no rate-limit headers."""
from __future__ import annotations

from typing import Any

import requests
from requests_oauthlib import OAuth1

from collector.errors import BadResponse, Transient, Unauthorized
from collector.htmltext import html_to_text
from collector.http import where
from collector.timeutil import from_epoch

from .base import Job
from .paging import Page, PagedConnector

API = "https://api.flickr.com/services/rest/"
EXTRAS = "description,owner_name,icon_server,date_upload,url_m"


class FlickrConnector(PagedConnector):
    name = "flickr"
    required_fields = ("accessToken", "accessTokenSecret")
    required_settings = ("FLICKR_API_KEY", "FLICKR_API_SECRET")

    def fetch(self, job: Job, cursor: Any) -> Page:
        page = cursor or 1
        params = {"method": "flickr.favorites.getList", "format": "json", "nojsoncallback": 1,
                  "extras": EXTRAS, "per_page": 100, "page": page}
        auth = OAuth1(self.setting("FLICKR_API_KEY"), self.setting("FLICKR_API_SECRET"),
                      resource_owner_key=job.token, resource_owner_secret=job.network["accessTokenSecret"],
                      signature_type="auth_header")
        data, response = self.parse_json(job, self.http.get(API, params=params, auth=auth))
        self.check_stat(data, response)
        photos = data.get("photos") or {}
        items = self.map_entries(photos.get("photo"), self.map)
        try:
            more = int(photos.get("page", page)) < int(photos.get("pages", 0))
        except (TypeError, ValueError):
            raise BadResponse("flickr: page and pages must be numbers") from None
        return Page(items, page + 1 if more else None)

    @staticmethod
    def check_stat(data: Any, response: requests.Response) -> None:
        if not isinstance(data, dict):
            raise BadResponse("flickr: expected an object")
        if data.get("stat") == "ok":
            return
        code, message = data.get("code"), f"flickr error {data.get('code')}: {str(data.get('message'))[:200]}"
        message += f": GET {where(response.url)}"
        if code in (98, 99):  # invalid auth token, insufficient permissions
            raise Unauthorized(message, response.status_code)
        if code in (105, 0):  # service currently unavailable
            raise Transient(message, response.status_code)
        raise BadResponse(message, response.status_code)

    @staticmethod
    def map(photo: dict) -> dict:
        owner = photo["owner"]
        icon = f"https://farm{photo['iconfarm']}.staticflickr.com/{photo['iconserver']}/buddyicons/{owner}.jpg" \
            if photo.get("iconserver") and str(photo.get("iconserver")) != "0" else None
        return {
            "itemId": str(photo["id"]),
            "type": "flickr",
            "source": f"https://www.flickr.com/photos/{owner}/{photo['id']}",
            "title": photo.get("title") or None,
            "description": html_to_text((photo.get("description") or {}).get("_content")),
            "thumbnailUrl": photo.get("url_m"),
            "thumbnail": photo.get("url_m"),
            "authorName": photo.get("ownername"),
            "authorUrl": f"https://www.flickr.com/photos/{owner}/",
            "avatarUrl": icon,
            "created": from_epoch(photo["dateupload"]) if photo.get("dateupload") else None,
            "likedAt": from_epoch(photo["date_faved"]) if photo.get("date_faved") else None,
        }
