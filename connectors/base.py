"""What every connector shares: the run context (Job), the Result it returns, response checks and quota parsing.

A connector does HTTP and mapping only. It never touches the database: the engine saves items and state.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, Mapping

import requests

from collector.errors import (
    BadResponse,
    Malformed,
    NotConfigured,
    Quota,
    RateLimited,
    TokenExpired,
    Transient,
    Unauthorized,
)
from collector.http import Http, where
from collector.redaction import SECRETS
from collector.validate import IDENTITY, check_identity
from collector.settings import Settings
from collector.timeutil import after, as_utc, from_epoch, parse_iso, to_ms

SECRET_FIELDS = ("accessToken", "accessTokenSecret", "refreshToken")
ENTRY_ERRORS = (KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError, OverflowError)
log = logging.getLogger("collector.connectors")


@dataclass(frozen=True)
class Job:
    """One run of one network: its document (read only), the mode to run in, and the time."""

    network: Mapping[str, Any]
    mode: str  # 'initial' or 'normal' (a rateLimit network runs in its prevMode)
    now: datetime

    @property
    def token(self) -> str:
        return self.network["accessToken"]

    def with_network(self, changes: Mapping[str, Any]) -> "Job":
        return Job({**self.network, **changes}, self.mode, self.now)

    def state_int(self, name: str, default: int, minimum: int = 0) -> int:
        value = self.network.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise Malformed(f"field {name!r} must be a whole number >= {minimum}, got {value!r}")
        return value

    def state_datetime(self, name: str) -> datetime | None:
        value = self.network.get(name)
        if value is None or isinstance(value, datetime):
            return value
        raise Malformed(f"field {name!r} must be a date, got {type(value).__name__}")


@dataclass
class Result:
    """What one run collected. `state` holds the connector's own fields to save (page, cursor, markers);
    `done` says the initial history is complete; `quota` is the last rate-limit facts the API gave."""

    items: list[dict]
    state: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    quota: Quota | None = None
    wait_until: datetime | None = None  # the API asked not to be called again before this (e.g. `backoff`)
    tokens: dict[str, Any] = field(default_factory=dict)  # obtained by a token refresh during the run


class Connector:
    """Base class. Subclasses set `name` and implement `initial` and `normal`."""

    name: ClassVar[str] = ""
    item_type: ClassVar[str | None] = None  # the items' `type` when it is not the service name (gists: 'github')
    required_fields: ClassVar[tuple[str, ...]] = ("accessToken",)
    required_settings: ClassVar[tuple[str, ...]] = ()  # app keys the connector cannot work without
    quota_group: ClassVar[str | None] = None  # services that share one quota per token (GitHub and gists)
    refreshable: ClassVar[bool] = False  # access tokens expire and can be refreshed (implement `refresh`)
    identity_field: ClassVar[str | None] = None  # a network field looked up once from the API when absent

    @property
    def type_of_items(self) -> str:
        return self.item_type or self.name

    @property
    def quota_scope(self) -> str:
        return self.quota_group or self.name

    def __init__(self, settings: Settings, http: Http):
        self.settings = settings
        self.http = http
        self.skipped = 0  # entries of this run's pages that could not be mapped, and why the first was not
        self.skip_reason: str | None = None

    # --- the two modes ------------------------------------------------------------------------------
    def run(self, job: Job) -> Result:
        self.validate(job.network)
        try:
            return self.run_mode(job)
        except TokenExpired:
            if not self.can_refresh(job):
                raise
        tokens = self.refresh(job)  # a refused refresh raises Unauthorized
        SECRETS.add(tokens.values())  # hidden from every log line from now on (the engine lets go after saving)
        try:
            result = self.run_mode(job.with_network(tokens))  # retried once; a second expiry is Unauthorized
        except Exception as error:
            # the old refresh token may be spent already (rotating services): the new ones must be saved anyway
            error.refreshed = tokens
            raise
        result.state.update(tokens)
        result.tokens = tokens
        return result

    def run_mode(self, job: Job) -> Result:
        identity = None
        if self.identity_field:
            known = job.network.get(self.identity_field)
            identity = known if isinstance(known, str) and known else self.lookup_identity(job)
            if not IDENTITY.match(identity):
                raise BadResponse(f"{self.name}: the API gave a {self.identity_field} that is not a plain name or id")
            job = job.with_network({self.identity_field: identity})
        result = self.initial(job) if job.mode == "initial" else self.normal(job)
        if identity is not None:
            result.state.setdefault(self.identity_field, identity)
        return result

    def lookup_identity(self, job: Job) -> str:  # pragma: no cover - only with identity_field
        raise NotImplementedError

    # --- token refresh (services whose access tokens expire) ---------------------------------------
    def can_refresh(self, job: Job) -> bool:
        return self.refreshable and bool(job.network.get("refreshToken"))

    def refresh(self, job: Job) -> dict[str, Any]:  # pragma: no cover - only called when can_refresh
        raise NotImplementedError

    def oauth2_refresh(self, job: Job, token_url: str, client_id: str | None, client_secret: str | None,
                       basic_auth: bool = False) -> dict[str, Any]:
        """The standard OAuth 2 refresh-token grant. Returns the new token fields of the network."""
        data = {"grant_type": "refresh_token", "refresh_token": job.network["refreshToken"]}
        auth = None
        if basic_auth:
            auth = (client_id or "", client_secret or "")
        else:
            data |= {k: v for k, v in (("client_id", client_id), ("client_secret", client_secret)) if v}
        response = self.http.post(token_url, data=data, auth=auth)
        if response.status_code in (400, 401, 403):
            raise Unauthorized(f"token refresh refused: {response.status_code} {_reason(response)}: "
                               f"POST {where(token_url)}", response.status_code)
        body, response = self.parse_json(job, response)
        if not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            raise BadResponse(f"token refresh answer has no access_token: POST {where(token_url)}")
        tokens = {"accessToken": body["access_token"]}
        if isinstance(body.get("refresh_token"), str):
            tokens["refreshToken"] = body["refresh_token"]
        expires_in = body.get("expires_in")
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and math.isfinite(expires_in):
            tokens["accessTokenExpiresAt"] = after(job.now, expires_in)
        return tokens

    def initial(self, job: Job) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError

    def normal(self, job: Job) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError

    path_fields: ClassVar[tuple[str, ...]] = ()  # network fields the connector puts into URLs

    def validate(self, network: Mapping[str, Any]) -> None:
        for name in self.required_settings:
            self.setting(name)
        for name in {*self.path_fields, *((self.identity_field,) if self.identity_field else ())}:
            check_identity(network, name)
        for name in self.required_fields:
            value = network.get(name)
            if not isinstance(value, str) or not value.strip():
                raise Malformed(f"field {name!r} is missing or not a non-empty string")

    def setting(self, name: str) -> str:
        value = self.settings.get(name)
        if not value:
            raise NotConfigured(f"setting {name} is not set (the {self.name} connector needs it)")
        return value

    def map_entries(self, entries: Any, map_one) -> list[dict]:
        """Map a list of API entries to items, each on its own: an entry that cannot be mapped is skipped and
        counted (`skipped`, `skip_reason`). BadResponse only when the list is not a list, or when no entry of a
        non-empty page could be mapped."""
        if not isinstance(entries, list):
            raise BadResponse(f"{self.name}: expected a list of entries, got {type(entries).__name__}")
        items, first_reason = [], None
        for entry in entries:
            try:
                items.append(map_one(entry))
            except (*ENTRY_ERRORS, BadResponse) as exc:
                first_reason = first_reason or entry_error(exc)
        if entries and not items:
            raise BadResponse(f"{self.name}: no entry of the page could be read ({len(entries)} entries; "
                              f"first: {first_reason})")
        self.skip(len(entries) - len(items), first_reason)
        return items

    def skip(self, count: int, reason: str | None) -> None:
        if count > 0:
            self.skipped += count
            self.skip_reason = self.skip_reason or reason

    # --- HTTP helpers ------------------------------------------------------------------------------
    def get_json(self, job: Job, url: str, *, params=None, headers=None) -> tuple[Any, requests.Response]:
        return self.parse_json(job, self.http.get(url, params=params, headers=headers))

    def parse_json(self, job: Job, response: requests.Response) -> tuple[Any, requests.Response]:
        self.check(job, response)
        try:
            return response.json(), response
        except (ValueError, RecursionError):
            raise BadResponse(f"{response.status_code} body is not JSON: GET {where(response.url)}",
                              response.status_code) from None

    def check(self, job: Job, response: requests.Response) -> None:
        """Raise the typed error a response means; return for a usable one."""
        status = response.status_code
        if status < 400:
            return
        message = f"{status} {_reason(response)}: GET {where(response.url)}"
        if status == 401:
            raise (TokenExpired if job.network.get("refreshToken") else Unauthorized)(message, status)
        if status in (403, 429):
            reset = self.rate_limit_reset(job, response)
            if reset is not None:
                raise RateLimited(message, reset, status)
        if status >= 500:
            raise Transient(message, status)
        raise BadResponse(message, status)

    def rate_limit_reset(self, job: Job, response: requests.Response) -> datetime | None:
        """When a 403/429 is a quota answer, the time to come back; None when it is not one."""
        quota = self.quota(response, job.now)
        retry_after = _retry_after(response.headers.get("Retry-After"), job.now)
        if retry_after is None and not (quota and quota.remaining == 0) and response.status_code != 429:
            return None
        candidates = [t for t in (retry_after, quota.reset if quota else None) if t is not None]
        return max(candidates) if candidates else job.now + timedelta(seconds=60)

    def quota(self, response: requests.Response, now: datetime | None = None) -> Quota | None:
        """GitHub-style X-RateLimit-* headers with an epoch reset; override for other conventions."""
        return header_quota(response, "X-RateLimit-", "epoch", now)


def header_quota(response: requests.Response, prefix: str, reset_kind: str,
                 now: datetime | None = None) -> Quota | None:
    """Quota from `<prefix>Remaining/-Limit/-Reset` headers; the reset is `epoch` seconds, `seconds` from now,
    or an `iso` date (epoch accepted too)."""
    headers = response.headers
    remaining = _number(headers.get(f"{prefix}Remaining"))
    if remaining is None:
        return None
    limit = _number(headers.get(f"{prefix}Limit"))
    raw = headers.get(f"{prefix}Reset")
    reset = None
    if raw is not None:
        number = _number(raw)
        try:
            if reset_kind == "seconds":
                reset = after(now, number) if number is not None and now is not None else None
            elif number is not None:
                reset = from_epoch(number)
            elif reset_kind == "iso":
                reset = parse_iso(raw)
        except (ValueError, OverflowError):
            reset = None
        if reset is None:
            log.warning("unreadable %sReset header %r from %s: ignored", prefix, raw[:40], where(response.url))
    return Quota(remaining=int(max(min(remaining, 2**53), -1)),
                 limit=int(min(limit, 2**53)) if limit is not None else None, reset=reset)


def _number(value: str | None) -> float | None:
    """A finite number from a header, or None."""
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def bearer(job: Job) -> dict[str, str]:
    return {"Authorization": f"Bearer {job.token}"}


def _retry_after(value: str | None, now: datetime) -> datetime | None:
    """Retry-After as delay-seconds or as an HTTP-date (RFC 9110); None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return after(now, int(text[:30]) if len(text) <= 30 else float("inf"))
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        moment = None
    if moment is None:
        log.warning("unreadable Retry-After header %r: ignored", text[:40])
        return None
    return to_ms(as_utc(moment))


def entry_error(exc: BaseException) -> str:
    """Why an entry could not be mapped, without its content: the exception type and a short message."""
    if isinstance(exc, BadResponse):
        return exc.message[:120]
    if isinstance(exc, KeyError):
        return f"missing field {str(exc)[:60]}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return f"{type(exc).__name__}: {str(exc)[:100]}"


def _reason(response: requests.Response) -> str:
    """A short reason: the API's own `message`/`error` text if the body has one, else the HTTP reason."""
    try:
        body = response.json()
    except (ValueError, RecursionError):
        body = None
    if isinstance(body, dict):
        for key in ("message", "error_message", "error", "detail"):
            if isinstance(body.get(key), str):
                return body[key][:200]
    return response.reason or "error"
