"""Adding a network by hand: `collector networks add` (and `collector connect`, which obtains the token first).

`add_network` checks the credentials with the connector's one identity call (`Connector.identify`, the SDK's
`whoami` step), refuses a second network of the same user and service, or of the same account under another
user, unless `replace`, and writes the network in the likeastore schema, mode `initial`, due now — through the
store's `add_network` / `replace_credentials`, the one place credentials are written. A replace keeps the walk's
state (unless the token belongs to another account than the network's) and clears `unauthorized` and the error
that set it, and `disabled` (as the web app's re-authorisation did). Each refusal is an `AccountError` with one
printable line that never holds a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..engine.store import LEASE_DEFAULT, Store, lease_state
from ..engine.store.accounts import exactly
from ..sdk.connector import Connector
from ..sdk.errors import (
    BadResponse,
    Malformed,
    NetworkError,
    NotConfigured,
    RateLimited,
    Retired,
    Unauthorized,
    UnknownService,
)
from ..sdk.job import Job
from ..sdk.redaction import SECRETS, clip, redact
from ..sdk.validate import MAX_TOKEN_CHARS
from ..sdk.whoami import Credential, Identity
from ..settings import Settings
from ..textout import printable
from .ids import AdminError, format_id

MAX_EMAIL_CHARS = 320
MAX_TEXT_CHARS = 2048  # a field that is not a secret (an instance's address)
# what a run left that a new token makes stale, cleared by a replace (`disabled` too, as the web app's re-authorisation
# did: its update of the user's network unset it)
STALE_FIELDS = ("unauthorized", "disabled", "accessTokenExpiresAt")
# the walk through the history, started again when a replace brings another account's token
PROGRESS_FIELDS = ("page", "cursor", "seenIds", "sinceLikedAt", "etag", "prevMode", "skippedItems", "lastSkipped")


class AccountError(AdminError):
    """A network that cannot be added (or changed): one line, no secret in it."""


class UnknownServiceError(AccountError):
    """No connector of that name."""


class MissingCredential(AccountError):
    """A field the connector needs was not given (or one it does not know was)."""


class BadCredential(AccountError):
    """A given field is not a usable value (a token with a space, an instance that is not https)."""


class NotConfiguredError(AccountError):
    """A setting the connector needs (an app key) is not set."""


class IdentityRefused(AccountError):
    """The service refused the token (401): revoked, expired, or for another application."""


class IdentityUnreadable(AccountError):
    """The service answered, but not who the token belongs to (another 4xx, an answer without an account id)."""


class ServiceUnreachable(AccountError):
    """No answer from the service (connection, timeout, 5xx), or it asked to wait (rate limited)."""


class AlreadyConnected(AccountError):
    """A network of this user and service, or of this account, exists: `network_id` names it."""

    def __init__(self, message: str, network_id: Any):
        super().__init__(message)
        self.network_id = network_id


class NetworkInFlight(AccountError):
    """A collector holds the network now: nothing was changed."""


@dataclass(frozen=True)
class Added:
    """What `add_network` wrote: the network's id, the account the service answered (printable), whether an
    existing network was replaced, and a note (the account changed, another user's network of this account)."""

    network_id: Any
    account: str
    replaced: bool
    account_id: str = ""
    note: str = ""


def connector_class(service: str) -> type[Connector]:
    from ..engine import Registry

    try:
        return Registry().get(service)
    except (UnknownService, Retired) as exc:
        raise UnknownServiceError(printable(clip(exc, 300))) from None


def check_user(user: object) -> str:
    """The person's email as the networks' `user` holds it."""
    if (
        not isinstance(user, str)
        or not 3 <= len(user) <= MAX_EMAIL_CHARS
        or "@" not in user
        or not user.isprintable()
        or any(c.isspace() for c in user)
    ):
        raise AccountError(f"--user must be the person's email, got {printable(clip(repr(user), 80))}")
    return user


def check_credentials(service: str, fields: tuple[Credential, ...], given: Mapping[str, Any]) -> dict[str, str]:
    """The credentials as they will be written: every required field present, none unknown, each one word of
    visible ASCII (a secret's value is never quoted back)."""
    known = {f.name: f for f in fields}
    unknown = sorted(str(name) for name in given if name not in known)
    if unknown:
        names = ", ".join(printable(clip(n, 40)) for n in unknown[:5])
        raise MissingCredential(f"{service} takes {', '.join(known)}; not {names}")
    out: dict[str, str] = {}
    for field in fields:
        value = given.get(field.name)
        if value is None or value == "":
            if field.required:
                raise MissingCredential(f"{service} needs {field.name}: give it on standard input or in the file")
            continue
        problem = value_problem(value, field.secret)
        if problem is not None:
            raise BadCredential(f"{field.name} must be {problem}")
        out[field.name] = value
    return out


def value_problem(value: Any, secret: bool) -> str | None:
    limit = MAX_TOKEN_CHARS if secret else MAX_TEXT_CHARS
    if not isinstance(value, str):
        return f"a string, got {type(value).__name__}"
    if len(value) > limit:
        return f"at most {limit} characters, got {len(value)}"
    if not all("\x21" <= c <= "\x7e" for c in value):
        return "one word of visible ASCII characters (no space, no control character)"
    return None


def identify(
    service: str,
    credentials: Mapping[str, Any],
    *,
    now: datetime,
    settings: Settings | None = None,
    http: Any = None,
    user: str = "",
) -> tuple[dict[str, str], Identity]:
    """Check the credentials with the connector's one identity call, writing nothing: the credentials as they
    would be written, and who they belong to. AccountError for each way it can fail."""
    cls = connector_class(service)
    fields = check_credentials(service, cls.credential_fields(), credentials)
    settings = settings or _settings()
    own = http is None
    if own:
        from ..sdk.http import Http

        http = Http(settings, pool_size=2)
    secrets = [v for f in cls.credential_fields() if f.secret and (v := fields.get(f.name))]
    SECRETS.add(secrets)  # masked in every log line while the call runs (urllib3's, oauthlib's)
    try:
        job = Job({"user": user, "service": service, **fields}, "initial", now)
        return fields, cls(settings, http).identify(job)
    except NetworkError as exc:
        raise refusal(service, exc, secrets) from None
    finally:
        SECRETS.remove(secrets)
        if own:
            http.session.close()


def refusal(service: str, exc: NetworkError, secrets: list[str]) -> AccountError:
    """The AccountError a failed identity call is, its line masked (the given secrets, any the process knows)."""
    # the service's own words were masked where the connector read them (`Connector.reason`: clip); here the
    # given secrets and any value the process knows are masked, and the line cut (a cut after masking leaks nothing)
    said = printable(_masked(exc.message, secrets).removeprefix(f"{service}: ")[:300])
    if isinstance(exc, Unauthorized):
        return IdentityRefused(f"{service} refused the token ({said}): give a valid one")
    if isinstance(exc, NotConfigured):
        return NotConfiguredError(said)
    if isinstance(exc, Malformed):
        return BadCredential(said)
    if isinstance(exc, RateLimited):
        return ServiceUnreachable(f"{service} asked to wait ({said}): try again later")
    if isinstance(exc, BadResponse) and (exc.status is None or exc.status < 500):
        return IdentityUnreadable(f"{service} did not say who the token belongs to ({said})")
    return ServiceUnreachable(f"{service} could not be asked who the token belongs to ({said}): try again later")


def _masked(text: str, secrets: list[str]) -> str:
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, "***")
    return redact(text)


def add_network(
    db: Any,
    *,
    user: str,
    service: str,
    credentials: Mapping[str, str],
    replace: bool = False,
    now: datetime,
    http: Any = None,
    settings: Settings | None = None,
    lease_seconds: float = LEASE_DEFAULT,
) -> Added:
    """Check the credentials (one identity call), then write the network: new, or with `replace` the existing
    one of this user and service given them. AccountError (its subclasses) for each refusal; nothing is written
    then."""
    user = check_user(user)
    fields, identity = identify(service, credentials, now=now, settings=settings, http=http, user=user)
    store = Store(db)
    existing = store.networks.find_one({"user": exactly(user), "service": exactly(service)})
    account = {"service": exactly(service), "accountId": exactly(identity.account_id)}
    other = store.networks.find_one({**account, "user": {"$ne": user}}, {"user": 1})
    shown = printable(clip(identity.name, 120))
    if existing is not None and not replace:
        raise AlreadyConnected(
            f"{printable(clip(user, 120))} has a {service} network already: {format_id(existing['_id'])} "
            "(--replace gives it these credentials)",
            existing["_id"],
        )
    if other is not None and not replace:
        raise AlreadyConnected(
            f"the {service} account {shown} is connected under another user already: {format_id(other['_id'])} "
            "(--replace connects it here too; that network stays as it is)",
            other["_id"],
        )
    note = f"the {service} account is also connected under another user: {format_id(other['_id'])}" if other else ""
    written = {**fields, **identity.fields, "accountId": identity.account_id, "accountName": identity.name}
    if existing is None:
        return _insert(store, user, service, written, identity, now, note)
    return _replace(store, existing, written, identity, now, note, lease_seconds)


def _insert(
    store: Store, user: str, service: str, written: dict, identity: Identity, now: datetime, note: str
) -> Added:
    doc = {"user": user, "service": service, **written, "mode": "initial", "errors": 0, "scheduledTo": now}
    network_id = store.add_network({**doc, "connectedAt": now})
    if network_id is None:  # another command added one between the look and the write
        found = store.networks.find_one({"user": exactly(user), "service": exactly(service)}, {"_id": 1}) or {}
        raise AlreadyConnected(
            f"{printable(clip(user, 120))} has a {service} network already: {format_id(found.get('_id'))} "
            "(--replace gives it these credentials)",
            found.get("_id"),
        )
    return Added(network_id, printable(clip(identity.name, 120)), False, identity.account_id, note)


def _replace(
    store: Store,
    existing: dict,
    written: dict,
    identity: Identity,
    now: datetime,
    note: str,
    lease_seconds: float,
) -> Added:
    """The existing network given the new credentials, its walk kept (started again for another account)."""
    network_id, lease = existing["_id"], existing.get("leaseUntil")
    if lease_state(lease, now, lease_seconds) == "held":
        raise NetworkInFlight(
            f"network {format_id(network_id)} is being run by {printable(clip(existing.get('leaseOwner'), 80))}: "
            "nothing changed (try again in a minute)"
        )
    unset = [*STALE_FIELDS, *(f for f in ("accessTokenSecret", "refreshToken") if f not in written)]
    changes = {**written, "scheduledTo": now, "connectedAt": now}
    last = existing.get("lastError")
    if isinstance(last, Mapping) and last.get("kind") == "unauthorized":  # the error the old token caused
        unset.append("lastError")
        changes["errors"] = 0
    before = existing.get("accountId")
    if isinstance(before, str) and before != identity.account_id:
        unset += PROGRESS_FIELDS
        changes["mode"] = "initial"
        note = "; ".join(x for x in ("another account than before: its walk starts again", note) if x)
    if not store.replace_credentials(network_id, lease, changes, unset):
        raise NetworkInFlight(f"network {format_id(network_id)}: a collector took it meanwhile; nothing changed")
    return Added(network_id, printable(clip(identity.name, 120)), True, identity.account_id, note)


def _settings() -> Settings:
    from ..settings import load_settings

    return load_settings()
