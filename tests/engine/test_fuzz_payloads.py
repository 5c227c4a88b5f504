"""Every service's recorded payloads (tests/fixtures, SOURCES.md), bent by hypothesis: one to three values anywhere
in a page replaced by what a broken or hostile server may send (a wrong type, a huge or garbled value, text with
control characters or lone surrogates), with hostile rate-limit and paging headers, in the history walk and in a
poll. Whatever comes, the run ends as a success or with a clear lastError on that network, never as our crash
(`internal`), and every item stored is a whole one."""

from __future__ import annotations

import copy
import json
import re
import tracemalloc
from datetime import timedelta
from typing import Any

import mongomock
import pytest
import responses
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector import run_once
from collector.engine.registry import Registry
from collector.settings import settings_for_tests

from helpers import FIXTURES, KEYS, T0, add_network, examples, fixture, network

# service, the URL its pages come from, its recorded pages, the network's own fields
SERVICES: list[tuple[str, str, list[str], dict[str, str]]] = [
    ("github", "https://api.github.test/user/starred", ["github/starred-repository-items.json"], {}),
    ("gist", "https://api.github.test/gists/starred", ["gist/starred-gists.json"], {}),
    ("stackoverflow", "https://api.stackexchange.com/2.3/me/favorites", ["stackoverflow/favorites.json"], {}),
    (
        "mastodon",
        "https://mastodon.example/api/v1/favourites",
        ["mastodon/favourites.json"],
        {"instanceUrl": "https://mastodon.example"},
    ),
    (
        "reddit",
        "https://oauth.reddit.com/user/PyAPITestUser2/saved",
        ["reddit/saved.json"],
        {"username": "PyAPITestUser2"},
    ),
    (
        "bluesky",
        "https://pds.example/xrpc/app.bsky.feed.getActorLikes",
        ["bluesky/actor-likes.json"],
        {"did": "did:plc:collectoruser00000000000", "pdsUrl": "https://pds.example"},
    ),
    (
        "twitter",
        "https://api.x.com/2/users/783214/liked_tweets",
        ["twitter/liked_tweets.json", "twitter/liked_tweets-long-post.json"],
        {"serviceUserId": "783214"},
    ),
    (
        "youtube",
        "https://www.googleapis.com/youtube/v3/videos",
        ["youtube/videos_myrating_paged_1.json", "youtube/videos_myrating_paged_2.json"],
        {},
    ),
    ("vimeo", "https://api.vimeo.com/me/likes", ["vimeo/likes.json", "vimeo/likes-with-like-time.json"], {}),
    ("tumblr", "https://api.tumblr.com/v2/user/likes", ["tumblr/likes.json"], {}),
    (
        "flickr",
        "https://api.flickr.com/services/rest/",
        ["flickr/favorites.json"],
        {"accessTokenSecret": "flickr-token-secret-1"},
    ),
    ("spotify", "https://api.spotify.com/v1/me/tracks", ["spotify/saved-tracks.json"], {}),
    ("dribbble", "https://api.dribbble.com/v2/user/likes", ["dribbble/likes.json"], {}),
    (
        "facebook",
        "https://graph.facebook.com/v25.0/me/likes",
        ["facebook/likes-page-1.json", "facebook/likes-page-2.json"],
        {},
    ),
]
KINDS = {"badResponse", "transient", "unauthorized", "malformed", "rateLimit", "itemRefused"}

hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=31), max_size=4),
    st.sampled_from(
        [
            "",
            "x" * 70_000,
            "\ud800",
            "\x1b[2J\x1b[31m",
            "2026-13-45T99:99:99Z",
            "1e999",
            "-1",
            "javascript:alert(1)",
            "http://127.0.0.1/admin",
            "\u202egnp.exe",
        ]
    ),
    st.lists(st.none() | st.integers() | st.text(max_size=3), max_size=3),
    st.dictionaries(st.sampled_from(["a", "id", "$where", "a.b", ""]), st.none() | st.integers(), max_size=2),
)
HEADER_NAMES = [
    "Link",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "X-RateLimit-Limit",
    "Retry-After",
    "ETag",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "X-Rate-Limit-Remaining",
    "X-Rate-Limit-Reset",
    "X-App-Usage",
    "X-Business-Use-Case-Usage",
]
header_values = st.sampled_from(
    [
        "",
        "-1",
        "0",
        "1e999",
        "nan",
        "99999999999999999999999",
        "abc",
        '<javascript:alert(1)>; rel="next"',
        '<http://127.0.0.1/x>; rel="next"',
        '<>; rel="next"',
        '<https://evil.example/p?page=2>; rel="next"',
        "Wed, 99 Foo 2015",
        '{"call_count": "a"}',
        '"' + "e" * 10_000 + '"',
    ]
)


def keyed_settings() -> Any:
    """Test settings with the app keys the recorded services need, every host allowed (the mock answers)."""
    config = settings_for_tests(github_api_url="https://api.github.test", allow_private_hosts=True)
    return config.with_(raw={**config.raw, **KEYS})


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON value (the root too), as a path of keys and indexes."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*prefix, index))
    return found


def bent(page: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    target = page
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return page


def test_every_recorded_payload_is_in_the_table():
    assert {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*.json")} == {
        name for _, _, names, _ in SERVICES for name in names
    }


@settings(
    max_examples=examples(120),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_a_bent_payload_ends_in_a_clear_outcome_on_its_network(data):
    service, url, names, fields = data.draw(st.sampled_from(SERVICES), label="service")
    pages = [fixture(name) for name in names]
    which = data.draw(st.integers(0, len(pages) - 1), label="page")
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        path = data.draw(st.sampled_from(paths(pages[which])), label="path")
        pages[which] = bent(pages[which], path, copy.deepcopy(data.draw(hostile, label="value")))
    headers = data.draw(st.dictionaries(st.sampled_from(HEADER_NAMES), header_values, max_size=2), label="headers")
    in_poll = data.draw(st.booleans(), label="in a poll")
    clean = [fixture(name) for name in names]

    config = keyed_settings()
    db = mongomock.MongoClient(tz_aware=True)["fuzz"]
    served = {"pages": clean, "headers": {}, "n": 0}

    def answer(request: Any) -> tuple[int, dict, str]:
        served["n"] += 1
        body = served["pages"][min(served["n"] - 1, len(served["pages"]) - 1)]
        return 200, dict(served["headers"]), json.dumps(body)

    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.GET, re.compile(re.escape(url) + r"(\?.*)?$"), callback=answer)
        doc = add_network(db, service=service, **fields)
        when = T0
        if in_poll:  # the history walked on the recorded pages first, the bent ones come to a poll
            for _ in range(4):
                run_once(db, "initial", config, now=when)
                when += timedelta(seconds=1)
            if network(db, doc).get("mode") != "normal":
                return  # (a service whose walk needs more pages than were recorded: nothing to poll)
            when += timedelta(days=1)
        served.update(pages=pages, headers=headers, n=0)
        mode = "normal" if in_poll else "initial"
        run_once(db, mode, config, now=when)
        run_once(db, mode, config, now=when + timedelta(days=1))
    kind = Registry().get(service).item_type or service  # gists are stored as the original collector did
    state = network(db, doc)
    error = state.get("lastError")
    if error is not None:
        assert error.get("kind") in KINDS, error
        assert isinstance(error.get("message"), str) and error["message"]
    for item in db.items.find():
        assert item["type"] == kind and item["user"] == doc["user"]
        assert isinstance(item["itemId"], str) and item["itemId"]
        assert isinstance(item["source"], str) and item["source"]


DEEP = "[" * 300_000 + "]" * 300_000  # 600 KB (uncounted: see too_dense), nested far past any parser's limit


@pytest.mark.parametrize(("service", "url", "names", "fields"), SERVICES, ids=[s[0] for s in SERVICES])
def test_a_page_nested_past_the_parsers_limits_is_refused_on_its_network_alone(service, url, names, fields):
    """A server answering a page nested 300,000 deep (a user-supplied Mastodon or Bluesky host can): the parser
    refuses it on that network (a JSON library without a depth bound overflows the C stack and kills the
    process with every network in it); so too a recorded page whose first entry is nested that deep."""
    config = keyed_settings()
    page = fixture(names[-1])
    first = next(p for p in paths(page) if p and isinstance(page_at(page, p[:-1]), list))  # the first entry
    for body in (DEEP, json.dumps(bent(page, first, "@deep@")).replace('"@deep@"', DEEP)):
        db = mongomock.MongoClient(tz_aware=True)["fuzz"]
        with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
            mock.add(responses.GET, re.compile(re.escape(url) + r"(\?.*)?$"), body=body)
            doc = add_network(db, service=service, **fields)
            run_once(db, "initial", config, now=T0)
        state = network(db, doc)  # a page no parser reads is refused whole: not JSON as far as we can tell
        assert state["lastError"]["kind"] == "badResponse" and state["errors"] == 1, state["lastError"]
        assert "not JSON" in state["lastError"]["message"] and db.items.count_documents({}) == 0


def page_at(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


DENSE = "[" + "{}," * 1_398_100 + "{}]"  # 4 MiB, the body cap: an empty object per 3 bytes, ~24 times that in Python


@pytest.mark.parametrize("service", ["github", "mastodon", "stackoverflow", "bluesky"])
@pytest.mark.parametrize("status", [200, 400])
def test_a_page_denser_than_any_real_one_is_refused_before_it_is_decoded(service, status):
    """4 MiB of `{},` would be ~95 MiB of Python objects (~145 MiB at the peak of decoding): sixteen such pages at
    once would pass the unit's MemoryMax. Refused unread, as a page (badResponse) or as an error's body (the
    HTTP reason is shown instead of the body's), whatever the connector's decoder (msgspec shape, orjson, its own)."""
    url, fields = next((u, f) for s, u, _, f in SERVICES if s == service)
    config = keyed_settings()
    db = mongomock.MongoClient(tz_aware=True)["fuzz"]
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(responses.GET, re.compile(re.escape(url) + r"(\?.*)?$"), body=DENSE, status=status)
        doc = add_network(db, service=service, **fields)
        tracemalloc.start()
        try:
            run_once(db, "initial", config, now=T0)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    error = network(db, doc)["lastError"]
    assert error["kind"] == "badResponse" and error["status"] == status
    assert status != 200 or "more than 200000" in error["message"]
    assert peak < 24 * 2**20  # the body and its copies, not its objects


def test_a_real_page_over_the_counted_size_is_read():
    """A page past COUNTED_FROM of real entries (one value per ~35 bytes) is counted and read whole."""
    from collector.devtools.fakeapi import make_stars
    from collector.sdk.connector import COUNTED_FROM, too_dense

    body = json.dumps(make_stars(400, seed=2)).encode()
    assert len(body) > COUNTED_FROM and too_dense(body) is None
    assert too_dense(DENSE.encode()) == DENSE.count(",") + DENSE.count("[") + DENSE.count("{")
