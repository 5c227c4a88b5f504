"""The shipped conformance kit run the way a third-party connector package would: its own connector, its own
fixtures, its own registry — none of the project's specs or fixtures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from collector.engine.registry import Registry
from collector.sdk import BadResponse, Item, PagedConnector, PageNumber, body_true, parse_iso
from collector.testing import T0, Spec, conformance_tests


class PinsConnector(PagedConnector):
    """A made-up third-party service: GET /v1/pins?page=N → {"pins": [...], "more": bool}."""

    name = "pins"
    endpoint = "https://api.pins.test/v1/pins"
    paging = PageNumber(body_true("more"), size=25)
    entries = ("pins",)

    def check_body(self, job, response, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("pins"), list):
            raise BadResponse("expected {'pins': [...]}")

    def map(self, pin: Any) -> Item:
        return {
            "itemId": str(pin["id"]),
            "source": pin["url"],
            "title": pin["title"],
            "likedAt": parse_iso(pin["pinned_at"]),
        }


class PinsSpec(Spec):
    service, url, page_size = "pins", "https://api.pins.test/v1/pins", 25

    def render(self, numbers, next_start, url):
        pins = [
            {
                "id": n,
                "url": f"https://pins.test/{n}",
                "title": f"Pin {n}",
                "pinned_at": (datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=n)).isoformat(),
            }
            for n in numbers
        ]
        return 200, {"X-RateLimit-Remaining": "99"}, {"pins": pins, "more": next_start is not None}

    def rate_limited(self):
        return 429, {"Retry-After": "120"}, {"error": "slow down"}, T0 + timedelta(seconds=120)

    def unauthorized(self):
        return 401, {}, {"error": "token revoked"}


TestThirdPartyConnector = conformance_tests([PinsSpec()], registry=Registry({"pins": PinsConnector}))


def test_the_kit_has_no_refresh_tests_for_a_service_without_refresh():
    tests = [name for name in dir(TestThirdPartyConnector) if name.startswith("test_")]
    assert "test_multi_page_history_is_walked_to_normal" in tests  # the class's own and its groups' tests
    assert not [name for name in tests if "refresh" in name]
