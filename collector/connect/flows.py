"""One connect flow, from the service's declaration (apps.py) to the credentials a network holds, as a value:
`run_flow` picks the flow the service offers and runs it with the person at `prompt`. Everything that waits is
bounded by `Options.timeout` (and a device code's own life); the clock and the sleep are passed in."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..sdk import Http
from ..textout import printable
from . import oauth1, oauth2
from .apps import BLUESKY, DEFAULT_TIMEOUT, DEVICE, LOOPBACK, MASTODON, OAUTH1, App, missing
from .errors import EXPIRED, SETTINGS, UNREACHABLE, ConnectError
from .instances import DEFAULT_PDS, base_url, bluesky_session, known_app, loopback_port, register_app
from .loopback import CALLBACK, Listener
from .wire import hide


class Prompt(Protocol):
    """The person at the other end: lines said to them, a browser opened, a line read back."""

    def say(self, line: str) -> None: ...

    def browse(self, url: str) -> bool: ...

    def read_line(self, timeout: float) -> str: ...

    def read_secret(self, label: str, timeout: float) -> str: ...


@dataclass(frozen=True)
class Options:
    timeout: float = DEFAULT_TIMEOUT
    browser: bool = True  # False: --no-browser, the address printed and the one the browser ended on read back
    port: int = 0  # the loopback redirect's port (0: an ephemeral one)
    instance: str = ""  # Mastodon
    handle: str = ""  # Bluesky
    pds: str = ""  # Bluesky (empty: bsky.social)
    allow_private: bool = False  # ALLOW_PRIVATE_HOSTS


@dataclass
class Flow:
    http: Http
    prompt: Prompt
    options: Options
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    db: Any = None  # Mastodon's registered applications (instances.py)
    now: datetime | None = None
    keys: Any = None  # TOKEN_KEY's keys: a remembered client secret sealed with them (ops/appsecrets.py)

    def __post_init__(self) -> None:
        self.deadline = self.clock() + self.options.timeout


def client_of(app: App, values: Mapping[str, str | None]) -> oauth2.Client:
    """The application's credentials from the settings; one line naming what to set when they are missing."""
    line = missing(app, values)
    if line:
        raise ConnectError(SETTINGS, line)
    secret = (values.get(app.client_secret) or "").strip() if app.client_secret else ""
    hide(secret)
    return oauth2.Client((values.get(app.client_id) or "").strip(), secret)


def run_flow(app: App, values: Mapping[str, str | None], flow: Flow) -> dict[str, str]:
    """The credentials of the network the person authorised (accessToken and what the service adds)."""
    if app.flow == BLUESKY:
        return bluesky(flow)
    if app.flow == MASTODON:
        return mastodon(app, flow)
    client = client_of(app, values)
    if app.flow == DEVICE:
        return device(app, client, flow).credentials()
    if app.flow == OAUTH1:
        return verifier_flow(app, client, flow)
    if app.flow == LOOPBACK:
        return code_flow(app, client, flow, redirect_for(app, values, flow.options.port)).credentials()
    raise ConnectError(SETTINGS, f"{app.service}: no flow {app.flow!r}")  # pragma: no cover (apps.py declares them)


def device(app: App, client: oauth2.Client, flow: Flow) -> oauth2.Tokens:
    start = oauth2.start_device(flow.http, app, client)
    flow.prompt.say(f"First copy your one-time code: {start.user_code}")
    flow.prompt.say(f"Then open {start.verification_uri} and enter it (waiting up to {remaining(flow):.0f}s)")
    if flow.options.browser:
        flow.prompt.browse(start.verification_uri)
    return oauth2.poll_device(flow.http, app, client, start, clock=flow.clock, sleep=flow.sleep, deadline=flow.deadline)


def remaining(flow: Flow) -> float:
    return max(flow.deadline - flow.clock(), 0.0)


@dataclass(frozen=True)
class Redirect:
    """Where the browser is sent back to: http://HOST:PORT/PATH on this machine (port 0: an ephemeral one, known once
    the listener is bound)."""

    host: str = "127.0.0.1"
    port: int = 0
    path: str = CALLBACK

    def uri(self, port: int) -> str:
        return f"http://{self.host}:{port}{self.path}"


def redirect_for(app: App, values: Mapping[str, str | None], port: int) -> Redirect:
    """The redirect the application registered (its setting, `<SERVICE>_REDIRECT_URI`), else 127.0.0.1 on `port`
    (--port; 0: any). A registered one must be a loopback http address with a port (RFC 8252 section 7.3)."""
    configured = (values.get(app.redirect) or "").strip() if app.redirect else ""
    if not configured:
        return Redirect(port=port)
    try:
        parts = urlsplit(configured)
        given = parts.port
    except ValueError:
        given = None
    if given is None or parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost") or parts.query:
        raise ConnectError(
            SETTINGS,
            f"{app.redirect} must be http://127.0.0.1:PORT/PATH, the redirect registered with the application; "
            f"not {printable(configured[:200])!r}",
        )
    return Redirect(parts.hostname or "127.0.0.1", given, parts.path or "/")


def code_flow(app: App, client: oauth2.Client, flow: Flow, redirect: Redirect) -> oauth2.Tokens:
    pkce = oauth2.Pkce.new()
    address, sent = answer(flow, lambda uri: oauth2.authorize_url(app, client, pkce, uri), redirect)
    code = oauth2.read_redirect(app, address, pkce.state)
    return oauth2.exchange_code(flow.http, app, client, code, pkce, sent)


def verifier_flow(app: App, client: oauth2.Client, flow: Flow) -> dict[str, str]:
    token: list[oauth1.RequestToken] = []

    def address_to_open(redirect: str) -> str:
        token.append(oauth1.request_token(flow.http, app, client, redirect))
        return oauth1.authorize_url(app, token[0])

    address, _ = answer(flow, address_to_open, Redirect(port=flow.options.port))
    verifier = oauth1.read_verifier(app, address, token[0])
    return oauth1.access_token(flow.http, app, client, token[0], verifier)


def answer(flow: Flow, address_for: Callable[[str], str], redirect: Redirect) -> tuple[str, str]:
    """The address the browser ended on, caught by the loopback listener or (--no-browser) pasted back, and the
    redirect address that was sent (the token request repeats it)."""
    if not flow.options.browser:
        sent = redirect.uri(redirect.port or free_port())
        url = address_for(sent)
        flow.prompt.say(f"Open this address in a browser on any machine and allow access:\n{url}")
        flow.prompt.say(
            "The browser then ends on an address starting with "
            f"{sent} (its page may not load): paste that whole address here and press Enter"
        )
        got = flow.prompt.read_line(remaining(flow))
    else:
        try:
            listener = Listener(redirect.port, redirect.path)
        except OSError as exc:
            raise ConnectError(
                UNREACHABLE, f"cannot listen on 127.0.0.1:{redirect.port} ({exc.strerror}); use --no-browser"
            ) from None
        with listener:
            sent = redirect.uri(listener.port)
            url = address_for(sent)
            flow.prompt.say(f"Opening the browser; if none opens, open this address:\n{url}")
            flow.prompt.browse(url)
            flow.prompt.say(f"Waiting up to {remaining(flow):.0f}s for the browser to come back")
            got = listener.wait(flow.deadline, flow.clock)
    if not got.strip():
        raise ConnectError(EXPIRED, f"no answer came back within {flow.options.timeout:g}s; run the command again")
    return got, sent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def mastodon(app: App, flow: Flow) -> dict[str, str]:
    instance = base_url(flow.options.instance, "instance", flow.options.allow_private)
    app = App(
        app.service,
        app.flow,
        scope=app.scope,
        authorize_url=f"{instance}/oauth/authorize",
        token_url=f"{instance}/oauth/token",
    )
    registered = known_app(flow.db, instance, flow.keys)
    wanted = flow.options.port
    if registered is None or (wanted and loopback_port(registered.redirect_uri) != wanted):
        redirect = f"http://127.0.0.1:{wanted or free_port()}{CALLBACK}"
        now = flow.now or datetime.now().astimezone()
        registered = register_app(flow.http, flow.db, instance, redirect, app.scope, now, flow.keys)
        flow.prompt.say(f"Registered the application on {instance}")
    tokens = code_flow(app, registered.client, flow, Redirect(port=loopback_port(registered.redirect_uri)))
    return tokens.credentials() | {"instanceUrl": instance}


def bluesky(flow: Flow) -> dict[str, str]:
    handle = flow.options.handle.strip()
    if not handle:
        raise ConnectError(SETTINGS, "bluesky: give the account's handle with --handle (the app password is asked)")
    pds = base_url(flow.options.pds or DEFAULT_PDS, "pds", flow.options.allow_private)
    password = flow.prompt.read_secret(
        f"App password for {handle} (bsky.app: Settings, App passwords)", remaining(flow)
    )
    if not password.strip():
        raise ConnectError(EXPIRED, "bluesky: no app password was given")
    return bluesky_session(flow.http, pds, handle, password.strip())
