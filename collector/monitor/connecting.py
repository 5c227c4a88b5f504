"""Connect flows started from the page, with the token: the device grant (its code shown on the page, the token
endpoint polled on a thread of the flow's own) and the authorisation code with PKCE (its redirect back to the
monitor's own address, `/connect/callback`, whose `state` must be a waiting flow's). The protocol is
collector/connect/'s, as `collector connect` runs it; the network is written by its `save` (a new network, or the
renewal of an unauthorised one: the same account required), on the monitor's database thread: a flow's thread
never touches the database. Bounded: one flow per user and service at a time, MAX_PENDING in all, each ended by
its timeout (and the code's own life). The secrets a flow learns are masked in every log line while it runs and
let go of when it ends (connect/wire.py `learning`)."""

from __future__ import annotations

import functools
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from ..connect import oauth2
from ..connect.account import Target, save, target
from ..connect.apps import APPS, DEFAULT_TIMEOUT, DEVICE, FLOW_WORDS, LOOPBACK, App, app_for, missing
from ..connect.errors import EXPIRED, SETTINGS, ConnectError
from ..connect.flows import client_of
from ..connect.wire import learning
from ..ops.accounts import MAX_EMAIL_CHARS, AccountError, check_user, connector_class
from ..ops.ids import format_id
from ..sdk import Http
from ..sdk.redaction import clip
from ..sdk.timeutil import utcnow
from ..settings import Settings
from ..textout import printable
from . import actions
from .httpd import Answer, Request

log = logging.getLogger("collector.monitor")
CALLBACK = "/connect/callback"
FLOWS = (DEVICE, LOOPBACK)  # what the monitor runs; OAuth 1.0a, Mastodon and Bluesky: `collector connect`
MAX_PENDING = 4  # flows under way at once, in all
KEPT = 32  # ended flows whose outcome the page can still read
ROUND = 0.5  # seconds a wait for the browser's return lasts before the stop and the deadline are looked at
PENDING, DONE, FAILED = "pending", "done", "failed"


class NotStarted(Exception):
    """A flow that cannot start now (one under way for this network, too many under way): one line."""


@dataclass
class Attempt:
    """One flow, as the page sees it (`view`); `state` and `arrived` stay inside."""

    id: str
    service: str
    user: str
    by: str
    way: str  # "device" or "browser"
    deadline: float
    status: str = PENDING
    user_code: str = ""
    verification_uri: str = ""
    open_url: str = ""
    network: str = ""
    message: str = ""
    ended: float = 0.0
    state: str = field(default="", repr=False)
    arrived: str = field(default="", repr=False)
    came_back: threading.Event = field(default_factory=threading.Event, repr=False)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "service": self.service,
            "user": printable(clip(self.user, 200)),
            "way": self.way,
            "status": self.status,
            "userCode": self.user_code,
            "verificationUri": self.verification_uri,
            "openUrl": self.open_url,
            "network": self.network,
            "message": self.message,
        }


def web_address(url: str) -> str:
    """An address a server gave, to be shown as a link: http(s) only, printable, bounded ("" otherwise)."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        return ""
    return printable(url) if scheme in ("http", "https") and len(url) <= 2000 else ""


def redirect_from(origin: object, host: str) -> str:
    """Where the service sends the browser back: the page's own origin (the monitor as the browser reaches it,
    through a proxy too) or, when the page sends none, the Host the request came to; then CALLBACK. ValueError
    for an origin that is not `http(s)://HOST[:PORT]`."""
    if origin in (None, ""):
        return f"http://{host.strip()}{CALLBACK}"
    if not isinstance(origin, str) or len(origin) > 300:
        raise ValueError("origin must be the page's address, http(s)://HOST[:PORT]")
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 (a port out of range raises)
    except ValueError:
        raise ValueError("origin must be the page's address, http(s)://HOST[:PORT]") from None
    plain = parts.path in ("", "/") and not (parts.query or parts.fragment or parts.username or parts.password)
    if parts.scheme not in ("http", "https") or not parts.hostname or not plain or not origin.isprintable():
        raise ValueError("origin must be the page's address, http(s)://HOST[:PORT]")
    return f"{parts.scheme}://{parts.netloc}{CALLBACK}"


class Connections:
    """The flows under way and those just ended. `on_db(work)` runs `work` on the monitor's database thread and
    returns what it returned (from a flow's thread: it waits)."""

    def __init__(
        self,
        db: Any,
        settings: Settings,
        on_db: Callable[[Callable[[], Any]], Any],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        apps: Callable[[str, str], App] = app_for,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = utcnow,
    ):
        self.db, self.settings, self.on_db, self.timeout = db, settings, on_db, timeout
        self.apps, self.clock, self.now = apps, clock, now
        self.lock = threading.Lock()
        self.attempts: dict[str, Attempt] = {}
        self.stopping = threading.Event()

    # -- before a flow: on the event loop --

    def app(self, service: str) -> App:
        """The service's application, if the monitor runs its flow and its settings are set; ConnectError."""
        app = self.apps(service, self.settings.github_api_url)
        if app.flow not in FLOWS:
            raise ConnectError(
                SETTINGS,
                f"{service}: its flow ({FLOW_WORDS[app.flow]}) runs from the command line: collector connect "
                f"{service} --user EMAIL (or add the network with a token)",
            )
        line = missing(app, self.values(app))
        if line:
            raise ConnectError(SETTINGS, line)
        return app

    def values(self, app: App) -> dict[str, str | None]:
        return {name: self.settings.get(name) for name in (app.client_id, app.client_secret, app.redirect) if name}

    def begin(self, app: App, goal: Target, redirect: str, by: str) -> Attempt:
        with self.lock:
            self.prune()
            pending = [a for a in self.attempts.values() if a.status == PENDING]
            if any(a.user == goal.user and a.service == goal.service for a in pending):
                raise NotStarted(f"a {goal.service} flow for {printable(clip(goal.user, 120))} is under way already")
            if len(pending) >= MAX_PENDING:
                raise NotStarted(f"{MAX_PENDING} connect flows are under way already: try again when one ends")
            way = "device" if app.flow == DEVICE else "browser"
            attempt = Attempt(secrets.token_urlsafe(12), goal.service, goal.user, by, way, self.clock() + self.timeout)
            self.attempts[attempt.id] = attempt
        thread = threading.Thread(
            target=self.run, args=(attempt, app, goal, redirect), name="monitor-connect", daemon=True
        )
        thread.start()
        return attempt

    def prune(self) -> None:
        ended = sorted((a for a in self.attempts.values() if a.status != PENDING), key=lambda a: a.ended)
        for attempt in ended[: max(len(ended) - KEPT, 0)]:
            del self.attempts[attempt.id]

    def view(self, flow_id: str) -> dict[str, Any] | None:
        with self.lock:
            attempt = self.attempts.get(flow_id)
            return attempt.view() if attempt is not None else None

    def callback(self, query: Mapping[str, list[str]]) -> bool:
        """The browser back from the service: handed to the waiting flow whose `state` it carries (True), else
        nothing is done (False: an old or forged address)."""
        state = (query.get("state") or [""])[0]
        if not state:
            return False
        with self.lock:
            for attempt in self.attempts.values():
                if (
                    attempt.status == PENDING
                    and attempt.state
                    and not attempt.arrived
                    and hmac.compare_digest(attempt.state.encode(), state.encode())
                ):
                    attempt.arrived = "?" + urlencode({k: v[0] for k, v in query.items() if v})
                    attempt.came_back.set()
                    return True
        return False

    def close(self) -> None:
        self.stopping.set()

    # -- a flow: on its own thread --

    def run(self, attempt: Attempt, app: App, goal: Target, redirect: str) -> None:
        with learning():
            http = Http(self.settings, pool_size=2)
            try:
                client = client_of(app, self.values(app))
                if app.flow == DEVICE:
                    tokens = self.device(attempt, app, client, http)
                else:
                    tokens = self.browser(attempt, app, client, http, redirect)
                added = self.on_db(
                    lambda: save(self.db, goal, tokens.credentials(), settings=self.settings, http=http, now=self.now())
                )
            except ConnectError as exc:
                self.end(attempt, FAILED, exc.message)
            except AccountError as exc:
                self.end(attempt, FAILED, printable(str(exc)))
            except Exception as exc:  # the monitor stopping (its database thread gone), a bug: said, not raised
                self.end(attempt, FAILED, f"not done: {type(exc).__name__}")
            else:
                done = "renewed" if added.replaced else "added"
                note = f" ({printable(added.note)})" if added.note else ""
                line = f"network {format_id(added.network_id)} {done}: {goal.service} account {added.account}{note}"
                self.end(attempt, DONE, line, format_id(added.network_id))
            finally:
                http.close()

    def device(self, attempt: Attempt, app: App, client: oauth2.Client, http: Http) -> oauth2.Tokens:
        start = oauth2.start_device(http, app, client)
        with self.lock:
            attempt.user_code = printable(clip(start.user_code, 64))
            attempt.verification_uri = web_address(start.verification_uri)
        return oauth2.poll_device(
            http, app, client, start, clock=self.clock, sleep=self.sleep, deadline=attempt.deadline
        )

    def sleep(self, seconds: float) -> None:
        if self.stopping.wait(seconds):
            raise ConnectError(EXPIRED, "the monitor stopped before the flow ended: start it again")

    def browser(self, attempt: Attempt, app: App, client: oauth2.Client, http: Http, redirect: str) -> oauth2.Tokens:
        pkce = oauth2.Pkce.new()
        url = oauth2.authorize_url(app, client, pkce, redirect)
        with self.lock:
            attempt.state, attempt.open_url = pkce.state, url
        while not attempt.came_back.wait(max(min(ROUND, attempt.deadline - self.clock()), 0.01)):
            if self.stopping.is_set():
                raise ConnectError(EXPIRED, "the monitor stopped before the flow ended: start it again")
            if self.clock() >= attempt.deadline:
                raise ConnectError(
                    EXPIRED, f"{app.service}: no answer came back within {self.timeout:g}s: start the flow again"
                )
        code = oauth2.read_redirect(app, attempt.arrived, pkce.state)
        return oauth2.exchange_code(http, app, client, code, pkce, redirect)

    def end(self, attempt: Attempt, status: str, message: str, network: str = "") -> None:
        with self.lock:
            attempt.status, attempt.message, attempt.network = status, message, network
            attempt.ended, attempt.state = self.clock(), ""
        log.warning(
            "monitor: connect %s for %s by %s: %s",
            attempt.service,
            printable(clip(attempt.user, 120)),
            attempt.by,
            message if status == DONE else f"failed: {message}",
        )


@functools.cache
def services() -> tuple[dict[str, Any], ...]:
    """Every service with a connector: the flow the monitor runs for it ("" when `collector connect` runs it), and
    the credentials its connector takes (the add form's fields)."""
    found = []
    for name, app in sorted(APPS.items()):
        try:
            fields = connector_class(name).credential_fields()
        except AccountError:  # no connector of that name installed
            continue
        taken = [{"name": f.name, "secret": f.secret, "required": f.required} for f in fields]
        found.append({"name": name, "connect": app.flow if app.flow in FLOWS else "", "fields": taken})
    return tuple(found)


async def started(
    request: Request, connections: Connections, on_db: Callable[[Callable[[], Any]], Awaitable[Any]]
) -> Answer:
    """POST /api/connect {service, user, origin}: the flow started (its state in the answer), or why not."""
    try:
        body = actions.body_of(request)
        service = actions.text_field(body, "service", 100)
        user = check_user(actions.text_field(body, "user", MAX_EMAIL_CHARS))
        if service not in APPS:
            raise actions.Invalid(f"service is one of {', '.join(sorted(APPS))}")
        redirect = redirect_from(body.get("origin"), request.headers.get("host", ""))
    except (actions.Invalid, AccountError, ValueError) as bad:
        return Answer.json(400, {"ok": False, "message": printable(str(bad))})
    by = actions.who(request)
    try:
        app = connections.app(service)
        goal = await on_db(lambda: target(connections.db, user, service, False))
        attempt = connections.begin(app, goal, redirect, by)
    except actions.Busy:
        return Answer.json(503, {"ok": False, "message": "busy, try again"})
    except (ConnectError, NotStarted) as exc:
        line = exc.message if isinstance(exc, ConnectError) else str(exc)
        log.warning("monitor: connect %s for %s by %s: %s", service, printable(clip(user, 120)), by, line)
        return Answer.json(409, {"ok": False, "message": line})
    except Exception as exc:  # the database away: said as the other actions say it
        return Answer.json(503, {"ok": False, "message": f"not done: {type(exc).__name__}"})
    what = f"renewing network {format_id(goal.existing['_id'])}" if goal.existing is not None else "a new network"
    line = f"{service} flow started for {printable(clip(user, 120))} ({attempt.way}): {what}"
    log.warning("monitor: connect %s for %s by %s: started (%s): %s", service, printable(user), by, attempt.way, what)
    return Answer.json(200, {"ok": True, "message": line, "flow": attempt.view()})


def state_of(request: Request, connections: Connections) -> Answer:
    """POST /api/connect/state {id}: a flow's state, read as often as the page likes (nothing logged)."""
    try:
        flow_id = actions.text_field(actions.body_of(request), "id", 100)
    except actions.Invalid as bad:
        return Answer.json(400, {"ok": False, "message": str(bad)})
    found = connections.view(flow_id)
    if found is None:
        return Answer.json(404, {"ok": False, "message": "no such flow (ended long ago, or the monitor restarted)"})
    return Answer.json(200, {"ok": True, "message": found["message"], "flow": found})


CAME_BACK = (
    b'<!doctype html><meta charset=utf-8><link rel=icon href="data:,"><title>likeastore collector</title>'
    b"<p>Done: the monitor has the answer. You may close this page; the monitor's page shows the outcome.</p>"
)
NOT_OURS = (
    b'<!doctype html><meta charset=utf-8><link rel=icon href="data:,"><title>likeastore collector</title>'
    b"<p>This answer belongs to no connect flow waiting here (an old or forged address): nothing was saved.</p>"
)


def came_back(request: Request, connections: Connections | None) -> Answer:
    """GET /connect/callback: the browser back from the service. Nothing of the address is echoed or logged."""
    if connections is not None and connections.callback(request.query):
        return Answer(200, CAME_BACK, "text/html; charset=utf-8")
    return Answer(400, NOT_OURS, "text/html; charset=utf-8")
