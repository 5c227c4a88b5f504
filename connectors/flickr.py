"""Flickr favourites: flickr.favorites.getList, signed with OAuth 1.0a (requests-oauthlib; FLICKR_API_KEY and
FLICKR_API_SECRET, the network's accessToken and accessTokenSecret). Errors come with HTTP 200 and
`{"stat": "fail", "code": N}`; there are no rate-limit headers."""

from __future__ import annotations

from typing import Any

import requests
from typing_extensions import override

from collector.sdk import (
    BadResponse,
    Item,
    Job,
    OAuth1Signed,
    PagedConnector,
    PageNumber,
    Transient,
    Unauthorized,
    WhoAmI,
    at,
    clip,
    entry_id,
    html_to_text,
    optional_epoch,
    where,
    whole_number,
)


def pages_left(body: Any, response: requests.Response) -> bool:
    """More pages while `photos.page` < `photos.pages` (numbers or digits, as Flickr sends either)."""
    page = whole_number(at(body, ("photos", "page")), "photos.page")
    return page < whole_number(at(body, ("photos", "pages")), "photos.pages")


class FlickrConnector(PagedConnector):
    name = "flickr"
    required_fields = ("accessToken", "accessTokenSecret")
    required_settings = ("FLICKR_API_KEY", "FLICKR_API_SECRET")
    authentication = OAuth1Signed("FLICKR_API_KEY", "FLICKR_API_SECRET")
    # flickr.test.login: the token's user (an NSID such as 12037949754@N01) and username
    whoami = WhoAmI(
        "https://api.flickr.com/services/rest/",
        ("user", "id"),
        (("user", "username", "_content"),),
        params={"method": "flickr.test.login", "format": "json", "nojsoncallback": 1},
        check_body=True,  # errors come with a 200: {"stat": "fail", "code": 98}
    )
    rate_limit = None
    endpoint = "https://api.flickr.com/services/rest/"
    query = {
        "method": "flickr.favorites.getList",
        "format": "json",
        "nojsoncallback": 1,
        "extras": "description,owner_name,icon_server,date_upload,url_m",
    }
    paging = PageNumber(pages_left, size=100)
    entries = ("photos", "photo")

    @override
    def check_body(self, job: Job, response: requests.Response, body: Any) -> None:
        if not isinstance(body, dict):
            raise BadResponse("flickr: expected an object")
        if body.get("stat") == "ok":
            return
        code, message = body.get("code"), f"flickr error {clip(body.get('code'), 20)}: {clip(body.get('message'), 200)}"
        message += f": GET {where(response.url)}"
        if code in (98, 99):  # invalid auth token, insufficient permissions
            raise Unauthorized(message, response.status_code)
        if code in (105, 0):  # service currently unavailable
            raise Transient(message, response.status_code)
        raise BadResponse(message, response.status_code)

    @override
    def map(self, photo: Any) -> Item:
        owner = photo["owner"]
        icon = (
            f"https://farm{photo['iconfarm']}.staticflickr.com/{photo['iconserver']}/buddyicons/{owner}.jpg"
            if photo.get("iconserver") and str(photo.get("iconserver")) != "0"
            else None
        )
        return {
            "itemId": entry_id(photo["id"]),
            "source": f"https://www.flickr.com/photos/{owner}/{photo['id']}",
            "title": photo.get("title") or None,
            "description": html_to_text((photo.get("description") or {}).get("_content")),
            "thumbnailUrl": photo.get("url_m"),
            "thumbnail": photo.get("url_m"),
            "authorName": photo.get("ownername"),
            "authorUrl": f"https://www.flickr.com/photos/{owner}/",
            "avatarUrl": icon,
            "created": optional_epoch(photo.get("dateupload")),
            "likedAt": optional_epoch(photo.get("date_faved")),
        }
