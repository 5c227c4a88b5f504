"""The authorisation server the flows are tested against (Authlib's server classes on a real socket,
helpers/authserver.py) with its clients registered, and the collector's HTTP client the flows use."""

from __future__ import annotations

import pytest

from collector.sdk import Http
from collector.settings import settings_for_tests

from helpers.authserver import AuthServer, serving


@pytest.fixture
def server():
    app = AuthServer()
    app.add_client("public-app")
    app.add_client("private-app", secret="s3cr3t-client-value")
    app.store.oauth1_clients["consumer-key"] = "consumer-secret-value"
    with serving(app) as served:
        yield served


@pytest.fixture
def http():
    client = Http(settings_for_tests(allow_private_hosts=True), pool_size=2)
    yield client
    client.close()
