"""The two services whose flow starts with a step of their own:

- Mastodon: the application is registered on the person's instance (POST /api/v1/apps) the first time, and
  remembered per instance in the `connectApps` collection (`_id` the instance's address: `clientId`,
  `clientSecret`, `redirectUri`, `scopes`, `createdAt`), so that every later connect on that instance reuses it;
  then the authorisation code with PKCE. The client secret is a secret: never printed, never logged.
- Bluesky: the person's handle and an app password (read from standard input, never the command line) exchanged
  for a session (com.atproto.server.createSession); the network keeps the access and refresh JWTs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ..ops.appsecrets import Keys, opened_secret, sealed_secret
from ..sdk import Http, Malformed, NetworkError, safe_base_url
from ..textout import printable
from .errors import MALFORMED, REFUSED, SETTINGS, UNREACHABLE, ConnectError
from .oauth2 import Client
from .wire import hide, post, server_error, text_field

APPS = "connectApps"  # the collection of the applications registered on instances
APP_NAME = "likeastore collector"
DEFAULT_PDS = "https://bsky.social"


def base_url(value: str, what: str, allow_private: bool) -> str:
    """An instance's (or a PDS's) https address, plain; anything else is one line naming the option."""
    try:
        return safe_base_url(value, what, allow_private)
    except Malformed as exc:
        raise ConnectError(SETTINGS, f"--{what}: {exc.message}") from None
    except NetworkError as exc:  # its name did not resolve
        raise ConnectError(UNREACHABLE, f"--{what}: {printable(exc.message)}") from None


@dataclass(frozen=True)
class Registered:
    client: Client
    redirect_uri: str


def known_app(db: Any, instance: str, keys: Keys | None = None) -> Registered | None:
    """The application registered on `instance` before, if its document is usable (its secret sealed with
    TOKEN_KEY opened with `keys`)."""
    doc = db[APPS].find_one({"_id": instance})
    if not isinstance(doc, dict):
        return None
    client_id, secret, redirect = (doc.get(k) for k in ("clientId", "clientSecret", "redirectUri"))
    if not (isinstance(client_id, str) and isinstance(secret, str) and isinstance(redirect, str)):
        return None
    if not (client_id and secret and loopback_port(redirect)):
        return None
    secret = opened_secret(secret, instance=instance, keys=keys)
    if secret is None:  # sealed with a key this process does not hold: registered again
        return None
    hide(secret)
    return Registered(Client(client_id, secret), redirect)


def loopback_port(redirect: str) -> int:
    """The port of a remembered http://127.0.0.1:PORT/callback (0 when it is not one)."""
    try:
        parts = urlsplit(redirect)
        port = parts.port
    except ValueError:
        return 0
    usable = parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.path == "/callback"
    return port if usable and port else 0


def register_app(
    http: Http, db: Any, instance: str, redirect_uri: str, scopes: str, now: datetime, keys: Keys | None = None
) -> Registered:
    """POST /api/v1/apps on the instance, and remember the answer (its secret sealed when `keys` has a current
    key)."""
    url = f"{instance}/api/v1/apps"
    data = {"client_name": APP_NAME, "redirect_uris": redirect_uri, "scopes": scopes}
    status, body = post(http, url, data=data)
    if status != 200 or server_error(body):
        raise ConnectError(REFUSED, f"mastodon: {instance} refused to register the application (HTTP {status})")
    client = Client(text_field(body, "client_id", url), text_field(body, "client_secret", url))
    hide(client.secret)
    doc = {
        "clientId": client.client_id,
        "clientSecret": sealed_secret(client.secret, instance=instance, keys=keys),
        "redirectUri": redirect_uri,
        "scopes": scopes,
        "createdAt": now,
    }
    db[APPS].replace_one({"_id": instance}, doc, upsert=True)
    return Registered(client, redirect_uri)


def bluesky_session(http: Http, pds: str, handle: str, password: str) -> dict[str, str]:
    """createSession with the app password: the network's accessToken, refreshToken, did (and pdsUrl when not the
    default)."""
    url = f"{pds}/xrpc/com.atproto.server.createSession"
    hide(password)
    status, body = post(http, url, json_body={"identifier": handle, "password": password})
    if status in (400, 401):
        raise ConnectError(REFUSED, f"bluesky: {pds} refused the handle or the app password ({server_error(body)})")
    if status != 200:
        raise ConnectError(REFUSED, f"bluesky: {pds} refused the session (HTTP {status})")
    did = text_field(body, "did", url)
    if not did.startswith("did:"):
        raise ConnectError(MALFORMED, f"bluesky: {pds} answered a did that is not one")
    found = {"accessToken": text_field(body, "accessJwt", url), "refreshToken": text_field(body, "refreshJwt", url)}
    hide(*found.values())
    return found | {"did": did} | ({"pdsUrl": pds} if pds != DEFAULT_PDS else {})
