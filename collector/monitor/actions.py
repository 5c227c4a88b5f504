"""What the page may change, and only with the token: pause or resume a mode or a service, enable or reset a
network — the operations of `collector pause|resume` and `collector networks enable|reset` (ops/), recorded the
same way (a pause holds who, when and why; every action is one line of the monitor's log).

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

from ..ops import networks, pauses
from ..textout import printable
from .httpd import Answer, Request

log = logging.getLogger("collector.monitor")
HEADER = "x-monitor-token"
MODES = (None, "initial", "normal")
PATHS = ("/api/pause", "/api/resume", "/api/networks/enable", "/api/networks/reset")


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


def parse(request: Request) -> Action:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, RecursionError):
        raise Invalid("the body is not JSON (or nested too deep)") from None
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    by = f"monitor ({request.peer})"
    name = request.path.rsplit("/", 1)[-1]
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
    change = networks.enable if name == "enable" else networks.reset
    return Action(f"{name} {printable(network)}", by, lambda db, now: changed(change, db, now, network))


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
