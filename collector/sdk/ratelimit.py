"""Rate-limit header conventions (`Connector.rate_limit`), and the reading of Retry-After.

Every value from a server is parsed defensively: an unreadable one is logged and ignored, an absurd one
saturates (the engine then clamps waits to RATE_LIMIT_MAX_WAIT), none raises.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal

import requests

from .errors import Quota
from .http import where
from .redaction import clip
from .timeutil import after, as_utc, from_epoch, parse_iso, to_ms

log = logging.getLogger("collector.connectors")
ResetKind = Literal["epoch", "seconds", "iso"]


@dataclass(frozen=True)
class RateLimitHeaders:
    """`<prefix>Remaining`, `<prefix>Limit` and `<prefix>Reset` headers; the reset is `epoch` seconds, `seconds`
    from now, or an `iso` date (epoch accepted too)."""

    prefix: str = "X-RateLimit-"
    reset: ResetKind = "epoch"

    def quota(self, response: requests.Response, now: datetime | None) -> Quota | None:
        headers = response.headers
        remaining = number(headers.get(f"{self.prefix}Remaining"))
        if remaining is None:
            return None
        limit = number(headers.get(f"{self.prefix}Limit"))
        raw = headers.get(f"{self.prefix}Reset")
        reset = self.reset_time(raw, now) if raw is not None else None
        if raw is not None and reset is None:
            shown = clip(raw, 40)
            log.warning("unreadable %sReset header %r from %s: ignored", self.prefix, shown, where(response.url))
        return Quota(
            remaining=int(max(min(remaining, 2**53), -1)),
            limit=int(min(limit, 2**53)) if limit is not None else None,
            reset=reset,
        )

    def reset_time(self, raw: str, now: datetime | None) -> datetime | None:
        value = number(raw)
        try:
            if self.reset == "seconds":
                return after(now, value) if value is not None and now is not None else None
            if value is not None:
                return from_epoch(value)
            return parse_iso(raw) if self.reset == "iso" else None
        except (ValueError, OverflowError):
            return None


def number(value: str | None) -> float | None:
    """A finite number from a header, or None."""
    try:
        result = float(value) if value is not None else None
    except ValueError:
        return None
    return result if result is not None and math.isfinite(result) else None


def retry_after(value: str | None, now: datetime) -> datetime | None:
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
        log.warning("unreadable Retry-After header %r: ignored", clip(text, 40))
        return None
    return to_ms(as_utc(moment))
