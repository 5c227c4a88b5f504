"""Service-specific behaviour beyond the conformance suite: retired services, safe base URLs, Stack Exchange
backoff and compression, identity look-ups, missing app keys, `collector connectors`."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta

import pytest
import responses

from collector import cli, run_once
from collector.sdk.errors import BadResponse, Malformed
from collector.sdk.safeurl import safe_base_url
from collector.settings import settings_for_tests

from helpers import T0, add_network, network
from helpers.services import StackOverflow

SE_URL = "https://api.stackexchange.com/2.3/me/favorites"


def with_keys(**keys):
    base = settings_for_tests()
    return base.with_(allow_private_hosts=True, raw={**base.raw, **keys})


@pytest.mark.parametrize(
    "service, words", [("pocket", "2025-07-08"), ("instagram", "Instagram"), ("behance", "Behance")]
)
def test_retired_services_are_disabled_without_a_request(db, http_mock, service, words):
    doc = add_network(db, service=service)
    report = run_once(db, "initial", with_keys(), now=T0)
    state = network(db, doc)
    assert report.by_status == {"retired": 1} and len(http_mock.calls) == 0
    assert state["disabled"] is True and state["lastError"]["kind"] == "retired"
    assert words in state["lastError"]["message"]


def test_other_unknown_services_stay_unknown(db):
    doc = add_network(db, service="friendfeed")
    run_once(db, "initial", with_keys(), now=T0)
    state = network(db, doc)
    assert state["lastError"]["kind"] == "unknownService" and "disabled" not in state


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://mastodon.social", "https"),
        ("ftp://x.test", "https"),
        ("https://user:pw@x.test", "plain"),
        ("https://127.0.0.1", "non-public"),
        ("https://intranet.test", "non-public"),
        ("https://[::1]", "non-public"),
        ("https://metadata.test", "non-public"),
    ],
)
def test_unsafe_instance_urls_are_refused(url, reason):
    addresses = {
        "127.0.0.1": ["127.0.0.1"],
        "intranet.test": ["10.1.2.3"],
        "::1": ["::1"],
        "metadata.test": ["169.254.169.254"],
        "x.test": ["93.184.216.34"],
    }
    with pytest.raises(Malformed, match=reason):
        safe_base_url(url, "instanceUrl", False, resolver=lambda host: addresses[host])


def test_public_https_instance_url_is_accepted_and_private_ones_can_be_allowed():
    assert (
        safe_base_url(
            "https://mastodon.social/", "instanceUrl", False, resolver=lambda host: ["2a03:2880::1", "93.184.216.34"]
        )
        == "https://mastodon.social"
    )
    assert safe_base_url("https://10.0.0.5", "instanceUrl", True, resolver=lambda host: ["10.0.0.5"])


def test_a_mastodon_network_on_a_private_host_gets_a_clear_error(db, http_mock, monkeypatch):
    monkeypatch.setattr("collector.sdk.safeurl.resolve", lambda host: ["192.168.1.20"])
    doc = add_network(db, service="mastodon", instanceUrl="https://home.lan")
    run_once(db, "initial", with_keys().with_(allow_private_hosts=False), now=T0)
    state = network(db, doc)
    assert state["lastError"]["kind"] == "malformed" and "ALLOW_PRIVATE_HOSTS" in state["lastError"]["message"]
    assert len(http_mock.calls) == 0


def test_mastodon_redirect_to_another_host_does_not_carry_the_token(db, http_mock):
    http_mock.get(
        "https://mastodon.test/api/v1/favourites",
        status=302,
        headers={"Location": "https://elsewhere.test/api/v1/favourites"},
    )
    seen = []
    http_mock.add_callback(
        responses.GET,
        "https://elsewhere.test/api/v1/favourites",
        callback=lambda request: seen.append(request.headers.get("Authorization")) or (200, {}, "[]"),
    )
    add_network(db, service="mastodon", instanceUrl="https://mastodon.test")
    run_once(db, "initial", with_keys(), now=T0)
    assert seen == [None]


def se_body(**extra) -> dict:
    body = StackOverflow().render([3, 2, 1], None, SE_URL)[2]
    return {**body, **extra}


def test_stack_exchange_backoff_delays_the_next_run_and_the_token(db, http_mock):
    http_mock.get(SE_URL, json=se_body(backoff=3600))
    doc = add_network(db, service="stackoverflow")
    settings = with_keys(STACKEXCHANGE_KEY="se-app-key")
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["mode"] == "normal" and state["scheduledTo"] == T0 + timedelta(seconds=3600)
    request = http_mock.calls[0].request
    assert request.headers["Authorization"] == "Bearer " + doc["accessToken"]
    assert "key=se-app-key" in request.url and doc["accessToken"] not in request.url


def test_stack_exchange_app_key_never_reaches_a_log_record(db, http_mock, caplog):
    import logging

    http_mock.get(
        SE_URL, status=400, json={"error_id": 400, "error_name": "bad_parameter", "error_message": "site is required"}
    )
    doc = add_network(db, service="stackoverflow")
    with caplog.at_level(logging.DEBUG):
        run_once(db, "initial", with_keys(STACKEXCHANGE_KEY="se-secretish-key"), now=T0)
    assert network(db, doc)["lastError"]["kind"] == "badResponse"
    assert "se-secretish-key" not in str(network(db, doc)["lastError"])
    assert all("se-secretish-key" not in r.getMessage() for r in caplog.records)


def test_stack_exchange_body_is_decompressed_even_without_content_encoding(db, http_mock):
    http_mock.get(SE_URL, body=gzip.compress(json.dumps(se_body()).encode()), content_type="application/json")
    add_network(db, service="stackoverflow")
    report = run_once(db, "initial", with_keys(STACKEXCHANGE_KEY="k"), now=T0)
    assert report.new_items == 3
    assert db.items.find_one({"itemId": "3"})["title"] == 'How to "3"?'


def test_stack_exchange_body_without_content_encoding_cut_short_is_refused_by_name(db, http_mock):
    packed = gzip.compress(json.dumps(se_body()).encode())
    http_mock.get(SE_URL, body=packed[:-8], content_type="application/json")  # the gzip trailer never came
    doc = add_network(db, service="stackoverflow")
    report = run_once(db, "initial", with_keys(STACKEXCHANGE_KEY="k"), now=T0)
    assert report.by_status == {"badResponse": 1} and db.items.count_documents({}) == 0
    assert "cut short" in network(db, doc)["lastError"]["message"]


def test_stack_exchange_without_its_app_key_is_a_clear_error(db, http_mock):
    doc = add_network(db, service="stackoverflow")
    run_once(db, "initial", with_keys(), now=T0)
    state = network(db, doc)
    assert state["lastError"]["kind"] == "notConfigured" and "STACKEXCHANGE_KEY" in state["lastError"]["message"]
    assert len(http_mock.calls) == 0


def test_reddit_looks_up_the_username_once_and_keeps_it(db, http_mock):
    http_mock.get("https://oauth.reddit.com/api/v1/me", json={"name": "ann"})
    http_mock.get(
        "https://oauth.reddit.com/user/ann/saved", json={"kind": "Listing", "data": {"after": None, "children": []}}
    )
    doc = add_network(db, service="reddit")
    run_once(db, "initial", with_keys(), now=T0)
    assert network(db, doc)["username"] == "ann"


def test_twitter_looks_up_the_user_id_once_and_keeps_it(db, http_mock):
    http_mock.get("https://api.x.com/2/users/me", json={"data": {"id": "42", "username": "ann"}})
    http_mock.get("https://api.x.com/2/users/42/liked_tweets", json={"meta": {"result_count": 0}})
    doc = add_network(db, service="twitter")
    run_once(db, "initial", with_keys(), now=T0)
    assert network(db, doc)["serviceUserId"] == "42" and network(db, doc)["mode"] == "normal"


def test_connectors_command_lists_every_service(capsys):
    assert cli.main(["connectors"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = {line.split("\t")[0] for line in lines}
    assert {
        "github",
        "gist",
        "stackoverflow",
        "mastodon",
        "reddit",
        "bluesky",
        "twitter",
        "youtube",
        "vimeo",
        "tumblr",
        "flickr",
        "spotify",
        "dribbble",
        "facebook",
    } <= names
    assert all(line.endswith("\tbuilt-in") for line in lines)


def tumblr_page(posts, links=None):
    response = {"liked_posts": posts, **({"_links": links} if links is not None else {})}
    return {"meta": {"status": 200}, "response": response}


@pytest.mark.parametrize(
    ("posts", "expected"),
    [
        ([{"liked_timestamp": 1700000300}, {"liked_timestamp": 1700000100}], "1700000100"),
        ([{"liked_timestamp": "1700000200"}, {"liked_timestamp": 1700000500}], "1700000200"),  # digits too
        ([7, {"liked_timestamp": 1600000000}, {"id": 1}], "1600000000"),  # what can be read decides
    ],
)
def test_tumblr_without_a_next_link_pages_back_from_the_oldest_like(posts, expected):
    from connectors.tumblr import LikedBefore

    assert LikedBefore().next(None, tumblr_page(posts), None, posts) == expected


@pytest.mark.parametrize(
    "posts",
    [
        [7, 7, 7],
        [{"id": 1, "post_url": "https://x.tumblr.com/post/1"}],
        [{"liked_timestamp": 1.5}],
        [{"liked_timestamp": True}],
    ],
)
def test_tumblr_entries_with_no_way_on_are_an_error_never_the_end(posts):
    """A page with entries, no `_links.next` and no readable like time cannot say where the history goes on: a
    badResponse (the walk stays), not the end of the list."""
    from connectors.tumblr import LikedBefore

    with pytest.raises(BadResponse, match="liked_timestamp"):
        LikedBefore().next(None, tumblr_page(posts), None, posts)


def test_tumblr_an_empty_page_is_the_end_and_a_link_wins_over_the_times():
    from connectors.tumblr import LikedBefore

    assert LikedBefore().next("123", tumblr_page([]), None, []) is None
    posts = [{"liked_timestamp": 1700000000}]
    links = {"next": {"query_params": {"before": "1690000000"}}}
    assert LikedBefore().next(None, tumblr_page(posts, links), None, posts) == "1690000000"


@pytest.mark.parametrize("token", [0, "0", 42])
def test_a_token_of_zero_or_any_whole_number_is_sent_back(token):
    from collector.sdk.paging import cursor_params

    assert cursor_params(token, "cursor", 50, "limit") == {"limit": 50, "cursor": token}
    assert cursor_params(None, "cursor", 50, "limit") == {"limit": 50}
