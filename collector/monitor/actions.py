"""What the page may change, and only with the token: pause or resume a mode or a service, enable, reset, add or
remove a network, start a connect flow — the operations of `collector pause|resume`, `collector networks
enable|reset|add|remove` (ops/) and `collector connect` (connect/, run by connecting.py), recorded the same way (a
pause holds who, when and why; every action is one line of the monitor's log, never with a credential in it).

The token travels in the `X-Monitor-Token` header of a POST whose body is JSON. A browser sends neither a
custom header nor a JSON body across sites without asking the monitor first (a CORS preflight, which it never
grants), and no cookie is involved: another site's page cannot act through a viewer's browser. Without a token
configured the monitor is read-only and every action is refused (403); a wrong token likewise. The comparison
takes the same time whatever the token sent.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..ops import accounts, networks, pauses, users
from ..ops.ids import format_id
from ..settings import Settings
from ..textout import printable
from .httpd import Answer, Request

log = logging.getLogger("collector.monitor")
HEADER = "x-monitor-token"
MODES = (None, "initial", "normal")
PATHS = (
    "/api/pause",
    "/api/resume",
    "/api/networks/enable",
    "/api/networks/reset",
    "/api/networks/add",
    "/api/networks/remove",
    "/api/connect",
    "/api/connect/state",
)
CONNECT = ("/api/connect", "/api/connect/state")  # answered by the monitor's flows (app.py, connecting.py)


class Busy(Exception):
    """Too many requests wait for the database already."""


class Invalid(Exception):
    """A body the action cannot take; its message is the answer."""


def refusal(request: Request, token: str) -> Answer | None:
    """The answer refusing this POST, or None when it may go ahead."""
    if request.path not in PATHS:
        return Answer.json(404, {"ok": False, "message": "no such action"})
    if not token:
        return Answer.json(403, {"ok": False, "message": "read-only: no MONITOR_TOKEN is configured"})
    sent = request.headers.get(HEADER, "").encode("latin-1", "replace")  # the bytes as sent (read as latin-1)
    if not hmac.compare_digest(sent, token.encode("utf-8")):
        return Answer.json(403, {"ok": False, "message": "refused: the X-Monitor-Token header is missing or wrong"})
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return Answer.json(415, {"ok": False, "message": "send JSON (Content-Type: application/json)"})
    return None


@dataclass
class Refusals:
    """Refused attempts, logged as one line at most every EVERY seconds (a script trying tokens cannot flood the
    log, and the operator still hears of it)."""

    EVERY = 60.0
    count: int = 0
    logged_at: float = float("-inf")

    def note(self, request: Request, answer: Answer, now: float) -> None:
        self.count += 1
        if now - self.logged_at < self.EVERY:
            return
        reason = json.loads(answer.body).get("message", "")
        log.warning(
            "monitor: %d action(s) refused since the last report; the last from %s: %s",
            self.count,
            printable(request.peer),
            reason,
        )
        self.count, self.logged_at = 0, now


@dataclass
class Action:
    name: str
    by: str
    run: Callable[[Any, datetime], tuple[bool, str]]


def body_of(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, RecursionError):
        raise Invalid("the body is not JSON (or nested too deep)") from None
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    return body


def who(request: Request) -> str:
    return f"monitor ({request.peer})"


def parse(request: Request, settings: Settings | None = None, lease_seconds: float = 300.0) -> Action:
    body = body_of(request)
    by = who(request)
    name = request.path.rsplit("/", 1)[-1]
    if name == "add":
        return adding(body, by, settings, lease_seconds)
    if name in ("pause", "resume"):
        mode, service = scope(body)
        if name == "resume":
            return Action("resume", by, lambda db, now: pauses.resume(db, mode, service))
        reason = text_field(body, "reason", 500)
        return Action("pause", by, lambda db, now: (True, pauses.pause(db, now, mode, service, reason, None, by)))
    network = text_field(body, "id", 200)
    if not network:
        raise Invalid('name the network: {"id": ...}')
    try:
        networks.key_filter(network)  # an id is an id: a query given as one (ops/ids.py) is refused here, unrun
    except networks.AdminError as bad:
        raise Invalid(str(bad)) from None
    if name == "remove":
        return Action(f"remove {printable(network)}", by, lambda db, now: removed(db, now, network, lease_seconds))
    change = networks.enable if name == "enable" else networks.reset
    return Action(f"{name} {printable(network)}", by, lambda db, now: changed(change, db, now, network))


def adding(body: dict[str, Any], by: str, settings: Settings | None, lease_seconds: float) -> Action:
    """`networks add` from the page: the credentials in the body only (never the address), never said back."""
    user, service = text_field(body, "user", accounts.MAX_EMAIL_CHARS), text_field(body, "service", 100)
    credentials = body.get("credentials")
    if not user or not service:
        raise Invalid('name the person and the service: {"user": ..., "service": ..., "credentials": {...}}')
    if not isinstance(credentials, dict) or not credentials:
        raise Invalid('give the credentials as an object: {"accessToken": ...} (and what the connector takes)')
    replace = body.get("replace", False)
    if not isinstance(replace, bool):
        raise Invalid("replace is true or false")

    def add(db: Any, now: datetime) -> tuple[bool, str]:
        try:
            added = accounts.add_network(
                db,
                user=user,
                service=service,
                credentials=credentials,
                replace=replace,
                now=now,
                settings=settings,
                lease_seconds=lease_seconds,
            )
        except accounts.AccountError as exc:
            return False, printable(str(exc))
        done = "gave network" if added.replaced else "added network"
        tail = " its new credentials" if added.replaced else ""
        note = f"; note: {added.note}" if added.note else ""
        line = f"{done} {format_id(added.network_id)}{tail}: {service} account {added.account} for {user}"
        return True, printable(f"{line}, due now{note}")

    shown = f"add {printable(clip_text(service, 40))} network of {printable(clip_text(user, 120))}"
    return Action(shown, by, add)


def clip_text(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def removed(db: Any, now: datetime, network: str, lease_seconds: float) -> tuple[bool, str]:
    try:
        return True, users.remove_network(db, network, now=now, lease_seconds=lease_seconds)
    except networks.AdminError as exc:
        return False, printable(str(exc))


def scope(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """The mode and service an action names; absent, null or "" is every one, anything else must be a name."""
    mode = body.get("mode")
    if mode not in (*MODES, ""):
        raise Invalid("mode is initial, normal, or empty for every mode")
    service = body.get("service")
    if service not in (None, "") and (
        not isinstance(service, str) or not service.strip() or len(service) > 100 or service.strip() == pauses.ANY
    ):
        raise Invalid("service is a service's name (at most 100 characters), or empty for every service")
    return mode or None, (service.strip() if service else None)


def text_field(body: dict[str, Any], name: str, limit: int) -> str:
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise Invalid(f"{name} must be text of at most {limit} characters")
    return value.strip()


def changed(change: Callable[..., networks.Changes], db: Any, now: datetime, network: str) -> tuple[bool, str]:
    try:
        lines = change(db, now, [network])
    except networks.AdminError as exc:
        return False, str(exc)
    return lines.refused == 0, "; ".join(lines)
