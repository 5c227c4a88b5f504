"""Shared test helpers, imported as `helpers` (tests/ is on pytest's pythonpath); fixtures are in conftest.py.

The modules beside this one: `helpers.services` (the conformance specs per service), `helpers.rawserver` (a raw
socket server that writes scripted bytes), `helpers.proc` (the collector as a real process). Test modules import
from here and never from one another, so the suite runs the same under `--import-mode=importlib`."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import responses
from hypothesis import settings

from collector.devtools.fakeapi import FakeGitHub, make_stars

API = "https://api.github.test"
STARRED = f"{API}/user/starred"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TOKEN = "ghp_SECRETtoken1234567890"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# the app keys the services of the recorded payloads need (Stack Exchange, Flickr, Tumblr)
KEYS = {
    "STACKEXCHANGE_KEY": "se-key-12345678",
    "FLICKR_API_KEY": "flickr-key-1234",
    "FLICKR_API_SECRET": "fs-12345678",
    "TUMBLR_CONSUMER_KEY": "tumblr-key-1234",
    "TUMBLR_CONSUMER_SECRET": "ts-12345678",
}


def examples(n: int) -> int:
    """A property test's `n` examples, scaled by the hypothesis profile loaded (tests/conftest.py): `n` at the
    usual 100 examples a test, a tenth in the inner loop's "fast" profile (at least 5)."""
    return max(5, n * settings.default.max_examples // 100)


def fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


def add_network(db, **fields) -> dict:
    doc = {"user": "ann@example.com", "service": "github", "accessToken": TOKEN, **fields}
    doc["_id"] = db.networks.insert_one(doc).inserted_id
    return doc


def network(db, doc) -> dict:
    return db.networks.find_one({"_id": doc["_id"]})


class GitHubStub:
    """GitHub's /user/starred served through `responses` by the project's FakeGitHub model, at a fixed clock."""

    def __init__(self, mock, stars=None, token=TOKEN, quota=5000, clock=T0):
        self.fake = FakeGitHub(quota=quota, window=3600)
        self.fake.add_user(token, stars if stars is not None else make_stars(250, seed=1))
        self.clock = clock
        self.requests = []
        mock.add_callback(responses.GET, STARRED, callback=self.callback)

    def callback(self, request):
        self.requests.append(request)
        auth = request.headers.get("Authorization", "")
        token = auth.split(" ", 1)[1] if " " in auth else None
        query = parse_qs(urlsplit(request.url).query)
        status, headers, body = self.fake.handle(
            token, query, API, self.clock.timestamp(), request.headers.get("If-None-Match")
        )
        if body is None:
            return status, headers, ""
        return status, headers, body.decode() if isinstance(body, bytes) else json.dumps(body)


def starred_headers(remaining=4999, reset=T0 + timedelta(hours=1), link=None) -> dict:
    headers = {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": str(remaining),
        "x-ratelimit-reset": str(int(reset.timestamp())),
    }
    if link:
        headers["Link"] = link
    return headers


def settings_interval(name: str):
    from collector.settings import settings_for_tests

    return timedelta(seconds=getattr(settings_for_tests(), name))


class FixedRefresh:
    """A token-refresh declaration for test connectors: always answers with the same tokens."""

    def __init__(self, tokens: dict):
        self.tokens = tokens

    def applies(self, job) -> bool:
        return bool(job.network.get("refreshToken"))

    def refresh(self, connector, job) -> dict:
        return dict(self.tokens)


def swap(make):
    """A settings file replaced by something else under the same name (a directory, a pipe, a link...)."""
    return lambda path: (path.unlink(), make(path))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS's pick; closed again before returning)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bind_socket(path) -> None:
    """A Unix socket at `path`: a file that is not a regular one."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


class BulkCollection:
    """A pymongo-like collection over mongomock's, with bulk_write as pymongo has it (mongomock 4.3's
    bulk_write of UpdateOne fails under pymongo >= 4.11)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def bulk_write(self, ops, ordered=True):
        matched = sum(self.inner.update_one(op._filter, op._doc).matched_count for op in ops)
        return type("Result", (), {"matched_count": matched})()
