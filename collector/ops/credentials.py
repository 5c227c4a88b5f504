"""Credentials as an operator gives them to `collector networks add`: on standard input or in a file, never on the
command line (where `ps` and the shell's history would show them), as `gh auth login --with-token` reads a token.

Two forms, read from at most MAX_INPUT bytes of UTF-8:
- lines: a bare line is the access token; `NAME=value` gives any field the connector declares (`refreshToken=…`,
  `accessTokenSecret=…`, `instanceUrl=https://…`); blank lines and lines starting with `#` are skipped, spaces
  around a line are dropped;
- a JSON object of strings: `{"accessToken": "…", "instanceUrl": "https://…"}`.
What is read is checked against the connector's `credentials` afterwards (ops/accounts.py `check_credentials`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from ..sdk.redaction import clip
from ..textout import printable
from .accounts import BadCredential

MAX_INPUT = 64 * 1024  # a token is at most 8 KiB; a few of them and an address fit many times over
ASSIGNMENT = re.compile(r"([A-Za-z][A-Za-z0-9_]{0,63})\s*=\s*(.*)", re.S)


def read_bounded(stream, what: str) -> bytes:
    """At most MAX_INPUT bytes from a binary stream; BadCredential when there is more."""
    data = stream.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        raise BadCredential(f"{what} holds more than {MAX_INPUT // 1024} KiB: give the token and its fields only")
    return data


def parse_credentials(data: bytes, names: Iterable[str], what: str = "standard input") -> dict[str, str]:
    """The fields in `data` (the forms above); `names` are the fields the connector takes."""
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise BadCredential(f"{what} is not UTF-8 text") from None
    if text.lstrip().startswith("{"):
        return from_json(text, what)
    return from_lines(text, set(names), what)


def from_json(text: str, what: str) -> dict[str, str]:
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        raise BadCredential(f"{what} starts with '{{' but is not a JSON object") from None
    if not isinstance(body, dict):
        raise BadCredential(f"{what} starts with '{{' but is not a JSON object")
    wrong = sorted(str(k) for k, v in body.items() if not isinstance(v, str))
    if wrong:
        raise BadCredential(f"{what}: {printable(clip(wrong[0], 40))} must be a string")
    return {str(k): v.strip() for k, v in body.items()}


def from_lines(text: str, names: set[str], what: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = ASSIGNMENT.fullmatch(line)
        name, value = (match.group(1), match.group(2).strip()) if match and match.group(1) in names else ("", line)
        if not name:  # a bare line: the access token
            if "accessToken" in found:
                raise BadCredential(
                    f"{what} holds more than one bare line: the first is the access token, give the others as "
                    "NAME=value"
                )
            name = "accessToken"
        elif name in found:
            raise BadCredential(f"{what} gives {name} twice")
        found[name] = value
    return found
