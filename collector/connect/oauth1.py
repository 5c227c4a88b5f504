"""OAuth 1.0a (RFC 5849) with a verifier, for Flickr and Tumblr's OAuth 1 networks: a request token (the callback
named), the person's authorisation in the browser, the verifier back on the callback, the access token. Requests
are signed by requests-oauthlib's `OAuth1` and sent by the collectors' HTTP client (wire.py)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

from requests_oauthlib import OAuth1

from ..sdk import Http
from .apps import App
from .errors import DENIED, MALFORMED, STATE, ConnectError
from .oauth2 import Client, refusal
from .wire import hide, post, text_field


@dataclass(frozen=True)
class RequestToken:
    token: str
    secret: str


def request_token(http: Http, app: App, client: Client, callback: str) -> RequestToken:
    auth = OAuth1(client.client_id, client.secret, callback_uri=callback)
    status, body = post(http, app.request_token_url, auth=auth)
    if status != 200:
        raise refusal(app, status, body, app.request_token_url)
    confirmed = body.get("oauth_callback_confirmed")
    if confirmed is not None and str(confirmed).lower() != "true":
        raise ConnectError(MALFORMED, f"{app.service}: the request token's callback was not confirmed")
    url = app.request_token_url
    hide(text_field(body, "oauth_token", url), text_field(body, "oauth_token_secret", url))
    return RequestToken(text_field(body, "oauth_token", url), text_field(body, "oauth_token_secret", url))


def authorize_url(app: App, token: RequestToken) -> str:
    return f"{app.authorize_url}?{urlencode({'oauth_token': token.token, **dict(app.extra)})}"


def read_verifier(app: App, address: str, token: RequestToken) -> str:
    """The verifier from the address the browser ended on: its oauth_token must be this flow's request token."""
    text = address.strip()
    query = dict(parse_qsl(urlsplit(text).query or text.lstrip("?"), keep_blank_values=True))
    if query.get("denied") or query.get("error") == "access_denied":
        raise ConnectError(DENIED, f"{app.service}: access was denied")
    if query.get("oauth_token") != token.token:
        raise ConnectError(
            STATE, f"{app.service}: the answer's token is not this flow's (an old or forged address); nothing saved"
        )
    verifier = query.get("oauth_verifier", "")
    if not verifier:
        raise ConnectError(MALFORMED, f"{app.service}: the address holds no oauth_verifier")
    hide(verifier)
    return verifier


def access_token(http: Http, app: App, client: Client, token: RequestToken, verifier: str) -> dict[str, str]:
    """The network's accessToken and accessTokenSecret."""
    auth = OAuth1(
        client.client_id,
        client.secret,
        resource_owner_key=token.token,
        resource_owner_secret=token.secret,
        verifier=verifier,
    )
    status, body = post(http, app.access_token_url, auth=auth)
    if status != 200:
        raise refusal(app, status, body, app.access_token_url)
    url = app.access_token_url
    found = {
        "accessToken": text_field(body, "oauth_token", url),
        "accessTokenSecret": text_field(body, "oauth_token_secret", url),
    }
    hide(*found.values())
    return found
