from __future__ import annotations

import mongomock
import pytest
import responses
from helpers import API

from collector.settings import testing_settings


@pytest.fixture
def db():
    return mongomock.MongoClient(tz_aware=True)["likeastore_test"]


@pytest.fixture
def settings():
    return testing_settings(github_api_url=API)


@pytest.fixture
def http_mock():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock
