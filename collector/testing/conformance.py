"""The connector conformance kit: the bar every connector must pass, shipped so that a third-party connector
package can run it on its own connector with its own fixtures (like `singer_sdk.testing`).

    from collector.testing import Spec, conformance_tests

    class MyServiceSpec(Spec):
        service, url, page_size = "myservice", "https://api.myservice.test/me/likes", 50
        def render(self, numbers, next_start, url): ...   # a page of the history, in the API's real shape
        def rate_limited(self): ...                        # a quota answer, and when the network comes back
        def unauthorized(self): ...                        # a revoked-token answer

    TestMyService = conformance_tests([MyServiceSpec()])

It needs pytest, responses and mongomock (the collector's `test` extra). Every test runs the real engine
(`run_once`) against a mongomock database and the spec's fake API: a multi-page history walked to normal mode, a
normal run that adds only new items, a rate-limit answer, a revoked token, garbage bodies (an error on that
network only), a first and a last page of unusable entries walked past, no secret in any URL or log record, the
common item fields, token refresh for specs with a `refresh_url`, and for specs that set `next_field` and
`with_next`, unkeepable next-page tokens and a cursor the database refuses (errors on that network alone, the
walk left where it was).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import mongomock
import pytest
import responses

from ..engine import run_once
from ..engine.registry import Registry
from ..settings import settings_for_tests

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TOKEN = "conformance-access-token-0001"
REFRESH = "conformance-refresh-token-0001"
USER = "ann@example.com"
GARBAGE = [
    "<html><body>502 Bad Gateway</body></html>",
    '{"unexpected": true}',
    '{"data": {"id": 1}, "items": "7", "feed": 1, "response": [], "photos": 5}',
    '"just a string"',
]
Answer = tuple[int, dict, Any]
# next-page tokens the collector cannot keep as a cursor, and "more?" signals it cannot read (collector/sdk/paging.py)
UNKEEPABLE_TOKENS = ({"after": "x"}, ["x"], True, False, 1.5, 2**64, -1, "x" * 3000, "a\x00b")
UNREADABLE_SIGNALS = ({"more": True}, 1.5, 7, 2**64)
UNUSABLE = 7  # an entry no connector can map
# secrets a server may quote back: the network's token (known by value), an app key of the settings (by value) and
# two the collector knows only by their shape; each is placed across the places where messages are cut
ECHOED = {"token": TOKEN, "app key": "kit-app-secret-Qw3rTy9", "github": "ghp_" + "Zx8Cv7Bn6M" * 4}
ECHOED["jwt"] = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJraXQtdXNlciJ9.c2lnbmF0dXJlLW9mLWtpdA"
CUTS = (60, 100, 120, 160, 200, 240, 300)


class Spec:
    """A service's fake API for the kit: a history of numbered items (a larger number is newer), served in pages
    of the real API's shape."""

    service: str
    url: str  # the list endpoint, without query
    page_size: int
    network: dict = {}  # more network fields the connector needs
    settings: dict = {}  # settings (app keys) the connector needs
    refresh_url: str | None = None  # token endpoint, for services whose tokens expire
    ends_on_empty_page = False  # the service's end-of-list signal is an empty page (one more request)
    # where a page says what comes next, for specs that implement `with_next` (None: a Link header, no value)
    next_field: str | None = None
    next_values: tuple = UNKEEPABLE_TOKENS  # values there that must fail the run (UNREADABLE_SIGNALS for flags)
    refused_cursor: Any = "\ud800x"  # a token of the right type the database cannot store (a lone surrogate)

    def start(self, query: dict[str, str]) -> int:
        """Where the requested page starts in the history (default: `page` numbers from 1)."""
        return (int(query.get("page", 1)) - 1) * self.page_size

    def render(self, numbers: list[int], next_start: int | None, url: str) -> Answer:
        raise NotImplementedError

    def rate_limited(self) -> tuple[int, dict, Any, datetime]:
        """A quota answer, and when the network must come back."""
        raise NotImplementedError

    def unauthorized(self) -> Answer:
        raise NotImplementedError

    def error_answer(self, message: str) -> Answer:
        """An error answer carrying `message` where the service puts its own error text."""
        return 400, {}, {"message": message}

    def unusable_entry(self, entry: Any) -> Any:
        """An entry of the service's list that no connector can keep, in place of `entry` (default: a number);
        a spec whose paging reads something of each entry keeps that (Tumblr: the like's time)."""
        return UNUSABLE

    def with_next(self, answer: Answer, value: Any) -> Answer:
        """`answer`, a first page with more after it, with `value` where its next-page token (or its "more?"
        signal) goes. Implement it, with `next_field`, wherever the page carries one."""
        raise NotImplementedError

    def expired(self) -> Answer:
        return self.unauthorized()

    def refreshed(self) -> dict:
        """The token endpoint's answer."""
        return {
            "access_token": "new-access-token-0001",
            "refresh_token": "new-refresh-token-0001",
            "expires_in": 3600,
            "token_type": "bearer",
        }


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


class Fake:
    """Serves a spec's history (numbers, newest first) through `responses`; `answers` are served first."""

    def __init__(self, spec: Spec, mock: responses.RequestsMock, count: int):
        self.spec = spec
        self.history = list(range(count, 0, -1))
        self.answers: list[tuple] = []
        self.requests: list[Any] = []
        mock.add_callback(responses.GET, re.compile(re.escape(spec.url) + r"(\?.*)?$"), callback=self.callback)

    def add(self, count: int) -> None:
        newest = self.history[0] if self.history else 0
        self.history[:0] = range(newest + count, newest, -1)

    def callback(self, request: Any) -> tuple[int, dict, str]:
        self.requests.append(request)
        if self.answers:
            status, headers, body = self.answers.pop(0)[:3]
        else:
            start = self.spec.start(query(request.url))
            stop = start + self.spec.page_size
            next_start = stop if stop < len(self.history) else None
            status, headers, body = self.spec.render(self.history[start:stop], next_start, request.url)
        return status, headers, body if isinstance(body, str) else json.dumps(body)


class Kit:
    """The pieces of one conformance test: a database, the fake API, settings and the network under test."""

    def __init__(self, spec: Spec, registry: Registry | None, mock: responses.RequestsMock):
        self.spec, self.registry, self.mock = spec, registry, mock
        self.db: Any = mongomock.MongoClient(tz_aware=True)["conformance"]
        base = settings_for_tests()
        self.settings = base.with_(
            github_api_url="https://api.github.test", allow_private_hosts=True, raw={**base.raw, **spec.settings}
        )

    def setup(self, count: int, **fields: Any) -> Fake:
        doc = {"user": USER, "service": self.spec.service, "accessToken": TOKEN, **self.spec.network, **fields}
        self.network_id = self.db.networks.insert_one(doc).inserted_id
        return Fake(self.spec, self.mock, count)

    def setup_altered(self, count: int, alter: Any) -> Fake:
        """As `setup`, with every page of the history passed through `alter(body)` (other answers as they are)."""
        return self.setup_pages(count, lambda numbers, next_start, answer: (*answer[:2], alter(answer[2])))

    def add_network(self, **fields: Any) -> Any:
        return self.db.networks.insert_one({"user": USER, "accessToken": TOKEN, **fields}).inserted_id

    def network(self, network_id: Any = None) -> Any:
        return self.db.networks.find_one({"_id": network_id or self.network_id})

    def run(self, mode: str, now: datetime = T0):
        options: dict[str, Any] = {"registry": self.registry} if self.registry is not None else {}
        return run_once(self.db, mode, self.settings, now=now, **options)

    def walk(self, passes: int = 10, start: datetime = T0) -> int:
        runs = 0
        for k in range(passes):
            if self.network().get("mode") == "normal":
                break
            runs += self.run("initial", start + timedelta(seconds=k)).tasks
        return runs

    def setup_pages(self, count: int, alter: Callable[[list[int], int | None, Answer], Answer]) -> Fake:
        """As `setup`, every page of the history passed through `alter(numbers, next_start, answer)`."""
        fake = self.setup(count)
        render = self.spec.render

        def altered(numbers: list[int], next_start: int | None, url: str) -> Answer:
            status, headers, body = render(numbers, next_start, url)[:3]
            return alter(numbers, next_start, (status, headers, body))

        fake.spec = cast(Spec, _Altered(self.spec, altered))
        return fake

    def first_page(self, fake: Fake) -> Answer:
        """The history's first page as the spec renders it, with more after it."""
        status, headers, body = self.spec.render(
            fake.history[: self.spec.page_size], self.spec.page_size, self.spec.url
        )
        return status, headers, body

    def unusable(self, answer: Answer) -> Answer:
        """`answer` with every entry of its list replaced by one no connector can map."""
        cls = (self.registry or Registry()).get(self.spec.service)
        path: tuple[str, ...] = getattr(cls, "entries", ())
        status, headers, body = answer
        return status, headers, replace_at(body, path, lambda entries: [self.spec.unusable_entry(e) for e in entries])

    def item_type(self) -> str:
        cls = (self.registry or Registry()).get(self.spec.service)
        return cls.item_type or cls.name


ESCAPED_KEYS = {"title", "description", "text", "body", "selftext", "content", "caption", "summary", "link_title"}
ESCAPED_KEYS |= {"name", "spoiler_text"}


def escape_text(body: Any, key: str | None = None) -> Any:
    """A body with every text value of a text-bearing key given an HTML-escaped tail (`&amp; &lt;i&gt;`)."""
    if isinstance(body, dict):
        return {k: escape_text(v, k) for k, v in body.items()}
    if isinstance(body, list):
        return [escape_text(v, key) for v in body]
    if isinstance(body, str) and key in ESCAPED_KEYS and body:
        return body + " &amp; &lt;i&gt;"
    return body


DATE_KEYS = {"created_at", "starred_at", "publishedAt", "created_time", "added_at", "createdAt", "published_at"}
EPOCH_KEYS = {"creation_date", "created_utc", "dateupload", "date_faved"}


def break_first_dates(body: Any) -> Any:
    """A page whose first entry (the newest) carries unreadable dates: every date-bearing key inside it."""

    def spoil(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: spoil(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [spoil(v, key) for v in value]
        if key in DATE_KEYS and isinstance(value, str):
            return "2024-00-10T25:61:00Z"
        if key in EPOCH_KEYS and isinstance(value, int | float | str):
            return "not a time"
        return value

    def first(value: Any) -> Any:
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [spoil(value[0]), *value[1:]]
        if isinstance(value, dict):
            return {k: first(v) for k, v in value.items()}
        return value

    return first(body)


def replace_at(body: Any, path: tuple[str, ...], change: Callable[[Any], Any]) -> Any:
    """A copy of `body` with the value at `path` (the whole body for an empty path) passed through `change`."""
    if not path:
        return change(body)
    return {**body, path[0]: replace_at(body[path[0]], path[1:], change)}


class _Altered:
    """A spec whose pages come back altered (every other answer as the spec gives it)."""

    def __init__(self, spec: Spec, render: Any):
        self._spec, self.render = spec, render

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spec, name)


def conformance_tests(specs: list[Spec], registry: Registry | None = None) -> type:
    """A pytest test class running the whole bar on each spec (assign it to a `Test…` name in a test module).
    `registry`: where the connectors come from (default: the installed entry points)."""
    ids = [f"{spec.service}-{type(spec).__name__}" for spec in specs]
    refreshable = [spec for spec in specs if spec.refresh_url]
    each: Callable = pytest.mark.parametrize("spec", specs, ids=ids)
    each_refreshable: Callable = pytest.mark.parametrize("spec", refreshable, ids=[s.service for s in refreshable])
    paged = [(spec, value) for spec in specs if spec.next_field for value in spec.next_values]
    each_bad_next: Callable = pytest.mark.parametrize(
        ("spec", "value"), paged, ids=[f"{spec.service}-{type(spec).__name__}-{n}" for n, (spec, _) in enumerate(paged)]
    )
    tokened = [spec for spec in specs if spec.next_field and spec.refused_cursor is not None]
    each_tokened: Callable = pytest.mark.parametrize("spec", tokened, ids=[type(s).__name__ for s in tokened])

    class ConformanceTests:
        @pytest.fixture
        def kit(self, request: Any):
            with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
                yield Kit(request.getfixturevalue("spec"), registry, mock)

        @each
        def test_multi_page_history_is_walked_to_normal(self, spec: Spec, kit: Kit) -> None:
            count = spec.page_size * 2 + spec.page_size // 2
            kit.setup(count)
            assert kit.walk() == 3 + spec.ends_on_empty_page
            state = kit.network()
            assert state["mode"] == "normal" and state["errors"] == 0
            assert kit.db.items.count_documents({"type": kit.item_type()}) == count == kit.db.items.count_documents({})

        @each
        def test_normal_run_adds_only_new_items(self, spec: Spec, kit: Kit) -> None:
            count = spec.page_size + 5
            fake = kit.setup(count)
            kit.walk()
            fake.add(3)
            before = len(fake.requests)
            report = kit.run("normal", T0 + timedelta(days=1))
            assert report.tasks == 1 and report.new_items == 3
            assert kit.db.items.count_documents({}) == count + 3
            assert len(fake.requests) - before == 1  # the newest page held every new item

        @each
        def test_rate_limit_answer_enters_rate_limit_until_the_given_time(self, spec: Spec, kit: Kit) -> None:
            fake = kit.setup(10)
            *answer, comes_back = spec.rate_limited()
            fake.answers.append(tuple(answer))
            report = kit.run("initial")
            state = kit.network()
            assert report.by_status == {"rateLimit": 1}
            assert state["mode"] == "rateLimit" and state["prevMode"] == "initial"
            assert state["scheduledTo"] == comes_back
            assert state.get("errors", 0) == 0 and "lastError" not in state

        @each
        def test_unauthorized_answer_marks_the_network(self, spec: Spec, kit: Kit) -> None:
            fake = kit.setup(10)
            fake.answers.append(spec.unauthorized())
            kit.run("initial")
            state = kit.network()
            assert state["unauthorized"] is True and state["lastError"]["kind"] == "unauthorized"
            assert kit.run("initial", T0 + timedelta(days=1)).tasks == 0

        @each
        @pytest.mark.parametrize("garbage", GARBAGE)
        def test_garbage_body_is_an_error_on_that_network_only(self, spec: Spec, kit: Kit, garbage: str) -> None:
            fake = kit.setup(10)
            fake.answers.append((200, {}, garbage))
            other = kit.add_network(service="nosuchservice")
            report = kit.run("initial")
            assert report.tasks == 2
            state = kit.network()
            assert state["errors"] == 1 and state["lastError"]["kind"] == "badResponse"
            assert kit.network(other)["lastError"]["kind"] == "unknownService"
            assert kit.db.items.count_documents({}) == 0

        @each
        @pytest.mark.parametrize("which", ["first", "last"])
        def test_a_page_of_entries_it_cannot_keep_is_counted_and_the_walk_goes_on(
            self, spec: Spec, kit: Kit, which: str
        ) -> None:
            """Entries never end a walk nor fail a page: all of a page unusable, they are skipped and counted; the
            first page leads on to the next, the last one ends the walk normally."""
            count = spec.page_size * 2 + 3

            def spoil(numbers: list[int], next_start: int | None, answer: Answer) -> Answer:
                first = numbers[:1] == [count]
                last = next_start is None and bool(numbers)
                return kit.unusable(answer) if (first if which == "first" else last) else answer

            kit.setup_pages(count, spoil)
            kit.walk()
            state = kit.network()
            spoiled = spec.page_size if which == "first" else 3
            assert state["mode"] == "normal" and state.get("errors", 0) == 0, state.get("lastError")
            assert state["skippedItems"] == spoiled and "lastError" not in state
            assert kit.db.items.count_documents({}) == count - spoiled

        @each_bad_next
        def test_a_next_page_token_it_cannot_keep_fails_the_run_and_the_walk_stays(
            self, spec: Spec, kit: Kit, value: Any
        ) -> None:
            """An unkeepable token (or an unreadable "more?" signal) is never taken for the end of the list: the
            run is a badResponse naming the field, nothing moves, and the next answer walks on from there."""
            fake = kit.setup(spec.page_size * 2)
            fake.answers.append(spec.with_next(kit.first_page(fake), value))
            report = kit.run("initial")
            state = kit.network()
            assert report.by_status == {"badResponse": 1}
            assert spec.next_field in state["lastError"]["message"], state["lastError"]["message"]
            assert state.get("mode", "initial") == "initial" and not state.get("cursor") and not state.get("page")
            assert kit.db.items.count_documents({}) == 0
            kit.walk(start=T0 + timedelta(hours=1))
            assert kit.network()["mode"] == "normal" and kit.db.items.count_documents({}) == spec.page_size * 2

        @each_tokened
        def test_a_cursor_the_database_refuses_fails_that_network_and_the_others_are_saved(
            self, spec: Spec, kit: Kit
        ) -> None:
            fake = kit.setup(spec.page_size * 2)
            fake.answers.append(spec.with_next(kit.first_page(fake), spec.refused_cursor))
            other = kit.add_network(service=spec.service, user="bo@example.com", **spec.network)
            report = kit.run("initial")
            assert report.by_status == {"badResponse": 1, "ok": 1}
            bad, good = sorted([kit.network(), kit.network(other)], key=lambda n: "lastError" not in n)
            assert bad["lastError"]["kind"] == "badResponse" and "cursor" in bad["lastError"]["message"]
            assert bad.get("cursor") is None and kit.db.items.count_documents({"user": bad["user"]}) == 0
            assert good.get("cursor") or good.get("page"), good
            assert kit.db.items.count_documents({"user": good["user"]}) == spec.page_size

        @each
        @pytest.mark.parametrize("secret", sorted(ECHOED))
        def test_a_secret_a_server_quotes_across_a_cut_leaves_no_piece(
            self, spec: Spec, kit: Kit, secret: str, caplog: Any
        ) -> None:
            """An error answer quoting a secret so that it straddles every length a message may be cut to: the
            message is masked, then cut, so no piece of the secret (8 characters or more) reaches the network's
            lastError or any log record."""
            value = ECHOED[secret]
            kit.settings = kit.settings.with_(raw={**kit.settings.raw, "KIT_APP_SECRET": ECHOED["app key"]})
            fake = kit.setup(5)
            pieces = {value[i : i + 8] for i in range(len(value) - 7)}
            for cut in CUTS:
                fake.answers.append(spec.error_answer("." * (cut - len(value) // 2) + value + " and after it"))
            with caplog.at_level(logging.DEBUG):
                for k, _ in enumerate(CUTS):
                    kit.run("initial", T0 + timedelta(days=k))
                    state = kit.network()
                    assert state["lastError"]["kind"] in ("badResponse", "unauthorized"), state["lastError"]
                    texts = [str(state["lastError"]), *(r.getMessage() + (r.exc_text or "") for r in caplog.records)]
                    leaked = [text for text in texts for piece in pieces if piece in text]
                    assert not leaked, leaked[:1]
                    reset = {"$set": {"scheduledTo": T0, "errors": 0}, "$unset": {"disabled": "", "unauthorized": ""}}
                    kit.db.networks.update_one({"_id": kit.network_id}, reset)

        @each
        def test_no_secret_in_any_url_or_log_record(self, spec: Spec, kit: Kit, caplog: Any) -> None:
            fake = kit.setup(spec.page_size + 3, refreshToken=REFRESH)
            with caplog.at_level(logging.DEBUG):
                kit.walk()
                kit.run("normal", T0 + timedelta(days=1))
            secrets = [TOKEN, REFRESH, *(v for k, v in spec.network.items() if "Secret" in k)]
            assert fake.requests
            for request in fake.requests:
                assert not any(secret in request.url for secret in secrets)
            for record in caplog.records:
                assert not any(secret in record.getMessage() for secret in secrets), record.getMessage()
            if "accessTokenSecret" in spec.network:  # OAuth 1.0a: signed, the token only as oauth_token
                header = fake.requests[0].headers["Authorization"]
                assert (header.decode() if isinstance(header, bytes) else header).startswith("OAuth ")

        @each
        def test_text_sent_html_escaped_is_stored_decoded(self, spec: Spec, kit: Kit) -> None:
            """X sends `text` HTML-escaped; any service may: every text field of every item is decoded."""
            kit.setup_altered(3, escape_text)
            kit.walk()
            items = list(kit.db.items.find())
            assert items
            texts = [str(item.get(f) or "") for item in items for f in ("title", "description", "authorName", "name")]
            assert not any("&amp;" in t or "&lt;" in t for t in texts), texts
            assert any("& <i>" in t for t in texts), texts

        @each
        def test_an_entry_whose_dates_cannot_be_read_is_kept_with_them_empty(self, spec: Spec, kit: Kit) -> None:
            """Month 0, an hour 25, text where epoch seconds belong: the entry is kept, those dates empty."""
            kit.setup_altered(spec.page_size + 3, break_first_dates)
            kit.walk()
            assert kit.db.items.count_documents({}) == spec.page_size + 3

        @each
        def test_every_item_has_the_common_fields(self, spec: Spec, kit: Kit) -> None:
            kit.setup(spec.page_size + 7)
            kit.walk()
            items = list(kit.db.items.find())
            assert len(items) == spec.page_size + 7
            for item in items:
                assert isinstance(item["itemId"], str) and item["itemId"]
                assert item["type"] == kit.item_type() and item["user"] == USER
                assert item["source"].startswith("https://")
                assert isinstance(item.get("created"), datetime) or isinstance(item.get("likedAt"), datetime)
                assert item.get("title") or item.get("description")
            assert len({item["itemId"] for item in items}) == len(items)

        @each_refreshable
        def test_an_expired_token_is_refreshed_once_and_saved(self, spec: Spec, kit: Kit) -> None:
            fake = kit.setup(5, refreshToken=REFRESH)
            fake.answers.append(spec.expired())
            kit.mock.add(responses.POST, spec.refresh_url, json=spec.refreshed())
            report = kit.run("initial")
            state = kit.network()
            assert report.by_status == {"ok": 1}, state.get("lastError")
            assert state["accessToken"] == "new-access-token-0001"
            assert state["refreshToken"] == "new-refresh-token-0001"
            assert len(fake.requests) == 2 and "new-access-token-0001" in fake.requests[1].headers["Authorization"]
            assert kit.db.items.count_documents({}) == 5

        @each_refreshable
        def test_a_refused_refresh_marks_the_network_unauthorized(self, spec: Spec, kit: Kit) -> None:
            fake = kit.setup(5, refreshToken=REFRESH)
            fake.answers.append(spec.expired())
            kit.mock.add(
                responses.POST,
                spec.refresh_url,
                status=400,
                json={"error": "invalid_grant", "error_description": "Token has been expired or revoked."},
            )
            kit.run("initial")
            state = kit.network()
            assert state["unauthorized"] is True and "refresh refused" in state["lastError"]["message"]
            assert state["accessToken"] == TOKEN

        @each_refreshable
        def test_refreshed_tokens_are_saved_even_when_the_retry_fails(self, spec: Spec, kit: Kit) -> None:
            fake = kit.setup(5, refreshToken=REFRESH)
            fake.answers += [spec.expired(), (503, {}, '{"message": "new-access-token-0001 unavailable"}')]
            kit.mock.add(responses.POST, spec.refresh_url, json=spec.refreshed())
            kit.run("initial")
            state = kit.network()
            assert state["errors"] == 1
            assert state["accessToken"] == "new-access-token-0001"
            assert state["refreshToken"] == "new-refresh-token-0001"
            assert "new-access-token-0001" not in state["lastError"]["message"]

    # nothing of a kind to test (no token refresh, no spec saying where its next page is): no test at all,
    # rather than a skipped one
    absent = {"refresh": not refreshable, "next_page_token": not paged, "cursor_the_database": not tokened}
    for name in [n for n in vars(ConformanceTests) if n.startswith("test_")]:
        if any(absent[part] and part in name for part in absent):
            delattr(ConformanceTests, name)
    return ConformanceTests
