from __future__ import annotations

import mongomock
import pytest
import responses

from collector.settings import settings_for_tests

from helpers import API


@pytest.fixture
def db():
    return mongomock.MongoClient(tz_aware=True)["likeastore_test"]


@pytest.fixture
def settings():
    return settings_for_tests(github_api_url=API)


@pytest.fixture
def http_mock():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def cli_db(monkeypatch, tmp_path):
    """The database the command line connects to: mongomock, injected where the CLI makes its client."""
    from collector.engine import store

    client = mongomock.MongoClient("mongodb://localhost:27017/likeastore_test", tz_aware=True)
    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: client)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    return client.get_default_database()
