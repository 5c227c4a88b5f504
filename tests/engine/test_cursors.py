"""A position in the history the database cannot keep is an error on that network alone, naming the field, for the
paging strategies whose next position the collector computes itself (page numbers, offsets): the token strategies
are held to the same by the conformance kit (a token of the wrong kind, one too long, one MongoDB refuses). Each
runs a recorded page of its service, with "more" set, for two networks in one pass: one at the top of what the
cursor may hold, one at the start of its walk, which is saved."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
import responses

from collector import run_once
from collector.settings import settings_for_tests

from helpers import KEYS, T0, add_network, fixture, network

TOP = 2**53 - 1  # the largest whole-number cursor a network may hold (sdk/validate.py)


def more(service: str) -> tuple[dict, Any]:
    """The service's recorded page, saying that more follows: (headers, body)."""
    if service == "vimeo":
        body = fixture("vimeo/likes.json")
        body["paging"]["next"] = "/me/likes?page=2"
        return {}, body
    if service == "spotify":
        body = fixture("spotify/saved-tracks.json")
        body["next"] = "https://api.spotify.com/v1/me/tracks?offset=50&limit=50"
        return {}, body
    if service == "stackoverflow":
        return {}, {**fixture("stackoverflow/favorites.json"), "has_more": True}
    if service == "flickr":
        body = fixture("flickr/favorites.json")
        body["photos"].update(page=1, pages=3)
        return {}, body
    link = {"Link": '<https://x.test/next?page=2>; rel="next"'}
    name = {"github": "github/starred-repository-items.json", "gist": "gist/starred-gists.json"}.get(service)
    return link, fixture(name or "dribbble/likes.json")


CASES = [  # service, its list's URL, the network's fields, where its position is kept and the top of it
    ("vimeo", "https://api.vimeo.com/me/likes", {}, "cursor", TOP),
    ("spotify", "https://api.spotify.com/v1/me/tracks", {}, "cursor", TOP - 10),
    ("stackoverflow", "https://api.stackexchange.com/2.3/me/favorites", {}, "cursor", TOP),
    ("flickr", "https://api.flickr.com/services/rest/", {"accessTokenSecret": "flickr-secret-01"}, "cursor", TOP),
    ("dribbble", "https://api.dribbble.com/v2/user/likes", {}, "cursor", TOP),
    ("gist", "https://api.github.test/gists/starred", {}, "cursor", TOP),
    ("github", "https://api.github.test/user/starred", {}, "page", 10_000_000),
]


@pytest.mark.parametrize(("service", "url", "fields", "field", "top"), CASES, ids=[c[0] for c in CASES])
def test_a_position_past_what_the_database_keeps_fails_that_network_and_the_other_is_saved(
    db, service, url, fields, field, top
):
    settings = settings_for_tests(github_api_url="https://api.github.test", allow_private_hosts=True)
    settings = settings.with_(raw={**settings.raw, **KEYS})
    headers, body = more(service)
    at_top = add_network(db, service=service, user="top@x.test", **{field: top}, **fields)
    fresh = add_network(db, service=service, user="new@x.test", **fields)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(
            responses.GET,
            re.compile(re.escape(url) + r"(\?.*)?$"),
            callback=lambda request: (200, headers, json.dumps(copy.deepcopy(body))),
        )
        report = run_once(db, "initial", settings, now=T0)
    assert report.by_status == {"badResponse": 1, "ok": 1}, report.by_status
    failed = network(db, at_top)
    assert failed["lastError"]["kind"] == "badResponse" and field in failed["lastError"]["message"]
    assert failed[field] == top and failed.get("mode", "initial") == "initial"  # the walk stays where it was
    saved = network(db, fresh)
    assert saved["errors"] == 0 and saved[field] not in (None, top)
    assert db.items.count_documents({"user": "new@x.test"}) > 0 and not db.items.count_documents({"user": "top@x.test"})
