"""The conformance kit's workbench: `Fake`, a spec's history served through `responses`, and `Kit`, the database,
settings, network and runs of one test."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import mongomock
import responses

from ..engine import run_once
from ..engine.registry import Registry
from ..settings import settings_for_tests
from .bodies import replace_at
from .spec import T0, Answer, Spec

TOKEN = "conformance-access-token-0001"
REFRESH = "conformance-refresh-token-0001"
USER = "ann@example.com"


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


class _Altered:
    """A spec whose pages come back altered (every other answer as the spec gives it)."""

    def __init__(self, spec: Spec, render: Any):
        self._spec, self.render = spec, render

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spec, name)
