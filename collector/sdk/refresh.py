"""Declarations for what a connector looks up or renews through the API: token refresh (`Connector.token_refresh`)
and the user's own id on the service (`Connector.identity`).

A refresh runs when the API says the access token expired (TokenExpired): once, then the run is retried once;
the new tokens are saved with the state whatever happens next (rotating refresh tokens are spent on use).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .errors import BadResponse, Unauthorized
from .http import where
from .timeutil import after
from .validate import IDENTITY

if TYPE_CHECKING:  # pragma: no cover
    from .job import ConnectorAPI as Connector
    from .job import Job


class TokenRefresh(Protocol):
    def applies(self, job: Job) -> bool: ...

    def refresh(self, connector: Connector, job: Job) -> dict[str, Any]: ...


@dataclass(frozen=True)
class OAuth2Refresh:
    """The standard OAuth 2 refresh-token grant at `token_url`, with the app's client id and secret named by their
    settings, sent as HTTP Basic (`basic_auth=True`, or "if_secret": only when a secret is configured) or in the
    form. `unless_field`: networks having this field do not refresh (Tumblr's OAuth 1.0a networks)."""

    token_url: str
    client_id: str
    client_secret: str
    basic_auth: bool | Literal["if_secret"] = False
    unless_field: str | None = None

    def applies(self, job: Job) -> bool:
        if self.unless_field and job.network.get(self.unless_field):
            return False
        return bool(job.network.get("refreshToken"))

    def refresh(self, connector: Connector, job: Job) -> dict[str, Any]:
        client_id = connector.settings.get(self.client_id)
        secret = connector.settings.get(self.client_secret)
        data = {"grant_type": "refresh_token", "refresh_token": job.network["refreshToken"]}
        basic = self.basic_auth is True or (self.basic_auth == "if_secret" and bool(secret))
        auth = (client_id or "", secret or "") if basic else None
        if not basic:
            data |= {k: v for k, v in (("client_id", client_id), ("client_secret", secret)) if v}
        response = connector.http.post(self.token_url, data=data, auth=auth)
        if response.status_code in (400, 401, 403):
            raise Unauthorized(
                f"token refresh refused: {response.status_code} {connector.reason(response)}: "
                f"POST {where(self.token_url)}",
                response.status_code,
            )
        body, response = connector.parse_json(job, response)
        if not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            raise BadResponse(f"token refresh answer has no access_token: POST {where(self.token_url)}")
        tokens: dict[str, Any] = {"accessToken": body["access_token"]}
        if isinstance(body.get("refresh_token"), str):
            tokens["refreshToken"] = body["refresh_token"]
        expires_in = body.get("expires_in")
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and math.isfinite(expires_in):
            tokens["accessTokenExpiresAt"] = after(job.now, expires_in)
        return tokens


@dataclass(frozen=True)
class IdentityLookup:
    """A network field (the user's name or id on the service) looked up once from `url` when the network lacks
    it, found at `path` in the answer, and saved with the state. It goes into URL paths, so it must be plain."""

    field: str
    url: str
    path: tuple[str, ...]
    recheck_on: tuple[int, ...] = ()  # statuses after which a known value is looked up again, once (a rename)

    def resolve(self, connector: Connector, job: Job) -> str:
        known = job.network.get(self.field)
        if isinstance(known, str) and known:
            return known
        return self.lookup(connector, job)

    def lookup(self, connector: Connector, job: Job) -> str:
        """The value as the service gives it now."""
        body, _ = connector.get_json(job, self.url)
        value: Any = body
        for key in self.path:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str) or not IDENTITY.match(value):
            raise BadResponse(f"{connector.name}: {where(self.url)} gave no usable {self.field}")
        return value
