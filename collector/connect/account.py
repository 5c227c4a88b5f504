"""A connect flow's end: the network it is for, and the network written (collector.ops.accounts `add_network`).

Before the flow (`target`): the person's network of the service, if any. None: the flow adds one. One that waits
for re-authorisation (`unauthorized`, a token the service refused): the flow renews it. One that works: refused
unless `--replace` (the person would authorise for nothing). A renewal must bring a token of the same account as
the network's (`same_account`: its accountId, or the account fields the service's identity call fills): another
account is refused, nothing written. After the flow (`save`): the credentials the connector takes, written by
add_network (`replace=True` for a renewal: the walk's state kept, `unauthorized` cleared)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..ops.accounts import Added, add_network, connector_class, identify
from ..ops.ids import equal, format_id
from ..sdk.redaction import clip
from ..settings import Settings
from ..textout import printable
from .errors import ACCOUNT, REFUSED, ConnectError


@dataclass(frozen=True)
class Target:
    user: str
    service: str
    existing: dict[str, Any] | None = None

    @property
    def renewing(self) -> bool:
        return self.existing is not None


def target(db: Any, user: str, service: str, replace: bool) -> Target:
    existing = db.networks.find_one({"user": equal(user), "service": equal(service)})
    if existing is not None and existing.get("unauthorized") is not True and not replace:
        raise ConnectError(
            REFUSED,
            f"{printable(clip(user, 120))} has a working {service} network already: {format_id(existing['_id'])} "
            "(--replace authorises it again)",
        )
    return Target(user, service, existing)


def taken(service: str, credentials: Mapping[str, str]) -> dict[str, str]:
    """The credentials the service's connector takes (a flow may learn more: Bluesky's did, which the identity
    call fills again)."""
    names = {f.name for f in connector_class(service).credential_fields()}
    return {k: v for k, v in credentials.items() if k in names}


def same_account(existing: Mapping[str, Any], account_id: str, fields: Mapping[str, str]) -> bool:
    """Whether a token of `account_id` (and the identity fields) is the network's account; a network that says
    nothing of its account (written by another program, before accountId) is taken as the same."""
    known = existing.get("accountId")
    if isinstance(known, str) and known:
        return known == account_id
    return all(existing.get(k) == v for k, v in fields.items() if isinstance(existing.get(k), str))


def save(
    db: Any,
    goal: Target,
    credentials: Mapping[str, str],
    *,
    settings: Settings,
    http: Any,
    now: datetime,
) -> Added:
    given = taken(goal.service, credentials)
    if goal.existing is not None:
        _, identity = identify(goal.service, given, now=now, settings=settings, http=http, user=goal.user)
        if not same_account(goal.existing, identity.account_id, identity.fields):
            was = goal.existing.get("accountName") or goal.existing.get("accountId") or "?"
            raise ConnectError(
                ACCOUNT,
                f"{goal.service}: this token is for the account {printable(clip(identity.name, 120))}, not the "
                f"network's ({printable(clip(str(was), 120))}): nothing saved; authorise as that account, or "
                "remove the network first",
            )
    return add_network(
        db,
        user=goal.user,
        service=goal.service,
        credentials=given,
        replace=goal.renewing,
        now=now,
        http=http,
        settings=settings,
    )
