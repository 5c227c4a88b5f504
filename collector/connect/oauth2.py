"""OAuth 2 clients for the flows, pure apart from the exchanges (wire.py) and the clock, which are passed in:

- the device authorisation grant (RFC 8628): `start_device` asks for a device code; `poll_device` polls the token
  endpoint every `interval` seconds, 5 more after each `slow_down`, until a token, `access_denied`,
  `expired_token`, or the end of the code's life or of the flow's time;
- the authorisation code with PKCE (RFC 7636, S256): `Pkce` makes the verifier, its challenge and the state;
  `authorize_url` the address the person opens; `read_redirect` the code from the address the browser ended on
  (the state checked, the service's error named); `exchange_code` the code and the verifier for tokens."""

from __future__ import annotations

import base64
import hashlib
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..sdk import Http, where
from .apps import App
from .errors import DENIED, EXPIRED, MALFORMED, REFUSED, STATE, ConnectError
from .wire import hide, post, server_error, text_field

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SLOW_DOWN_STEP = 5.0  # seconds added to the interval by each slow_down (RFC 8628 section 3.5)
DEFAULT_INTERVAL = 5.0  # when the device answer gives none (RFC 8628 section 3.2)
MOST_INTERVAL = 300.0  # an interval a server may ask for, at most


@dataclass(frozen=True)
class Client:
    """The application's credentials, from the settings (secret "": a public client)."""

    client_id: str
    secret: str = ""


@dataclass(frozen=True)
class Tokens:
    access: str
    refresh: str = ""
    expires_in: float | None = None

    def credentials(self) -> dict[str, str]:
        """As a network holds them."""
        return {"accessToken": self.access} | ({"refreshToken": self.refresh} if self.refresh else {})


@dataclass(frozen=True)
class DeviceStart:
    device_code: str
    user_code: str
    verification_uri: str
    expires_in: float
    interval: float
    verification_uri_complete: str = ""


def client_form(app: App, client: Client) -> tuple[dict[str, str], Any]:
    """The client's credentials for a token request: (form fields, HTTP Basic auth or None)."""
    if app.basic_auth:
        return {}, (client.client_id, client.secret)
    return {"client_id": client.client_id} | ({"client_secret": client.secret} if client.secret else {}), None


def tokens_from(body: dict[str, Any], url: str) -> Tokens:
    access = text_field(body, "access_token", url)
    refresh = body.get("refresh_token")
    hide(access, refresh if isinstance(refresh, str) else "")
    expires = body.get("expires_in")
    seconds = float(expires) if isinstance(expires, (int, float)) and not isinstance(expires, bool) else None
    return Tokens(access, refresh if isinstance(refresh, str) else "", seconds)


def seconds_field(body: dict[str, Any], name: str, default: float | None, url: str) -> float:
    value = body.get(name, default)
    if isinstance(value, str) and value.isdigit():  # some servers send numbers as text
        value = int(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ConnectError(MALFORMED, f"{where(url)} answered without a usable {name}")
    return float(value)


def start_device(http: Http, app: App, client: Client) -> DeviceStart:
    """Step (A)/(B) of RFC 8628: the device code, the user code and where to enter it."""
    form, auth = client_form(app, client)
    status, body = post(http, app.device_url, data=form | ({"scope": app.scope} if app.scope else {}), auth=auth)
    if status != 200 or server_error(body):
        raise refusal(app, status, body, app.device_url)
    hide(body["device_code"] if isinstance(body.get("device_code"), str) else "")
    uri = body.get("verification_uri") or body.get("verification_url")  # Google says verification_url
    complete = body.get("verification_uri_complete")
    return DeviceStart(
        text_field(body, "device_code", app.device_url),
        text_field(body, "user_code", app.device_url),
        uri if isinstance(uri, str) and uri else text_field(body, "verification_uri", app.device_url),
        seconds_field(body, "expires_in", None, app.device_url),
        min(seconds_field(body, "interval", DEFAULT_INTERVAL, app.device_url), MOST_INTERVAL),
        complete if isinstance(complete, str) else "",
    )


def poll_device(
    http: Http,
    app: App,
    client: Client,
    start: DeviceStart,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    deadline: float,
) -> Tokens:
    """Steps (E)/(F): poll until the person has decided. `deadline` (on `clock`) is the flow's own end; the code's
    life (`expires_in`) ends it too."""
    deadline = min(deadline, clock() + start.expires_in)
    interval = start.interval
    form, auth = client_form(app, client)
    form |= {"grant_type": DEVICE_GRANT, "device_code": start.device_code}
    while True:
        if clock() + interval > deadline:
            raise ConnectError(EXPIRED, f"{app.service}: the code was not entered in time; run the command again")
        sleep(interval)
        status, body = post(http, app.token_url, data=form, auth=auth)
        error = server_error(body)
        if not error and isinstance(body.get("access_token"), str):
            return tokens_from(body, app.token_url)
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += SLOW_DOWN_STEP
            continue
        if error == "expired_token":
            raise ConnectError(EXPIRED, f"{app.service}: the code expired before it was entered; run the command again")
        if error == "access_denied":
            raise ConnectError(DENIED, f"{app.service}: access was denied at {start.verification_uri}")
        raise refusal(app, status, body, app.token_url)


def refusal(app: App, status: int, body: dict[str, Any], url: str) -> ConnectError:
    """A refused request as one line: the service's error code (its description is not shown: it may quote what
    was sent)."""
    error = server_error(body) or f"HTTP {status}"
    if error == "access_denied":
        return ConnectError(DENIED, f"{app.service}: access was denied")
    return ConnectError(REFUSED, f"{app.service}: {where(url)} refused the request: {error}")


@dataclass(frozen=True)
class Pkce:
    """A verifier (43 to 128 characters of the unreserved set), its S256 challenge, and the state."""

    verifier: str
    state: str

    @classmethod
    def new(cls) -> Pkce:
        made = cls(secrets.token_urlsafe(48), secrets.token_urlsafe(24))
        hide(made.verifier)
        return made

    @property
    def challenge(self) -> str:
        digest = hashlib.sha256(self.verifier.encode("ascii")).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorize_url(app: App, client: Client, pkce: Pkce, redirect_uri: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": pkce.state,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
    }
    params |= ({"scope": app.scope} if app.scope else {}) | dict(app.extra)
    joiner = "&" if urlsplit(app.authorize_url).query else "?"
    return f"{app.authorize_url}{joiner}{urlencode(params)}"


def read_redirect(app: App, address: str, state: str) -> str:
    """The code from the address the browser ended on; the state must be this flow's, and an error the service
    put there (access_denied) is said."""
    text = address.strip()
    query = dict(parse_qsl(urlsplit(text).query or text.lstrip("?"), keep_blank_values=True))
    if query.get("state") != state:
        raise ConnectError(
            STATE, f"{app.service}: the answer's state is not this flow's (an old or forged address); nothing saved"
        )
    error = query.get("error", "")
    if error == "access_denied":
        raise ConnectError(DENIED, f"{app.service}: access was denied")
    if error:
        raise ConnectError(REFUSED, f"{app.service}: the authorisation was refused: {server_error(query)}")
    code = query.get("code", "")
    if not code:
        raise ConnectError(MALFORMED, f"{app.service}: the address holds no code")
    hide(code)
    return code


def exchange_code(http: Http, app: App, client: Client, code: str, pkce: Pkce, redirect_uri: str) -> Tokens:
    form, auth = client_form(app, client)
    form |= {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": pkce.verifier,
    }
    status, body = post(http, app.token_url, data=form, auth=auth)
    if status != 200 or server_error(body):
        raise refusal(app, status, body, app.token_url)
    return tokens_from(body, app.token_url)
