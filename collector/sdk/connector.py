"""The connector base: the run context (Job), the Result a run returns, and `Connector` with its declarations.

A connector does HTTP and mapping only; it never touches the database (the engine saves items and state). It
declares what it shares with others instead of writing it: `authentication`, `rate_limit`, `token_refresh`,
`identity`, `whoami` and `credentials` (collector/sdk/whoami.py), and for paged services a `paging` strategy
(collector/sdk/paging.py).
"""

from __future__ import annotations

import functools
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

import msgspec
import orjson
import requests

from ..modes import Mode
from ..settings import Settings
from .auth import Authentication, Bearer
from .errors import (
    BadResponse,
    Malformed,
    NetworkError,
    NotConfigured,
    Quota,
    RateLimited,
    TokenExpired,
    Transient,
    Unauthorized,
)
from .http import Http, where
from .items import Item
from .job import Job
from .poll import Poll
from .ratelimit import RateLimitHeaders, retry_after
from .redaction import SECRETS, clip
from .refresh import IdentityLookup, TokenRefresh
from .validate import check_identity
from .whoami import Credential, Identity, WhoAmI

ENTRY_ERRORS = (KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError, OverflowError)
log = logging.getLogger("collector.connectors")


@dataclass
class Result:
    """What one run collected. `state` holds the connector's own fields to save (page, cursor, markers);
    `done` says the initial history is complete; `quota` is the last rate-limit facts the API gave."""

    items: list[Item]
    state: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    quota: Quota | None = None
    wait_until: datetime | None = None  # the API asked not to be called again before this (e.g. `backoff`)
    tokens: dict[str, Any] = field(default_factory=dict)  # obtained by a token refresh during the run


class Connector(ABC):
    """Base class. Subclasses set `name`, implement `initial` and `normal` (or subclass PagedConnector and write
    `map`), and declare what differs from the defaults below."""

    name: ClassVar[str] = ""
    item_type: ClassVar[str | None] = None  # the items' `type` when it is not the service name (gists: 'github')
    required_fields: ClassVar[tuple[str, ...]] = ("accessToken",)
    required_settings: ClassVar[tuple[str, ...]] = ()  # app keys the connector cannot work without
    path_fields: ClassVar[tuple[str, ...]] = ()  # network fields the connector puts into URLs
    quota_group: ClassVar[str | None] = None  # services that share one quota per token (GitHub and gists)
    authentication: ClassVar[Authentication] = Bearer()
    headers: ClassVar[Mapping[str, str]] = {}  # sent with every request
    rate_limit: ClassVar[RateLimitHeaders | None] = RateLimitHeaders()
    token_refresh: ClassVar[TokenRefresh | None] = None  # for services whose access tokens expire
    identity: ClassVar[IdentityLookup | None] = None  # the user's id on the service, looked up once if absent
    whoami: ClassVar[WhoAmI | None] = None  # who a token belongs to: one call (`identify`), when a network is added
    # the fields an operator gives when adding a network; None: `required_fields` not filled by `whoami`, and an
    # optional refreshToken when the connector declares a `token_refresh`
    credentials: ClassVar[tuple[Credential, ...] | None] = None
    # A page that is a JSON list of entries may declare the shape of one entry: a TypedDict (total=False) of only
    # the fields `map` reads, values typed Any where `map` takes anything. Such a page is decoded by msgspec into
    # exactly those fields (about a third of the CPU of decoding all of them); a page that does not fit the
    # shape (an odd entry, JSON only the standard library reads) is decoded whole, entry by entry, as without it.
    entry_shape: ClassVar[Any] = None

    def __init__(self, settings: Settings, http: Http):
        self.settings = settings
        self.http = http
        self.skipped = 0  # entries of this run's pages that could not be mapped, and why the first was not
        self.skip_reason: str | None = None

    @property
    def type_of_items(self) -> str:
        return self.item_type or self.name

    @property
    def quota_scope(self) -> str:
        return self.quota_group or self.name

    # --- the two modes ------------------------------------------------------------------------------
    @abstractmethod
    def initial(self, job: Job) -> Result:
        """One step of the history walk (one page), keeping the position in the returned state."""

    @abstractmethod
    def normal(self, job: Job) -> Result:
        """What is new since the last run."""

    def run(self, job: Job) -> Result:
        """Check the network's fields, then run it."""
        self.validate(job.network)
        return self.run_validated(job)

    def run_validated(self, job: Job) -> Result:
        """Run a network whose fields were checked (`validate`; the engine checks them once, before the run)."""
        try:
            return self.run_mode(job)
        except TokenExpired:
            if self.token_refresh is None or not self.token_refresh.applies(job):
                raise
        tokens = self.token_refresh.refresh(self, job)  # a refused refresh raises Unauthorized
        SECRETS.add(tokens.values())  # hidden from every log line from now on (the engine lets go after saving)
        try:
            result = self.run_mode(job.with_network(tokens))  # retried once; a second expiry is Unauthorized
        except Exception as error:
            # the old refresh token may be spent already (rotating services): the new ones must be saved anyway
            error.refreshed = tokens  # type: ignore[attr-defined]
            raise
        result.state.update(tokens)
        result.tokens = tokens
        return result

    def run_mode(self, job: Job) -> Result:
        identity = None
        if self.identity is not None:
            known = job.network.get(self.identity.field)
            identity = self.identity.resolve(self, job)
            job = job.with_network({self.identity.field: identity})
        try:
            result = self.initial(job) if job.mode == Mode.INITIAL else self.normal(job)
        except NetworkError as error:
            lookup = self.identity
            if lookup is None or error.status not in lookup.recheck_on or identity != known:
                raise
            fresh = lookup.lookup(self, job)  # a known name refused: the account may have been renamed; once
            if fresh == identity:
                raise
            log.info("%s: %s changed from %r to %r; running again", self.name, lookup.field, identity, fresh)
            identity, job = fresh, job.with_network({lookup.field: fresh})
            result = self.initial(job) if job.mode == Mode.INITIAL else self.normal(job)
            result.state[lookup.field] = fresh
        if self.identity is not None:
            result.state.setdefault(self.identity.field, identity)
        return result

    # --- the poll (sdk/poll.py) --------------------------------------------------------------------------
    def poll(self, job: Job) -> Poll | None:
        """The request `normal` sends first, when the engine may send it on its event loop; None (the default):
        the run sends its requests itself."""
        return None

    def unchanged(self, job: Job, response: requests.Response) -> Result:
        """The run of a poll answered with one of its `unchanged` statuses: nothing new, the quota it told."""
        return Result([], quota=self.quota(response))

    # --- who a token belongs to ----------------------------------------------------------------------
    @classmethod
    def credential_fields(cls) -> tuple[Credential, ...]:
        """What an operator gives to add a network of this service (`credentials`, or what it derives to)."""
        if cls.credentials is not None:
            return cls.credentials
        filled = set(cls.whoami.fields) if cls.whoami is not None else set()
        given = tuple(Credential(f) for f in cls.required_fields if f not in filled)
        return given + ((Credential("refreshToken", required=False),) if cls.token_refresh is not None else ())

    def identify(self, job: Job) -> Identity:
        """Who the network's token belongs to, by the one call `whoami` declares (NotConfigured without one)."""
        if self.whoami is None:
            raise NotConfigured(f"the {self.name} connector declares no identity call (`whoami`)")
        for name in self.required_settings:
            self.setting(name)
        return self.whoami.identify(self, job)

    # --- checks ------------------------------------------------------------------------------------
    def validate(self, network: Mapping[str, Any]) -> None:
        for name in self.required_settings:
            self.setting(name)
        for name in {*self.path_fields, *((self.identity.field,) if self.identity else ())}:
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

    def map_entries(self, entries: Any, map_one) -> list[Item]:
        """Map a list of API entries to items, each on its own: an entry that cannot be mapped is skipped and
        counted (`skipped`, `skip_reason`), one of the page or all of it (the page's end-of-list signal still
        decides where the walk goes: collector/sdk/paging.py). BadResponse only when the list is not a list."""
        if not isinstance(entries, list):
            raise BadResponse(f"{self.name}: expected a list of entries, got {type(entries).__name__}")
        items, first_reason = [], None
        for entry in entries:
            try:
                items.append(map_one(entry))
            except (*ENTRY_ERRORS, BadResponse) as exc:
                first_reason = first_reason or entry_error(exc)
        self.skip(len(entries) - len(items), first_reason)
        return items

    def skip(self, count: int, reason: str | None) -> None:
        if count > 0:
            self.skipped += count
            self.skip_reason = self.skip_reason or reason

    # --- HTTP ----------------------------------------------------------------------------------------
    def get(self, job: Job, url: str, *, params=None, headers=None) -> requests.Response:
        """GET with the connector's headers and authentication."""
        return self.http.get(
            url, params=params, headers={**self.headers, **(headers or {})}, auth=self.authentication(self, job)
        )

    def get_json(self, job: Job, url: str, *, params=None, headers=None) -> tuple[Any, requests.Response]:
        return self.parse_json(job, self.get(job, url, params=params, headers=headers))

    def parse_entries(self, job: Job, response: requests.Response) -> tuple[Any, requests.Response]:
        """A page's list of entries: decoded to `entry_shape` when the connector declares one and the page fits
        it, else as `parse_json` decodes it (the result is the same for every field `map` reads)."""
        if self.entry_shape is not None:
            self.check(job, response)
            self.refuse_dense(response.content, response)
            try:
                return page_decoder(self.entry_shape).decode(response.content), response
            except (msgspec.MsgspecError, ValueError, RecursionError):
                pass  # not the usual page: the whole JSON, as without a shape, settles what it is
        return self.parse_json(job, response)

    def parse_json(self, job: Job, response: requests.Response) -> tuple[Any, requests.Response]:
        self.check(job, response)
        self.refuse_dense(response.content, response)
        try:
            return loads(response.content), response
        except (ValueError, RecursionError):
            raise BadResponse(
                f"{response.status_code} body is not JSON: GET {where(response.url)}", response.status_code
            ) from None

    def refuse_dense(self, content: bytes, response: requests.Response) -> None:
        """BadResponse for a JSON body that would become more Python objects than a page may (`too_dense`)."""
        values = too_dense(content)
        if values is not None:
            raise BadResponse(
                f"{response.status_code} body of {len(content)} bytes holds up to {values} JSON values, more than "
                f"{PAGE_VALUES}: GET {where(response.url)}",
                response.status_code,
            )

    def check(self, job: Job, response: requests.Response) -> None:
        """Raise the typed error a response means; return for a usable one."""
        status = response.status_code
        if status < 400:
            return
        message = f"{status} {self.reason(response)}: GET {where(response.url)}"
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
        wait = retry_after(response.headers.get("Retry-After"), job.now)
        if wait is None and not (quota and quota.remaining == 0) and response.status_code != 429:
            return None
        candidates = [t for t in (wait, quota.reset if quota else None) if t is not None]
        return max(candidates) if candidates else job.now + timedelta(seconds=60)

    def quota(self, response: requests.Response, now: datetime | None = None) -> Quota | None:
        """The rate-limit facts of a response, by the connector's `rate_limit` convention."""
        return self.rate_limit.quota(response, now) if self.rate_limit is not None else None

    @staticmethod
    def reason(response: requests.Response) -> str:
        """A short reason: the API's own `message`/`error` text if the body has one, else the HTTP reason."""
        body = error_json(response)
        if isinstance(body, dict):
            for key in ("message", "error_message", "error", "detail"):
                if isinstance(body.get(key), str):
                    return clip(body[key], 200)
        return response.reason or "error"


@functools.cache
def page_decoder(shape: Any) -> msgspec.json.Decoder:
    """The decoder of a page that is a list of `shape` entries (one per connector class, made once)."""
    return msgspec.json.Decoder(list[shape])


# A JSON page becomes Python objects: ~2.4 times its bytes for a real page, but up to 24 times for the densest
# (`[{},{},…]`: an empty dict per 3 bytes). Past COUNTED_FROM bytes a page may hold at most PAGE_VALUES values, so
# its objects stay under ~18 MiB however it is written (below it, 24 x 768 KiB is that already); real pages hold
# one value per ~35 bytes (120,000 in the 4 MiB cap). Counting costs ~0.3 ms per 500 KB: pages under the line
# (a 100-star GitHub page is ~530 KB) are not counted.
COUNTED_FROM = 768 * 1024
PAGE_VALUES = 200_000


def too_dense(content: bytes) -> int | None:
    """The number of values a JSON body may hold (its `,`, `[` and `{`, those inside strings too: an upper bound)
    when that is more than PAGE_VALUES; None for a body within the bound, or under COUNTED_FROM bytes."""
    if len(content) <= COUNTED_FROM:
        return None
    values = content.count(b",") + content.count(b"[") + content.count(b"{")
    return values if values > PAGE_VALUES else None


def error_json(response: requests.Response) -> Any:
    """The JSON of an error answer, or None when it is not JSON, or too dense to read (`too_dense`)."""
    content = response.content or b""
    if too_dense(content) is not None:
        return None
    try:
        return loads(content)
    except (ValueError, RecursionError):
        return None


def loads(content: bytes) -> Any:
    """JSON from bytes: orjson (about twice as fast on a 600 KB page), and the standard library for what orjson
    refuses but JSON allows (an escaped lone surrogate: that item is then refused alone, not the page)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


def entry_error(exc: BaseException) -> str:
    """Why an entry could not be mapped, without its content: the exception type and a short message."""
    if isinstance(exc, BadResponse):
        return clip(exc.message, 120)
    if isinstance(exc, KeyError):
        return f"missing field {clip(exc, 60)}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return f"{type(exc).__name__}: {clip(exc, 100)}"


def dig(body: Any, path: tuple[str, ...]) -> Any:
    """The value at `path` in nested dicts, or None where a step is missing or not a dict."""
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    return body
