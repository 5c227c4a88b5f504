"""Every service against payloads the service really sends (tests/fixtures/<service>/, sources in SOURCES.md):
the history is walked from initial to normal through `run_once`, and the stored items are compared with values
read from the payload here, independently of the connectors' mapping."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from collector import run_once
from collector.settings import settings_for_tests

from helpers import KEYS, T0, add_network, network

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
UTC = UTC


def load(name: str):
    return json.loads((FIXTURES / name).read_text())


def settings():
    base = settings_for_tests(github_api_url="https://api.github.test", allow_private_hosts=True)
    return base.with_(raw={**base.raw, **KEYS})


def serve(mock, url: str, bodies: list, headers: dict | None = None) -> list:
    """Serve `bodies` in turn at `url` (any query); the last one again once they run out."""
    seen = []

    def callback(request):
        seen.append(request.url)
        body = bodies[min(len(seen) - 1, len(bodies) - 1)]
        return 200, dict(headers or {}), json.dumps(body)

    mock.add_callback(responses.GET, re.compile(re.escape(url) + r"(\?.*)?$"), callback=callback)
    return seen


def walk(db, doc, passes: int = 6) -> None:
    for k in range(passes):
        if network(db, doc).get("mode") == "normal":
            return
        run_once(db, "initial", settings(), now=T0.replace(second=k))
    raise AssertionError(f"still {network(db, doc).get('mode')} after {passes} passes: {network(db, doc)}")


def stored(db) -> dict[str, dict]:
    return {item["itemId"]: item for item in db.items.find()}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def epoch(seconds) -> datetime:
    return datetime.fromtimestamp(float(seconds), UTC)


def test_github_official_example(db, http_mock):
    page = load("github/starred-repository-items.json")
    serve(http_mock, "https://api.github.test/user/starred", [page])
    doc = add_network(db)
    walk(db, doc)
    repo = page[0]["repo"]
    item = stored(db)[str(repo["id"])]
    assert item["type"] == "github" and item["source"] == repo["html_url"] == "https://github.com/octocat/Hello-World"
    assert item["title"] == item["name"] == repo["full_name"] and item["repo"] == repo["name"]
    assert item["description"] == repo["description"]
    assert (item["authorName"], item["authorUrl"], item["avatarUrl"]) == (
        repo["owner"]["login"],
        repo["owner"]["html_url"],
        repo["owner"]["avatar_url"],
    )
    assert item["created"] == at(repo["created_at"]) and item["likedAt"] == at(page[0]["starred_at"])


def test_gists_recorded_2012_answer_is_stored_as_the_original_collector_did(db, http_mock):
    gists = load("gist/starred-gists.json")
    serve(http_mock, "https://api.github.test/gists/starred", [gists])
    doc = add_network(db, service="gist")
    walk(db, doc)
    items = stored(db)
    assert set(items) == {g["id"] for g in gists}
    for gist in gists:
        item = items[gist["id"]]
        assert item["type"] == "github" and item["gist"] is True and item["repo"] == "gist"
        assert item["source"] == gist["html_url"] and item["title"] == gist["description"]
        assert item["authorName"] == gist["user"]["login"] and item["avatarUrl"] == gist["user"]["avatar_url"]
        assert item["created"] == at(gist["created_at"])


def test_gists_already_in_a_likeastore_database_are_not_collected_again(db, http_mock):
    gists = load("gist/starred-gists.json")
    serve(http_mock, "https://api.github.test/gists/starred", [gists])
    legacy = {
        "user": "ann@example.com",
        "type": "github",
        "itemId": gists[0]["id"],
        "gist": True,
        "repo": "gist",
        "source": gists[0]["html_url"],
        "description": "stored by the original collector",
    }
    db.items.insert_one(dict(legacy))
    doc = add_network(db, service="gist")
    report = run_once(db, "initial", settings(), now=T0)
    assert report.new_items == 1 and network(db, doc)["mode"] == "normal"
    assert db.items.count_documents({"itemId": gists[0]["id"]}) == 1
    assert db.items.count_documents({}) == 2


def test_stack_exchange_documented_example(db, http_mock):
    body = load("stackoverflow/favorites.json")
    serve(http_mock, "https://api.stackexchange.com/2.3/me/favorites", [body])
    doc = add_network(db, service="stackoverflow")
    walk(db, doc)
    question = body["items"][0]
    item = stored(db)[str(question["question_id"])]
    assert item["title"] == 'How to "x"?' and item["description"] == item["title"]  # entities decoded
    assert item["source"] == question["link"] and item["tags"] == question["tags"]
    assert item["authorName"] == question["owner"]["display_name"]
    assert item["avatarUrl"] == question["owner"]["profile_image"]
    assert item["created"] == epoch(question["creation_date"])


def test_mastodon_documented_statuses_as_plain_text(db, http_mock):
    statuses = load("mastodon/favourites.json")
    serve(http_mock, "https://mastodon.example/api/v1/favourites", [statuses])
    doc = add_network(db, service="mastodon", instanceUrl="https://mastodon.example")
    walk(db, doc)
    items = stored(db)
    gargron = items[statuses[0]["id"]]
    assert gargron["description"] == (
        '"I lost my inheritance with one wrong digit on my sort code"\n'
        "https://www.theguardian.com/money/2019/dec/07/i-lost-my-193000-inheritance-with-one-wrong-digit-on-my-sort-code"
    )
    assert (gargron["authorName"], gargron["authorUrl"], gargron["avatarUrl"]) == (
        "Eugen",
        "https://mastodon.social/@Gargron",
        statuses[0]["account"]["avatar"],
    )
    assert gargron["source"] == statuses[0]["url"] and gargron["created"] == at(statuses[0]["created_at"])
    haskal = items[statuses[1]["id"]]
    assert haskal["description"] == "the pirate gay"
    assert haskal["authorUrl"] == "https://cybre.space/@haskal"  # from acct: the documented account has no url


def test_reddit_recorded_saved_page_keeps_the_comment_without_permalink(db, http_mock):
    listing = load("reddit/saved.json")
    serve(http_mock, "https://oauth.reddit.com/user/PyAPITestUser2/saved", [listing])
    doc = add_network(db, service="reddit", username="PyAPITestUser2")
    walk(db, doc)
    items = stored(db)
    children = listing["data"]["children"]
    assert set(items) == {c["data"]["name"] for c in children} and len(items) == 18
    comment = children[0]["data"]
    assert "permalink" not in comment or comment["permalink"] is None
    item = items[comment["name"]]
    assert item["source"] == f"https://www.reddit.com/comments/{comment['link_id'][3:]}/_/{comment['id']}/"
    assert item["title"] == comment["link_title"] and item["description"] == comment["body"]
    post = children[1]["data"]
    assert items[post["name"]]["source"] == "https://www.reddit.com" + post["permalink"]
    assert items[post["name"]]["created"] == epoch(post["created_utc"])
    assert network(db, doc).get("skippedItems", 0) == 0


def test_bluesky_posts_and_an_author_whose_handle_is_invalid(db, http_mock):
    body = load("bluesky/actor-likes.json")
    serve(http_mock, "https://pds.example/xrpc/app.bsky.feed.getActorLikes", [body, {"feed": []}])
    doc = add_network(db, service="bluesky", did="did:plc:collectoruser00000000000", pdsUrl="https://pds.example")
    walk(db, doc)
    items = stored(db)
    good, bad = (entry["post"] for entry in body["feed"])
    assert items[good["uri"]]["source"] == "https://bsky.app/profile/alice.test/post/3kxyzagain22"
    assert items[good["uri"]]["authorName"] == "ali" and items[good["uri"]]["description"] == "again"
    did = bad["author"]["did"]
    assert items[bad["uri"]]["source"] == f"https://bsky.app/profile/{did}/post/3kzhandlebad"
    assert (
        items[bad["uri"]]["authorName"] == did and items[bad["uri"]]["authorUrl"] == f"https://bsky.app/profile/{did}"
    )
    assert "handle.invalid" not in json.dumps([str(v) for v in items[bad["uri"]].values()])


def test_x_recorded_likes_without_created_at_are_all_kept(db, http_mock):
    body = load("twitter/liked_tweets.json")
    serve(http_mock, "https://api.x.com/2/users/783214/liked_tweets", [body, {"meta": {"result_count": 0}}])
    doc = add_network(db, service="twitter", serviceUserId="783214")
    walk(db, doc)
    items = stored(db)
    assert len(items) == len(body["data"]) == 96
    first = body["data"][0]
    assert items[first["id"]]["description"] == first["text"] and items[first["id"]]["created"] is None
    assert items[first["id"]]["source"] == f"https://x.com/i/status/{first['id']}"


def test_youtube_recorded_pages_keep_thumbnails_apart_from_avatars(db, http_mock):
    pages = [load("youtube/videos_myrating_paged_1.json"), load("youtube/videos_myrating_paged_2.json")]
    serve(http_mock, "https://www.googleapis.com/youtube/v3/videos", pages)
    doc = add_network(db, service="youtube")
    walk(db, doc)
    items = stored(db)
    videos = [v for p in pages for v in p["items"]]
    assert set(items) == {v["id"] for v in videos} and len(items) == 3
    for video in videos:
        item, snippet = items[video["id"]], video["snippet"]
        assert item["thumbnailUrl"] == item["thumbnail"] == snippet["thumbnails"]["high"]["url"]
        assert item.get("avatarUrl") is None
        assert item["title"] == snippet["title"] and item["authorName"] == snippet["channelTitle"]
        assert item["source"] == f"https://www.youtube.com/watch?v={video['id']}"
        assert item["created"] == at(snippet["publishedAt"])


def test_vimeo_documented_example(db, http_mock):
    body = load("vimeo/likes.json")
    serve(http_mock, "https://api.vimeo.com/me/likes", [body])
    doc = add_network(db, service="vimeo")
    walk(db, doc)
    video = body["data"][0]
    item = stored(db)["123"]
    assert item["source"] == video["link"] and item["title"] == video["name"]
    assert item["authorName"] == video["user"]["name"] and item["authorUrl"] == video["user"]["link"]
    assert item["avatarUrl"] == "https://i.vimeocdn.com/portrait/1_75x75"  # the largest size
    assert item["created"] == at(video["created_time"])


def test_vimeo_recorded_like_carries_the_time_the_user_liked_it(db, http_mock):
    body = load("vimeo/likes-with-like-time.json")
    serve(http_mock, "https://api.vimeo.com/me/likes", [body])
    doc = add_network(db, service="vimeo")
    walk(db, doc)
    video = body["data"][0]
    item = stored(db)["874196439"]
    like = video["metadata"]["interactions"]["like"]
    assert like["added"] is True and item["likedAt"] == at(like["added_time"]) == at("2025-08-28T06:42:07+00:00")
    assert item["created"] == at(video["created_time"]) != item["likedAt"]  # the video's own time is another


def test_vimeo_answer_without_interactions_has_no_like_time(db, http_mock):
    serve(http_mock, "https://api.vimeo.com/me/likes", [load("vimeo/likes.json")])
    doc = add_network(db, service="vimeo")
    walk(db, doc)
    assert stored(db)["123"].get("likedAt") is None


def test_x_long_post_is_stored_whole_from_note_tweet(db, http_mock):
    body = load("twitter/liked_tweets-long-post.json")
    seen = serve(http_mock, "https://api.x.com/2/users/2244994945/liked_tweets", [body])
    doc = add_network(db, service="twitter", serviceUserId="2244994945")
    walk(db, doc)
    post = body["data"][0]
    item = stored(db)[post["id"]]
    assert post["text"].endswith("https://t.co/56a0vZUx7i") and "Tweet\u2026" in post["text"]  # cut short
    assert item["description"] == post["note_tweet"]["text"] and len(item["description"]) > 280
    assert item["source"] == f"https://x.com/TwitterDev/status/{post['id']}" and item.get("likedAt") is None
    assert "note_tweet" in parse_qs(urlsplit(seen[0]).query)["tweet.fields"][0].split(",")


def test_tumblr_documented_legacy_posts(db, http_mock):
    body = load("tumblr/likes.json")
    seen = serve(
        http_mock,
        "https://api.tumblr.com/v2/user/likes",
        [body, {"meta": {"status": 200, "msg": "OK"}, "response": {"liked_posts": [], "liked_count": 2}}],
    )
    doc = add_network(db, service="tumblr")
    walk(db, doc)
    photo, text = body["response"]["liked_posts"]
    items = stored(db)
    assert items[text["id_string"]]["title"] == "Milky Dog"  # its own title
    assert items[photo["id_string"]]["title"] == "my arm is getting tired."  # no title: the caption's first line
    assert items[text["id_string"]]["description"].startswith("TO READ THE REST CLICK HERE\nMilky Dog was inspired")
    assert items[photo["id_string"]]["authorUrl"] == "https://derekg.tumblr.com"  # no blog object: by blog name
    assert items[text["id_string"]]["likedAt"] == epoch(text["liked_timestamp"])
    # no _links in the answer: the next page is asked for before the oldest like of this page
    assert f"before={min(photo['liked_timestamp'], text['liked_timestamp'])}" in seen[1]


def test_flickr_documented_example(db, http_mock):
    body = load("flickr/favorites.json")
    serve(http_mock, "https://api.flickr.com/services/rest/", [body])
    doc = add_network(db, service="flickr", accessTokenSecret="flickr-token-secret-1")
    walk(db, doc)
    photo = body["photos"]["photo"][0]
    item = stored(db)[photo["id"]]
    assert item["source"] == f"https://www.flickr.com/photos/{photo['owner']}/{photo['id']}"
    assert item["title"] == photo["title"] and item["authorName"] == photo["ownername"]
    assert item["avatarUrl"] == f"https://farm1.staticflickr.com/1/buddyicons/{photo['owner']}.jpg"
    assert item["created"] == epoch(photo["dateupload"]) and item["likedAt"] == epoch(photo["date_faved"])


def test_spotify_sdk_track(db, http_mock):
    body = load("spotify/saved-tracks.json")
    serve(http_mock, "https://api.spotify.com/v1/me/tracks", [body])
    doc = add_network(db, service="spotify")
    walk(db, doc)
    track = body["items"][0]["track"]
    item = stored(db)[track["id"]]
    assert item["title"] == "Austerity" and item["authorName"] == "Katatonia"
    assert item["thumbnailUrl"] == track["album"]["images"][0]["url"] and item.get("avatarUrl") is None
    assert item["created"] == datetime(2023, 1, 20, tzinfo=UTC)  # album.release_date
    assert item["likedAt"] == at(body["items"][0]["added_at"])


def test_dribbble_description_is_plain_text(db, http_mock):
    body = load("dribbble/likes.json")
    serve(http_mock, "https://api.dribbble.com/v2/user/likes", [body])
    doc = add_network(db, service="dribbble")
    walk(db, doc)
    shot = body[0]["shot"]
    item = stored(db)[str(shot["id"])]
    assert item["description"] == (
        "Quick, messy, five minute sketch of something that might become a fictional something."
    )
    assert item["authorName"] == shot["user"]["name"] and item["avatarUrl"] == shot["user"]["avatar_url"]
    assert item["thumbnailUrl"] == shot["images"]["normal"] and item["created"] == at(shot["published_at"])


def test_facebook_walks_past_an_empty_page_that_carries_next(db, http_mock):
    pages = [load("facebook/likes-page-1.json"), load("facebook/likes-page-2.json")]
    seen = serve(http_mock, "https://graph.facebook.com/v25.0/me/likes", pages)
    doc = add_network(db, service="facebook")
    walk(db, doc)
    page = pages[1]["data"][0]
    item = stored(db)[page["id"]]
    assert len(seen) == 2 and "after=QVFIUjNB" in seen[1]
    assert item["title"] == item["name"] == page["name"] and item["source"] == page["link"]
    assert item["avatarUrl"] == page["picture"]["data"]["url"]


@pytest.mark.parametrize("fixture", ["github/starred-repository-items.json"])
def test_the_fake_api_serves_entries_of_the_official_shape_and_size(fixture):
    from collector.devtools.fakeapi import make_star

    official = load(fixture)[0]
    fake = make_star(42, datetime(2026, 1, 1, tzinfo=UTC))
    assert set(fake) == set(official) and set(fake["repo"]) == set(official["repo"])
    assert set(fake["repo"]["owner"]) == set(official["repo"]["owner"])
    assert abs(len(json.dumps(fake)) - len(json.dumps(official))) < 400  # ~5.6 KB, as GitHub sends


def test_a_realistic_github_page_is_about_half_a_megabyte_and_stored_whole(db, settings, http_mock):
    import json

    from collector import run_once
    from collector.devtools.fakeapi import make_stars

    from helpers import T0, GitHubStub, add_network

    stars = make_stars(100, seed=3)
    assert 500_000 < len(json.dumps(stars)) < 650_000
    GitHubStub(http_mock, stars=stars)
    add_network(db)
    assert run_once(db, "initial", settings, now=T0).new_items == 100
