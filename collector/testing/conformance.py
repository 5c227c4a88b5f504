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

The kit's parts: `spec.py` (what a package writes), `kit.py` (the fake API and the pieces of one test), `bodies.py`
(pages spoiled the ways answers go wrong), `bar.py` (the tests, in groups); this module puts them together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import responses

from ..engine.registry import Registry
from .bar import (
    CUTS,
    ECHOED,
    GARBAGE,
    answer_tests,
    cursor_tests,
    history_tests,
    item_tests,
    next_page_tests,
    refresh_tests,
    secret_tests,
)
from .bodies import DATE_KEYS, EPOCH_KEYS, ESCAPED_KEYS, break_first_dates, escape_text, replace_at
from .kit import REFRESH, TOKEN, USER, Fake, Kit, query
from .spec import T0, UNKEEPABLE_TOKENS, UNREADABLE_SIGNALS, UNUSABLE, Answer, Spec

__all__ = [
    "CUTS",
    "DATE_KEYS",
    "ECHOED",
    "EPOCH_KEYS",
    "ESCAPED_KEYS",
    "GARBAGE",
    "REFRESH",
    "T0",
    "TOKEN",
    "UNKEEPABLE_TOKENS",
    "UNREADABLE_SIGNALS",
    "UNUSABLE",
    "USER",
    "Answer",
    "Fake",
    "Kit",
    "Spec",
    "break_first_dates",
    "conformance_tests",
    "escape_text",
    "query",
    "replace_at",
]


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
    # nothing of a kind to test (no token refresh, no spec saying where its next page is): no test at all,
    # rather than a skipped one
    groups = [history_tests(each), answer_tests(each)]
    groups += [next_page_tests(each_bad_next)] if paged else []
    groups += [cursor_tests(each_tokened)] if tokened else []
    groups += [secret_tests(each), item_tests(each)]
    groups += [refresh_tests(each_refreshable)] if refreshable else []

    class ConformanceTests(*groups):  # type: ignore[misc]
        @pytest.fixture
        def kit(self, request: Any):
            with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
                yield Kit(request.getfixturevalue("spec"), registry, mock)

    return ConformanceTests
