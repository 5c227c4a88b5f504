"""The conformance bar itself: the kit's tests in groups, each group a class made for the specs it runs on (the
`parametrize` mark given). `conformance.py`'s `conformance_tests` puts the groups together."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import responses

from .bodies import break_first_dates, escape_text
from .kit import REFRESH, TOKEN, USER, Kit
from .spec import T0, Answer, Spec

GARBAGE = [
    "<html><body>502 Bad Gateway</body></html>",
    '{"unexpected": true}',
    '{"data": {"id": 1}, "items": "7", "feed": 1, "response": [], "photos": 5}',
    '"just a string"',
]
# secrets a server may quote back: the network's token (known by value), an app key of the settings (by value) and
# two the collector knows only by their shape; each is placed across the places where messages are cut
ECHOED = {"token": TOKEN, "app key": "kit-app-secret-Qw3rTy9", "github": "ghp_" + "Zx8Cv7Bn6M" * 4}
ECHOED["jwt"] = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJraXQtdXNlciJ9.c2lnbmF0dXJlLW9mLWtpdA"
CUTS = (60, 100, 120, 160, 200, 240, 300)


def history_tests(each: Callable) -> type:
    """The tests of a history walked to normal mode, new items added, pages of entries no connector can keep."""

    class HistoryTests:
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

    return HistoryTests


def answer_tests(each: Callable) -> type:
    """The tests of a quota answer, a revoked token, garbage bodies."""

    class AnswersTests:
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

    return AnswersTests


def next_page_tests(each_bad_next: Callable) -> type:
    """The tests of next-page tokens the collector cannot keep (specs with `next_field`)."""

    class NextPageTests:
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

    return NextPageTests


def cursor_tests(each_tokened: Callable) -> type:
    """The tests of a cursor the database refuses (specs with `next_field` and a `refused_cursor`)."""

    class CursorTests:
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

    return CursorTests


def secret_tests(each: Callable) -> type:
    """The tests of no secret in any URL, log record or stored error."""

    class SecretsTests:
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

    return SecretsTests


def item_tests(each: Callable) -> type:
    """The tests of the items stored: text decoded, unreadable dates left empty, the common fields."""

    class ItemsTests:
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

    return ItemsTests


def refresh_tests(each_refreshable: Callable) -> type:
    """The tests of token refresh (specs with a `refresh_url`)."""

    class RefreshTests:
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

    return RefreshTests
