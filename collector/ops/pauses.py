"""`collector pause` and `collector resume`: an operator's pause recorded in MongoDB's `control` collection, one
document per scope (mode, service, or a service within a mode), with who, when, why and until when. Every
collector honours it at its next claim (engine/store/control.py); `status` shows it."""

from __future__ import annotations

import getpass
import socket
from datetime import datetime
from typing import Any

from ..engine.store import Store
from ..engine.store.control import ANY, read, scope_id
from ..sdk.redaction import clip
from ..textout import printable


def who() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "?"
    return f"{user}@{socket.gethostname()}"


def check_service(service: str | None) -> None:
    """A pause's service is a service's name, taken as it is: "*" would name every service (the scope's own
    wildcard), so it is refused (ValueError) and every service is said by giving none."""
    if service == ANY:
        raise ValueError(f"service {ANY!r} is not a service's name: give none for every service")


def pause(
    db: Any,
    now: datetime,
    mode: str | None,
    service: str | None,
    reason: str,
    until: datetime | None,
    by: str | None = None,
) -> str:
    """Record the pause of this scope (who: `by`, or this process's user@host) and say what it does."""
    if until is not None and until <= now:
        raise ValueError("--until must be in the future")
    check_service(service)
    scope = scope_id(mode, service)
    fields = {
        "mode": mode or ANY,
        "service": service or ANY,
        "reason": reason if len(reason) <= 500 else clip(reason, 500),
        "by": by if by is not None else who(),
        "at": now,
    }
    fields["until"] = until
    Store(db).set_pause(scope, fields)
    what = f"mode {mode or 'every mode'}, service {service or 'every service'}"
    return printable(
        f"paused {what}"
        + (f" until {until:%Y-%m-%d %H:%M:%S} UTC" if until else "")
        + (f": {reason}" if reason else "")
    )


def resume(db: Any, mode: str | None, service: str | None) -> tuple[bool, str]:
    """Lift the pause of this scope; ValueError for a service that is no name (check_service)."""
    check_service(service)
    scope = scope_id(mode, service)
    removed = Store(db).clear_pause(scope)
    what = f"mode {mode or 'every mode'}, service {service or 'every service'}"
    if removed:
        return True, f"resumed {what}"
    others = [p.scope for p in (read(d) for d in Store(db).pauses()) if p is not None]
    hint = f" (pauses in force: {', '.join(others)})" if others else ""
    return False, printable(f"no pause for {what}{hint}")
