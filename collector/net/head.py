"""One HTTP/1.1 request-head parser for every server of the collector (the metrics/health port and the monitor):
the same bytes are accepted, or refused with the same status, on both.

The rules are RFC 9112's, the strict reading: a request line of exactly three parts (a token, an origin-form or
absolute-form target of visible ASCII without a fragment, `HTTP/1.` and one digit); header lines `name: value`
with the name a token and nothing between it and the colon; no folded line, no NUL, no bare CR, no other control
character in a value; one Host at most; a Content-Length of digits only (repeats must agree) and never beside a
Transfer-Encoding. Lines end in CRLF, or in a bare LF (which RFC 9112 lets a server accept). Pure: no sockets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEAD_LIMIT = 8192  # bytes of request line and headers; a longer head is answered 431

TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
VERSION = re.compile(r"HTTP/1\.[0-9]")
TARGET = re.compile(r"[\x21-\x7e]+")  # visible ASCII: no space, no control character
VALUE_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters but the horizontal tab
DIGITS = re.compile(r"[0-9]{1,18}")


class HeadError(Exception):
    """A request head refused: the status to answer (400 or 431) and why, in a few words for the client."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Head:
    method: str
    path: str  # as sent (percent-encoded), starting with "/"
    query: str  # after the "?", as sent; "" without one
    version: str
    fields: tuple[tuple[str, str], ...]  # (name as sent, value without surrounding blanks), in order

    @property
    def headers(self) -> dict[str, str]:
        """The fields by lower-case name; a repeated one's values joined with ", "."""
        joined: dict[str, str] = {}
        for name, value in self.fields:
            key = name.lower()
            joined[key] = f"{joined[key]}, {value}" if key in joined else value
        return joined

    @property
    def content_length(self) -> int:
        """The body's length the head announces (0 without a Content-Length)."""
        text = self.headers.get("content-length")
        return 0 if text is None else int(text.split(",")[0])


def head_end(data: bytes | bytearray, start: int = 0) -> int:
    """Where the request head in `data` ends (just after its empty line), or -1; lines may end in CRLF or LF."""
    ends = [i + n for i, n in ((data.find(b"\n\r\n", start), 3), (data.find(b"\n\n", start), 2)) if i >= 0]
    return min(ends, default=-1)


def parse(raw: bytes | bytearray) -> Head:
    """The Head of a whole request head (its empty line may be included); HeadError for one these rules refuse."""
    if len(raw) > HEAD_LIMIT + 4:
        raise HeadError(431, f"request head over {HEAD_LIMIT} bytes")
    text = bytes(raw).decode("latin-1")
    if "\x00" in text:
        raise HeadError(400, "a NUL in the request head")
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise HeadError(400, "an empty request")
    if any("\r" in line for line in lines):
        raise HeadError(400, "a bare CR in the request head")
    method, path, query, version = request_line(lines[0])
    fields = tuple(field(line) for line in lines[1:])
    check_fields(fields)
    return Head(method, path, query, version, fields)


def request_line(line: str) -> tuple[str, str, str, str]:
    """Method, path, query and version of a request line."""
    parts = line.split(" ")
    if len(parts) != 3 or not TOKEN.fullmatch(parts[0]) or not VERSION.fullmatch(parts[2]):
        raise HeadError(400, "not an HTTP/1.x request line")
    method, target, version = parts
    if not TARGET.fullmatch(target) or "#" in target:
        raise HeadError(400, "the target is not a path")
    if target.lower().startswith(("http://", "https://")):  # the absolute form a proxy may send
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    if not target.startswith("/"):
        raise HeadError(400, "the target is not a path")
    path, _, query = target.partition("?")
    return method, path, query, version


def field(line: str) -> tuple[str, str]:
    if line[:1] in (" ", "\t"):
        raise HeadError(400, "a folded header line")
    name, colon, value = line.partition(":")
    if not colon or not TOKEN.fullmatch(name):
        raise HeadError(400, "a malformed header line")
    value = value.strip(" \t")
    if VALUE_BAD.search(value):
        raise HeadError(400, "a control character in a header value")
    return name, value


def check_fields(fields: tuple[tuple[str, str], ...]) -> None:
    """What the fields together must hold: one Host at most, one clear body length."""
    names = [name.lower() for name, _ in fields]
    if names.count("host") > 1:
        raise HeadError(400, "more than one Host")
    lengths = {v.strip(" \t") for name, value in fields if name.lower() == "content-length" for v in value.split(",")}
    if lengths and (len(lengths) > 1 or not DIGITS.fullmatch(next(iter(lengths)))):
        raise HeadError(400, "a bad Content-Length")
    if lengths and "transfer-encoding" in names:
        raise HeadError(400, "both Content-Length and Transfer-Encoding")
