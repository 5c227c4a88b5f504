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
