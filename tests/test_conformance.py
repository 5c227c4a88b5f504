"""The conformance suite: every registered connector, against its own service's fixtures, must pass all of it.
A new connector adds a Spec to tests/services.py; the first test fails until it does."""
from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

import pytest
import responses
from helpers import T0, add_network, network
from services import SPECS, URL_PATTERN, query

from collector import run_once
from collector.settings import settings_for_tests
from collector.registry import Registry

TOKEN = "conformance-access-token-0001"
REFRESH = "conformance-refresh-token-0001"
IDS = [f"{spec.service}-{type(spec).__name__}" for spec in SPECS]


class Fake:
    """Serves a spec's history (numbers, newest first) through `responses`; `answers` are served first."""

    def __init__(self, spec, mock, count: int):
        self.spec = spec
        self.history = list(range(count, 0, -1))
        self.answers: list[tuple] = []
        self.requests = []
        mock.add_callback(responses.GET, URL_PATTERN[spec.service], callback=self.callback)

    def add(self, count: int) -> None:
        newest = self.history[0] if self.history else 0
        self.history[:0] = range(newest + count, newest, -1)

    def callback(self, request):
        self.requests.append(request)
        if self.answers:
            status, headers, body = self.answers.pop(0)[:3]
        else:
            start = self.spec.start(query(request.url))
            stop = start + self.spec.page_size
            next_start = stop if stop < len(self.history) else None
            status, headers, body = self.spec.render(self.history[start:stop], next_start, request.url)
        return status, headers, body if isinstance(body, str) else json.dumps(body)


def item_type(spec) -> str:
    """The `type` the service's items are stored with (gists keep the original collector's 'github')."""
    cls = Registry().get(spec.service)
    return cls.item_type or cls.name


def setup(spec, db, mock, count: int, **fields):
    base = settings_for_tests()
    settings = base.with_(github_api_url="https://api.github.test", allow_private_hosts=True,
                          raw={**base.raw, **spec.settings})
    doc = add_network(db, service=spec.service, accessToken=TOKEN, **{**spec.network, **fields})
    return Fake(spec, mock, count), settings, doc


def walk(db, settings, doc, passes: int = 10) -> int:
    runs = 0
    for k in range(passes):
        if network(db, doc).get("mode") == "normal":
            break
        runs += run_once(db, "initial", settings, now=T0 + timedelta(seconds=k)).tasks
    return runs


@pytest.fixture(params=SPECS, ids=IDS)
def spec(request):
    return request.param


def test_every_registered_connector_has_a_conformance_spec():
    assert set(Registry().names()) == {spec.service for spec in SPECS}


def test_multi_page_history_is_walked_to_normal(spec, db, http_mock):
    count = spec.page_size * 2 + spec.page_size // 2
    fake, settings, doc = setup(spec, db, http_mock, count)
    assert walk(db, settings, doc) == 3 + spec.ends_on_empty_page
    state = network(db, doc)
    assert state["mode"] == "normal" and state["errors"] == 0
    assert db.items.count_documents({"type": item_type(spec)}) == count == db.items.count_documents({})


def test_normal_run_adds_only_new_items(spec, db, http_mock):
    count = spec.page_size + 5
    fake, settings, doc = setup(spec, db, http_mock, count)
    walk(db, settings, doc)
    fake.add(3)
    before = len(fake.requests)
    report = run_once(db, "normal", settings, now=T0 + timedelta(days=1))
    assert report.tasks == 1 and report.new_items == 3
    assert db.items.count_documents({}) == count + 3
    assert len(fake.requests) - before == 1  # the newest page held every new item


def test_rate_limit_answer_enters_rate_limit_until_the_given_time(spec, db, http_mock):
    fake, settings, doc = setup(spec, db, http_mock, 10)
    *answer, comes_back = spec.rate_limited()
    fake.answers.append(tuple(answer))
    report = run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert report.by_status == {"rateLimit": 1}
    assert state["mode"] == "rateLimit" and state["prevMode"] == "initial"
    assert state["scheduledTo"] == comes_back
    assert state.get("errors", 0) == 0 and "lastError" not in state


def test_unauthorized_answer_marks_the_network(spec, db, http_mock):
    fake, settings, doc = setup(spec, db, http_mock, 10)
    fake.answers.append(spec.unauthorized())
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["unauthorized"] is True and state["lastError"]["kind"] == "unauthorized"
    assert run_once(db, "initial", settings, now=T0 + timedelta(days=1)).tasks == 0


@pytest.mark.parametrize("garbage", ["<html><body>502 Bad Gateway</body></html>", '{"unexpected": true}',
                                     '[{"weird": 1}]', '{"data": [{"id": null}], "items": [7], "feed": [1]}'])
def test_garbage_body_is_an_error_on_that_network_only(spec, db, http_mock, garbage):
    fake, settings, doc = setup(spec, db, http_mock, 10)
    fake.answers.append((200, {}, garbage))
    other = add_network(db, user="other@example.com", service="nosuchservice")
    report = run_once(db, "initial", settings, now=T0)
    assert report.tasks == 2
    state = network(db, doc)
    assert state["errors"] == 1 and state["lastError"]["kind"] == "badResponse"
    assert network(db, other)["lastError"]["kind"] == "unknownService"
    assert db.items.count_documents({}) == 0


def test_no_secret_in_any_url_or_log_record(spec, db, http_mock, caplog):
    fake, settings, doc = setup(spec, db, http_mock, spec.page_size + 3, refreshToken=REFRESH)
    with caplog.at_level(logging.DEBUG):
        walk(db, settings, doc)
        run_once(db, "normal", settings, now=T0 + timedelta(days=1))
    secrets = [TOKEN, REFRESH, *(v for k, v in spec.network.items() if "Secret" in k)]
    assert fake.requests
    for request in fake.requests:
        assert not any(secret in request.url for secret in secrets)
    for record in caplog.records:
        assert not any(secret in record.getMessage() for secret in secrets), record.getMessage()
    if "accessTokenSecret" in spec.network:  # OAuth 1.0a: signed, the token only as oauth_token in the header
        header = fake.requests[0].headers["Authorization"]
        assert (header.decode() if isinstance(header, bytes) else header).startswith("OAuth ")


def test_every_item_has_the_common_fields(spec, db, http_mock):
    fake, settings, doc = setup(spec, db, http_mock, spec.page_size + 7)
    walk(db, settings, doc)
    items = list(db.items.find())
    assert len(items) == spec.page_size + 7
    for item in items:
        assert isinstance(item["itemId"], str) and item["itemId"]
        assert item["type"] == item_type(spec) and item["user"] == "ann@example.com"
        assert item["source"].startswith("https://")
        assert isinstance(item.get("created"), datetime) or isinstance(item.get("likedAt"), datetime)
        assert item.get("title") or item.get("description")
    assert len({item["itemId"] for item in items}) == len(items)


REFRESHABLE = [spec for spec in SPECS if spec.refresh_url]


@pytest.mark.parametrize("spec", REFRESHABLE, ids=[spec.service for spec in REFRESHABLE])
def test_an_expired_token_is_refreshed_once_and_saved(spec, db, http_mock):
    fake, settings, doc = setup(spec, db, http_mock, 5, refreshToken=REFRESH)
    fake.answers.append(spec.expired())
    http_mock.add(responses.POST, spec.refresh_url, json=spec.refreshed())
    report = run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert report.by_status == {"ok": 1}, state.get("lastError")
    assert state["accessToken"] == "new-access-token-0001" and state["refreshToken"] == "new-refresh-token-0001"
    assert len(fake.requests) == 2 and "new-access-token-0001" in fake.requests[1].headers["Authorization"]
    assert db.items.count_documents({}) == 5


@pytest.mark.parametrize("spec", REFRESHABLE, ids=[spec.service for spec in REFRESHABLE])
def test_a_refused_refresh_marks_the_network_unauthorized(spec, db, http_mock):
    fake, settings, doc = setup(spec, db, http_mock, 5, refreshToken=REFRESH)
    fake.answers.append(spec.expired())
    http_mock.add(responses.POST, spec.refresh_url, status=400,
                  json={"error": "invalid_grant", "error_description": "Token has been expired or revoked."})
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["unauthorized"] is True and "refresh refused" in state["lastError"]["message"]
    assert state["accessToken"] == TOKEN


@pytest.mark.parametrize("spec", REFRESHABLE, ids=[spec.service for spec in REFRESHABLE])
def test_refreshed_tokens_are_saved_even_when_the_retry_fails(spec, db, http_mock):
    fake, settings, doc = setup(spec, db, http_mock, 5, refreshToken=REFRESH)
    fake.answers += [spec.expired(), (503, {}, '{"message": "new-access-token-0001 unavailable"}')]
    http_mock.add(responses.POST, spec.refresh_url, json=spec.refreshed())
    run_once(db, "initial", settings, now=T0)
    state = network(db, doc)
    assert state["errors"] == 1
    assert state["accessToken"] == "new-access-token-0001" and state["refreshToken"] == "new-refresh-token-0001"
    assert "new-access-token-0001" not in state["lastError"]["message"]
