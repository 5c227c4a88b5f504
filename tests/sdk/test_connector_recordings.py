"""Connectors true to more real recordings: the dates each API gives mean what the Services table says, deleted
accounts have no author link, an impossible optional date keeps the entry, an older shape's date is read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

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


# --- the like time (`likedAt`): where each API says when the user liked the thing, and where it does not ----------
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


def mapped(service: str, body, entries: tuple[str, ...]) -> list:
    from collector.sdk import dig

    conn = connector(service)
    if hasattr(conn, "read_page"):
        conn.read_page(body)  # X's includes.users
    return [conn.map(entry) for entry in (dig(body, entries) if entries else body)]


def parse(value) -> datetime:
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit()):
        return datetime.fromtimestamp(int(value), UTC)
    return datetime.fromisoformat(value.replace("Z", "+00:00").replace("+0000", "+00:00")).astimezone(UTC)


@pytest.mark.parametrize(
    ("service", "name", "entries", "like_time"),
    [
        ("github", "github/starred-repository-items.json", (), ("starred_at",)),
        ("vimeo", "vimeo/likes-with-like-time.json", ("data",), ("metadata", "interactions", "like", "added_time")),
        ("tumblr", "tumblr/likes.json", ("response", "liked_posts"), ("liked_timestamp",)),
        ("flickr", "flickr/favorites.json", ("photos", "photo"), ("date_faved",)),
        ("spotify", "spotify/saved-tracks.json", ("items",), ("added_at",)),
        ("dribbble", "dribbble/likes.json", (), ("created_at",)),
        ("facebook", "facebook/likes-page-2.json", ("data",), ("created_time",)),
    ],
)
def test_liked_at_is_the_time_the_api_gives_for_the_like(service, name, entries, like_time):
    from collector.sdk import dig

    body = fixture(name)
    raw = dig(body, entries) if entries else body
    items = mapped(service, body, entries)
    assert items and all(
        item["likedAt"] == parse(dig(entry, like_time)) for item, entry in zip(items, raw, strict=True)
    )


@pytest.mark.parametrize(
    ("service", "name", "entries"),
    [
        ("gist", "gist/starred-gists.json", ()),  # a gist has created_at/updated_at, no star time
        ("stackoverflow", "stackoverflow/favorites.json", ("items",)),  # `sort=added` orders by it, never returns it
        ("mastodon", "mastodon/favourites.json", ()),  # favourite ids and times are not exposed
        ("reddit", "reddit/saved.json", ("data", "children")),  # `saved: true`, no time
        ("bluesky", "bluesky/actor-likes.json", ("feed",)),  # viewer.like is the like record's URI, not its time
        ("twitter", "twitter/liked_tweets.json", ("data",)),
        ("twitter", "twitter/liked_tweets-long-post.json", ("data",)),
        ("youtube", "youtube/videos_myrating_paged_1.json", ("items",)),  # publishedAt is the video's
        ("vimeo", "vimeo/likes.json", ("data",)),  # an answer without metadata.interactions
    ],
)
def test_no_liked_at_where_the_api_gives_no_like_time(service, name, entries):
    items = mapped(service, fixture(name), entries)
    assert items and all(item.get("likedAt") is None for item in items)


def test_an_x_long_post_is_its_whole_text_and_a_short_one_its_text():
    conn = connector("twitter")
    conn.read_page({})
    long_post = fixture("twitter/liked_tweets-long-post.json")["data"][0]
    assert conn.map(long_post)["description"] == long_post["note_tweet"]["text"] != long_post["text"]
    renamed = {"id": "1", "text": "cut…", "note_post": {"text": "the whole post"}}  # the newest API description
    assert conn.map(renamed)["description"] == "the whole post"
    for note in ({}, {"text": ""}, {"text": None}, "odd"):
        assert conn.map({"id": "2", "text": "short", "note_tweet": note})["description"] == "short"
    assert "note_tweet" in conn.query["tweet.fields"].split(",")
