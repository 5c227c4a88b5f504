"""The kinds of value a setting holds: each a parser (text in, value out, ValueError naming the rule) with the
bounds it enforces, which the declaration (declaration.py) and the reference (reference.py) name.

pymongo and APScheduler are imported inside the parsers that need them: collector.sdk imports these settings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .masking import mask_text

ENVIRONMENTS = ("development", "test", "production")
DEFAULT_ENV = "production"
MAX_SECONDS = 366 * 86400  # every duration setting: beyond a year is a typo, and far beyond breaks date arithmetic
MAX_CONCURRENCY = 4096  # a pooled connection and two threads each (two runs per request slot)
MAX_DAYS = 36_500  # a century: past that the date arithmetic of the sweep overflows long before it matters
HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")


def _number(text: str) -> float:
    """A duration in seconds."""
    value = float(text)
    if value < 0 or value != value or value == float("inf"):
        raise ValueError("must be a finite number >= 0")
    if value > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS} seconds (366 days)")
    return value


def _positive_number(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise ValueError("must be a number > 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be a whole number >= 1")
    return value


def _concurrency(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_CONCURRENCY:
        raise ValueError(f"must be at most {MAX_CONCURRENCY}")
    return value


def _http_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http(s) URL with a host")
    return text.rstrip("/")


def _mongodb_uri(text: str) -> str:
    """Validated with pymongo's own parser, strictly: an unknown option or a bad option value is refused (an
    SRV URI is checked as a plain one: no DNS look-up here); then as the client reads it, without connecting (an
    authentication mechanism without what it needs): what the daemon would refuse at its start is refused here."""
    if not text.startswith(("mongodb://", "mongodb+srv://")):
        raise ValueError("must start with mongodb:// or mongodb+srv://")
    import warnings

    from pymongo import MongoClient, uri_parser
    from pymongo.errors import PyMongoError

    plain = text
    if text.startswith("mongodb+srv://"):
        hosts = text[len("mongodb+srv://") :].split("/", 1)[0].rsplit("@", 1)[-1]
        if "," in hosts or ":" in hosts.strip("[]").rsplit("]", 1)[-1]:
            raise ValueError("a mongodb+srv:// URI takes one host name without a port")
        plain = "mongodb://" + text[len("mongodb+srv://") :]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # strict: MongoClient only warns about an unknown option or a bad value, then ignores it
            uri_parser.parse_uri(plain, warn=False)
            MongoClient(plain, connect=False).close()
    except (PyMongoError, ValueError, TypeError) as exc:
        raise ValueError(f"pymongo refuses it: {mask_text(str(exc), text)}") from None
    return text


def _log_level(text: str) -> str:
    level = text.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return level


def _port(text: str) -> int:
    if not text.strip():
        return 0  # off
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError("must be a TCP port (1-65535), or empty or 0 for off")
    return value


def _address(text: str) -> str:
    import ipaddress

    ipaddress.ip_address(text.strip())  # ValueError names the bad address
    return text.strip()


def _host(text: str) -> str:
    """An IP address or a host name to bind to."""
    import ipaddress

    host = text.strip()
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not HOST_NAME.fullmatch(host) or len(host) > 253:
            raise ValueError("must be an IP address or a host name") from None
    return host


def _days(text: str) -> int:
    value = int(text)
    if not 0 <= value <= MAX_DAYS:
        raise ValueError(f"must be a whole number of days from 0 (off) to {MAX_DAYS}")
    return value


def _crontab(text: str) -> str:
    from datetime import UTC

    from apscheduler.triggers.cron import CronTrigger

    try:
        CronTrigger.from_crontab(text.strip(), timezone=UTC)
    except ValueError as exc:
        raise ValueError(f"must be a crontab expression (minute hour day month weekday), UTC: {exc}") from None
    return text.strip()


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of service names (empty: none)."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    for name in names:
        if not re.fullmatch(r"[a-z0-9_-]{1,40}", name):
            raise ValueError(f"{name!r} is not a service name (letters, digits, _ and -)")
    return names


SINK_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")  # a sink's name: SINK_<NAME>_* settings, metric labels, `sinks` _id
MAX_BATCH = 10_000  # documents per delivery to one sink
MAX_SINK_CONCURRENCY = 64  # deliveries in flight to one sink
MAX_PACE = 1_000_000  # items per second of a backfill or replay


def _sink_names(text: str) -> tuple[str, ...]:
    """A comma-separated list of sink names (empty: none)."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    for name in names:
        if not SINK_NAME.fullmatch(name):
            raise ValueError(f"{name[:60]!r} is not a sink name (a letter, then letters, digits and _; 40 at most)")
    return names


def _sink_kind(text: str) -> str:
    kind = text.strip().lower()
    if kind and not SINK_NAME.fullmatch(kind):
        raise ValueError("must be the name of a kind of sink (letters, digits and _)")
    return kind


def _sink_url(text: str) -> str:
    """An http(s) URL with a host and no credentials (those go in their own, masked, settings)."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL with a host")
    if "@" in parts.netloc:
        raise ValueError("must not hold credentials (give them in the sink's own settings, which are masked)")
    return text.strip()


def _bounded_int(high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = _positive_int(text)
        if value > high:
            raise ValueError(f"must be at most {high}")
        return value

    return parse


def _pace(text: str) -> float:
    value = float(text)
    if not 0 < value <= MAX_PACE:  # NaN fails too
        raise ValueError(f"must be a number > 0 and at most {MAX_PACE}")
    return value


def _log_format(text: str) -> str:
    value = text.strip().lower()
    if value not in ("text", "json"):
        raise ValueError("must be text or json")
    return value


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _any(text: str) -> str:
    return text


def _path(text: str) -> str:
    """A file or directory path; whether it can be used is checked where it is resolved (trust.py)."""
    if "\x00" in text:
        raise ValueError("must not hold a NUL character")
    return text


KEY_BYTES = 32  # a token key: 32 random bytes (AES-256), written in base64
MAX_KEYS = 32  # keys accepted at once (the current one and the old ones): more is a mistake
KEY_RULE = "must be 32 random bytes in base64, e.g. the output of `openssl rand -base64 32`"
_KEY_TEXT = re.compile(r"[A-Za-z0-9+/_-]{43}=?")


def key_bytes(text: str) -> bytes:
    """A token key's 32 bytes from its base64 text (standard or URL-safe alphabet, padded or not). The error never
    quotes the text."""
    text = text.strip()
    if not _KEY_TEXT.fullmatch(text):
        raise ValueError(KEY_RULE)
    import base64

    return base64.urlsafe_b64decode(text.rstrip("=").translate(str.maketrans("+/", "-_")) + "=")


def _token_key(text: str) -> str:
    """One token key (empty: none), checked."""
    text = text.strip()
    if text:
        key_bytes(text)
    return text


def key_list(text: str) -> list[str]:
    """Token keys separated by commas or white space."""
    return list(dict.fromkeys(k for k in re.split(r"[\s,]+", text.strip()) if k))


def _token_keys(text: str) -> str:
    """Token keys, comma-separated (empty: none), each checked; given back comma-separated."""
    keys = key_list(text)
    if len(keys) > MAX_KEYS:
        raise ValueError(f"at most {MAX_KEYS} keys")
    for index, key in enumerate(keys, 1):
        try:
            key_bytes(key)
        except ValueError:
            raise ValueError(f"key {index} {KEY_RULE}") from None
    return ",".join(keys)


@dataclass(frozen=True)
class Kind:
    """What a setting holds: `name` for the reference, `parse` for the value, and the bounds `parse` enforces
    (None: none; `above` means the value must exceed `low`, not just reach it)."""

    name: str
    parse: Callable[[str], Any]
    low: int | None = None
    high: int | None = None
    above: bool = False

    def bounds(self) -> str:
        """The bounds as the reference prints them ("" when none)."""
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.above else '≥'} {self.low}")
        if self.high is not None:
            parts.append(f"≤ {self.high}")
        return ", ".join(parts)


MONGODB_URI = Kind("MongoDB URI", _mongodb_uri)
SECONDS = Kind("seconds", _number, 0, MAX_SECONDS)
POSITIVE_SECONDS = Kind("seconds", _positive_number, 0, MAX_SECONDS, above=True)
COUNT = Kind("whole number", _positive_int, 1)
CONCURRENCY = Kind("whole number", _concurrency, 1, MAX_CONCURRENCY)
TEXT = Kind("text, not empty", _text)
HTTP_URL = Kind("http(s) URL", _http_url)
BOOLEAN = Kind("true or false", _bool)
LOG_LEVEL = Kind("DEBUG, INFO, WARNING, ERROR or CRITICAL", _log_level)
LOG_FORMAT = Kind("text or json", _log_format)
PORT = Kind("TCP port (empty or 0: off)", _port, 0, 65535)
LISTEN_PORT = Kind("TCP port (0: any free one, said at the start)", _port, 0, 65535)
ADDRESS = Kind("IP address", _address)
HOST = Kind("IP address or host name", _host)
DAYS = Kind("days (0: off)", _days, 0, MAX_DAYS)
CRONTAB = Kind("crontab (UTC)", _crontab)
NAMES = Kind("service names, comma-separated", _names)
SINK_NAMES = Kind("sink names, comma-separated", _sink_names)
SINK_KIND = Kind("kind of sink (empty: the sink's name)", _sink_kind)
SINK_URL = Kind("http(s) URL, no credentials", _sink_url)
BATCH = Kind("whole number", _bounded_int(MAX_BATCH), 1, MAX_BATCH)
SINK_CONCURRENCY = Kind("whole number", _bounded_int(MAX_SINK_CONCURRENCY), 1, MAX_SINK_CONCURRENCY)
PACE = Kind("items per second", _pace, 0, MAX_PACE, above=True)
ANY_TEXT = Kind("text (empty: not configured)", _any)
CA_PATH = Kind("file or directory path (empty: see Details)", _path)
TOKEN_KEY = Kind("32 bytes in base64 (empty: none)", _token_key)
TOKEN_KEYS = Kind("keys in base64, comma-separated (empty: none)", _token_keys)
KEY_FILE = Kind("file path (empty: none)", _path)
ENVIRONMENT = Kind(" or ".join((", ".join(ENVIRONMENTS[:-1]), ENVIRONMENTS[-1])), _any)
