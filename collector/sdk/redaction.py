"""One redaction for every log record of the process, third-party loggers included.

Two nets:
- **values**: every secret the collector knows (tokens of the networks it holds, tokens a refresh obtained, app
  keys and secrets from the settings, the MongoDB password) is replaced by `***` wherever it appears, also in
  its percent-encoded forms (OAuth signature base strings, query strings);
- **shapes**: the value after a secret-looking field name (`"accessToken": "..."` in pymongo's command logs,
  `Authorization: Bearer ...`, `key=...` in a query string) is masked even when the value is not known yet.

`install()` wraps the logging record factory, so every record is redacted when it is made, whatever handler
(a file, journald, pytest's capture) receives it; `RedactingFilter` does the same on a handler.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_LENGTH = 4
_QUOTE = r"""(?:\\*["'])?"""  # a quote, maybe escaped (JSON inside JSON, as pymongo logs replies)
_SHAPES = re.compile(
    _QUOTE + r"(?P<name>accessToken|accessTokenSecret|refreshToken|access_token|refresh_token|client_secret|"
    r"oauth_token|oauth_token_secret|oauth_signature|accessJwt|refreshJwt|api_key|apikey|password|key)"
    + _QUOTE
    + r"(?P<sep>\s*[:=]\s*)"
    + _QUOTE
    + r"""(?P<value>[^"'\s&,;)}\\]+)"""
    r"""|(?P<scheme>\b(?:Bearer|bearer|Basic|OAuth)\s+)(?P<cred>[^\s"',\\]+)""",
)


class Secrets:
    """The set of secret values to hide, counted: a value shared by two holders stays until both let go."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._ordered: tuple[str, ...] | None = None

    def add(self, values: Iterable[object]) -> None:
        with self._lock:
            for value in self._variants(values):
                self._counts[value] += 1
            self._ordered = None

    def remove(self, values: Iterable[object]) -> None:
        with self._lock:
            for value in self._variants(values):
                if self._counts[value] <= 1:
                    del self._counts[value]
                else:
                    self._counts[value] -= 1
            self._ordered = None

    @staticmethod
    def _variants(values: Iterable[object]) -> set[str]:
        out = set()
        for value in values:
            if isinstance(value, str) and len(value) >= MIN_LENGTH:
                out |= {value, quote(value, safe=""), quote_plus(value)}
        return out

    def __len__(self) -> int:
        return len(self._counts)

    def redact(self, text: str) -> str:
        ordered = self._ordered
        if ordered is None:
            with self._lock:
                ordered = self._ordered = tuple(sorted(self._counts, key=len, reverse=True))  # longest first
        for value in ordered:  # a substring test per value is far cheaper than one big alternation
            if value in text:
                text = text.replace(value, MASK)
        return _SHAPES.sub(_mask_shape, text)


def _mask_shape(match: re.Match[str]) -> str:
    if match.group("name") is not None:
        return match.group(0)[: match.start("value") - match.start()] + MASK
    return match.group("scheme") + MASK


SECRETS = Secrets()


def redact(text: str) -> str:
    return SECRETS.redact(text)


def redact_record(record: logging.LogRecord) -> None:
    """Rewrite a record in place: its message (arguments merged in), exception and stack text."""
    if getattr(record, "_redacted", False):
        return
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: keep what can be shown
        message = f"{record.msg!r} {record.args!r}"
    record.msg, record.args = redact(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
        record.exc_info = None  # only the redacted text travels on
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    record._redacted = True


class RedactingFilter(logging.Filter):
    """For a handler: redact every record that passes through it; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Redact every record of the process when it is made (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args, **kwargs) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
