"""What a server sends is stored or refused cleanly: error text with unstorable characters keeps the real error,
a cursor that cannot be stored is an error naming the field, ids that are not strings or whole numbers are
skipped and counted, and a redirect without a usable Location is an error, never an empty page."""

from __future__ import annotations

import json

import pytest
import responses

from collector import run_once
from collector.devtools.fakeapi import make_star, make_stars

from helpers import STARRED, T0, add_network, network, starred_headers


@pytest.mark.parametrize("text", ["lone \\udc80 surrogate", "\\ud800\\ud800 two highs", "nul \\u0000 and \\udfff"])
def test_error_text_a_database_cannot_store_keeps_the_real_error(db, settings, http_mock, text):
    doc = add_network(db)
    body = '{"message": "Not Found: ' + text + '"}'  # JSON escapes of lone surrogates, as a server may send
    http_mock.add(responses.GET, STARRED, status=404, body=body, content_type="application/json")
    report = run_once(db, "initial", settings, now=T0)
    saved = network(db, doc)
    assert report.by_status == {"badResponse": 1}
    assert saved["lastError"]["status"] == 404 and saved["lastError"]["kind"] == "badResponse"
    assert "Not Found" in saved["lastError"]["message"] and "could not be stored" not in saved["lastError"]["message"]
    assert saved["errors"] == 1


@pytest.mark.parametrize("token", ["p2\\udc80", "x" * 5000])
def test_a_cursor_that_cannot_be_stored_is_an_error_naming_the_field(db, settings, token):
    url = "https://www.googleapis.com/youtube/v3/videos"
    doc = add_network(db, service="youtube", accessToken="yt-access-token")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        items = [
            {
                "kind": "youtube#video",
                "id": f"vid{k}",
                "snippet": {
                    "title": f"video {k}",
                    "channelTitle": "c",
                    "channelId": "ch",
                    "publishedAt": "2020-01-01T00:00:00Z",
                },
            }
            for k in range(3)
        ]
        body = json.dumps({"kind": "youtube#videoListResponse", "items": items, "nextPageToken": "TOKEN"})
        mock.add(
            responses.GET,
            url,
            body=body.replace('"TOKEN"', json.dumps(token).replace("\\\\", "\\")),
            content_type="application/json",
        )
        run_once(db, "initial", settings.with_(raw={**settings.raw, "YOUTUBE_CLIENT_ID": "id"}), now=T0)
    saved = network(db, doc)
    assert saved["lastError"]["kind"] == "badResponse" and "cursor" in saved["lastError"]["message"]
    assert saved.get("mode", "initial") == "initial" and "cursor" not in saved


@pytest.mark.parametrize("bad_id", [1.5, float("nan"), True, {"id": 1}, None, "", [3]])
def test_an_entry_whose_id_is_no_string_or_whole_number_is_skipped_and_counted(db, settings, http_mock, bad_id):
    doc = add_network(db)
    stars = make_stars(3, seed=4)
    odd = make_star(99, T0)
    odd["repo"]["id"] = bad_id
    body = json.dumps([odd, *stars], allow_nan=True)
    http_mock.add(responses.GET, STARRED, body=body, headers=starred_headers(), content_type="application/json")
    report = run_once(db, "initial", settings, now=T0)
    assert report.by_status == {"ok": 1} and report.new_items == 3
    assert db.items.count_documents({"itemId": {"$in": ["nan", "True", "1.5", "None", ""]}}) == 0
    assert network(db, doc)["skippedItems"] == 1


@pytest.mark.parametrize("headers", [{}, {"Location": ""}, {"Location": "https://"}], ids=["none", "empty", "no-host"])
def test_a_redirect_without_a_usable_location_is_an_error_never_an_empty_page(db, settings, http_mock, headers):
    doc = add_network(db, page=3)
    http_mock.add(responses.GET, STARRED, status=302, headers=headers, body="")
    report = run_once(db, "initial", settings, now=T0)
    saved = network(db, doc)
    assert report.by_status == {"badResponse": 1}
    assert saved["lastError"]["kind"] == "badResponse" and saved["lastError"]["status"] in (302, None)
    assert saved.get("mode", "initial") == "initial" and saved["page"] == 3  # the walk goes on from page 3
