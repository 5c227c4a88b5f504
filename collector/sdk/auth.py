"""How a connector's requests carry credentials, declared once per connector (`Connector.authentication`).

Each declaration is called with the connector and the job and returns a `requests.auth.AuthBase`, which requests
applies to every request (and re-applies, or drops, on redirects to another host). Tokens therefore never appear
in a connector's code, a URL or a log line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import requests
from requests.auth import AuthBase
from requests_oauthlib import OAuth1

from ._bearer import BearerAuth

if TYPE_CHECKING:  # pragma: no cover
    from .job import ConnectorAPI as Connector
    from .job import Job


class Authentication(Protocol):
    def __call__(self, connector: Connector, job: Job) -> AuthBase: ...


class QueryParamAuth(AuthBase):
    """An app key the API accepts only in the query string (Stack Exchange's `key`)."""

    def __init__(self, name: str, value: str):
        self.name, self.value = name, value

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.prepare_url(request.url, {self.name: self.value})
        return request


class AllOf(AuthBase):
    def __init__(self, *parts: AuthBase):
        self.parts = parts

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        for part in self.parts:
            request = part(request)
        return request


@dataclass(frozen=True)
class Bearer:
    """The network's accessToken as a Bearer token (`scheme` for APIs that want another spelling)."""

    scheme: str = "Bearer"

    def __call__(self, connector: Connector, job: Job) -> AuthBase:
        return BearerAuth(job.token, self.scheme)


@dataclass(frozen=True)
class OAuth1Signed:
    """OAuth 1.0a signatures (requests-oauthlib), with the app's key and secret named by their settings and the
    network's accessToken / accessTokenSecret."""

    consumer_key: str
    consumer_secret: str

    def __call__(self, connector: Connector, job: Job) -> AuthBase:
        return OAuth1(
            connector.setting(self.consumer_key),
            connector.setting(self.consumer_secret),
            resource_owner_key=job.token,
            resource_owner_secret=job.network["accessTokenSecret"],
            signature_type="auth_header",
        )


@dataclass(frozen=True)
class OAuth1OrBearer:
    """OAuth 1.0a for networks that have an accessTokenSecret, else a Bearer token (Tumblr has both kinds)."""

    oauth1: OAuth1Signed
    bearer: Bearer = field(default_factory=Bearer)

    def __call__(self, connector: Connector, job: Job) -> AuthBase:
        secret = job.network.get("accessTokenSecret")
        return self.oauth1(connector, job) if isinstance(secret, str) and secret else self.bearer(connector, job)


@dataclass(frozen=True)
class WithAppKey:
    """Another declaration, plus the app key from a setting as a query parameter."""

    inner: Authentication
    param: str
    setting: str

    def __call__(self, connector: Connector, job: Job) -> AuthBase:
        return AllOf(self.inner(connector, job), QueryParamAuth(self.param, connector.setting(self.setting)))
