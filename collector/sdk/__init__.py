"""The connector SDK: everything a connector may use, and all it should import.

Connectors (built-in in `connectors/`, or third-party packages registered under the `likeastore.connectors`
entry-point group) import from here only; the engine reaches connectors only through that registry. The import
graph reads `connectors -> collector.sdk <- engine` (tests/test_architecture.py keeps it so).
"""

from ..settings import Settings
from .auth import AllOf, Authentication, Bearer, BearerAuth, OAuth1OrBearer, OAuth1Signed, QueryParamAuth, WithAppKey
from .connector import Connector, Job, Result, dig, error_json
from .decoding import bounded_decompress
from .errors import (
    BadResponse,
    Interrupted,
    Malformed,
    NetworkError,
    NotConfigured,
    Quota,
    RateLimited,
    Retired,
    TokenExpired,
    Transient,
    Unauthorized,
    UnknownService,
)
from .htmltext import first_line, html_to_text
from .http import Http, where
from .items import Item, entry_id
from .job import ConnectorAPI
from .paging import (
    BodyCursor,
    LinkCursor,
    Offset,
    Page,
    PagedConnector,
    PageNumber,
    Paging,
    at,
    body_true,
    link_next,
    more_signal,
    next_token,
    whole_number,
)
from .poll import Poll
from .ratelimit import RateLimitHeaders, retry_after
from .redaction import clip
from .refresh import IdentityLookup, OAuth2Refresh, TokenRefresh
from .safeurl import safe_base_url
from .timeutil import UTC, after, as_utc, from_epoch, optional_date, optional_epoch, parse_iso, to_ms, utcnow
from .validate import keepable_header
from .whoami import Credential, Identity, WhoAmI

__all__ = [
    "Poll",
    "keepable_header",
    "error_json",
    "optional_epoch",
    "optional_date",
    "entry_id",
    "ConnectorAPI",
    "AllOf",
    "Authentication",
    "BadResponse",
    "Bearer",
    "BearerAuth",
    "BodyCursor",
    "Connector",
    "Credential",
    "Http",
    "Identity",
    "IdentityLookup",
    "Interrupted",
    "Item",
    "Job",
    "LinkCursor",
    "Malformed",
    "NetworkError",
    "NotConfigured",
    "OAuth1OrBearer",
    "OAuth1Signed",
    "OAuth2Refresh",
    "Offset",
    "Page",
    "PagedConnector",
    "PageNumber",
    "Paging",
    "QueryParamAuth",
    "Quota",
    "RateLimitHeaders",
    "RateLimited",
    "Result",
    "Retired",
    "Settings",
    "TokenExpired",
    "TokenRefresh",
    "Transient",
    "UTC",
    "Unauthorized",
    "UnknownService",
    "WhoAmI",
    "WithAppKey",
    "after",
    "as_utc",
    "at",
    "body_true",
    "bounded_decompress",
    "clip",
    "dig",
    "first_line",
    "from_epoch",
    "html_to_text",
    "link_next",
    "more_signal",
    "next_token",
    "parse_iso",
    "retry_after",
    "safe_base_url",
    "to_ms",
    "utcnow",
    "where",
    "whole_number",
]
