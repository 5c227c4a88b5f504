"""Connectors true to more real recordings: the dates each API gives mean what the Services table says, deleted
accounts have no author link, an impossible optional date keeps the entry, an older shape's date is read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from collector.engine.registry import Registry
from collector.sdk.http import Http
from collector.settings import settings_for_tests


def connector(name: str):
    settings = settings_for_tests()
    return Registry().get(name)(settings, Http(settings))


@pytest.mark.parametrize("stamp", ["2024-01-02T03:04:05+0000", "2016-11-30T10:00:00+0000"])
def test_facebook_created_time_on_me_likes_is_when_the_user_liked_the_page(stamp):
    item = connector("facebook").map({"id": "1234", "name": "A Page", "created_time": stamp})
    assert item["likedAt"] == datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").astimezone(UTC)
    assert item.get("created") is None  # the Page's own creation is not in this answer


@pytest.mark.parametrize("gone", ["[deleted]", "[removed]", "", None])
def test_a_deleted_reddit_author_is_no_author(gone):
    data = {
        "name": "t3_abc",
        "title": "T",
        "author": gone,
        "created_utc": 1700000000,
        "permalink": "/r/x/comments/abc/t/",
    }
    item = connector("reddit").map({"kind": "t3", "data": data})
    assert item["authorName"] is None and item["authorUrl"] is None
    alive = connector("reddit").map({"kind": "t3", "data": {**data, "author": "spez"}})
    assert alive["authorUrl"] == "https://www.reddit.com/user/spez"


@pytest.mark.parametrize("created", ["2024-00-10T00:00:00Z", "2024-02-30T25:61:00Z", "yesterday", None, 17])
def test_a_bluesky_post_with_an_impossible_date_is_kept_with_the_date_empty(created):
    record = {"text": "hello", "createdAt": created} if created is not None else {"text": "hello"}
    entry = {
        "post": {
            "uri": "at://did:plc:abc/app.bsky.feed.post/3k",
            "cid": "c",
            "record": record,
            "author": {"did": "did:plc:abc", "handle": "a.bsky.social"},
        }
    }
    item = connector("bluesky").map(entry)
    assert item["itemId"] == "at://did:plc:abc/app.bsky.feed.post/3k" and item["created"] is None


def test_an_older_dribbble_shape_gives_its_created_at():
    like = {
        "id": 1,
        "created_at": "2024-05-01T00:00:00Z",
        "shot": {
            "id": 7,
            "html_url": "https://dribbble.com/shots/7",
            "title": "S",
            "created_at": "2015-03-04T05:06:07Z",
        },
    }
    item = connector("dribbble").map(like)
    assert item["created"] == datetime(2015, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert item["likedAt"] == datetime(2024, 5, 1, tzinfo=UTC)


def reddit_page(names: list[str]) -> dict:
    children = [
        {
            "kind": "t3",
            "data": {
                "name": n,
                "title": f"post {n}",
                "author": "someone",
                "created_utc": 1700000000,
                "permalink": f"/r/x/comments/{n}/t/",
            },
        }
        for n in names
    ]
    return {"kind": "Listing", "data": {"after": None, "children": children}}


@pytest.mark.parametrize(("now_named", "expected"), [("renamed_user", "ok"), ("old_user", "badResponse")])
def test_a_403_on_a_reddit_users_saved_rechecks_the_name_once(db, now_named, expected):
    import responses

    from collector import run_once

    from helpers import T0, add_network

    settings = settings_for_tests(raw={"REDDIT_CLIENT_ID": "reddit-client", "REDDIT_CLIENT_SECRET": "reddit-secret"})
    doc = add_network(db, service="reddit", accessToken="reddit-access-token", username="old_user")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.GET, "https://oauth.reddit.com/user/old_user/saved", status=403, json={"message": "Forbidden"}
        )
        me = mock.add(responses.GET, "https://oauth.reddit.com/api/v1/me", json={"name": now_named})
        mock.add(responses.GET, "https://oauth.reddit.com/user/renamed_user/saved", json=reddit_page(["t3_a", "t3_b"]))
        report = run_once(db, "initial", settings, now=T0)
    saved = db.networks.find_one({"_id": doc["_id"]})
    assert report.by_status == {expected: 1} and me.call_count == 1
    if expected == "ok":
        assert saved["username"] == "renamed_user" and db.items.count_documents({}) == 2
    else:
        assert saved["errors"] == 1 and saved["lastError"]["status"] == 403 and saved["username"] == "old_user"
