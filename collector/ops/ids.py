"""An id is an id, never a query: what an operator types (or the monitor's page sends) as a network's id is read
into the one BSON value it names and matched by equality only.

`format_id` prints an `_id` as `networks list` shows it; `parse_id` reads that text back into the same value (an
ObjectId from 24 hex digits, an integer from digits, a bare word as itself, anything else as JSON or MongoDB
Extended JSON). What it reads must be a value: an ObjectId, a number, a string, a date, binary data, or a plain
document or array of those. A document with a key starting with `$` at any depth (`{"$ne": null}`,
`{"a": {"$gt": ""}}`, `[{"$where": ...}]`), a regular expression, JavaScript code or a DBRef is a query, not an
id: `NotAnId`, one line, and nothing is read or written. Every filter built from an operator's value goes through
`equal`, so even a value that got past this would be compared whole (`$eq`), never run.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bson import Decimal128, ObjectId, json_util
from bson.binary import Binary, UuidRepresentation
from bson.code import Code
from bson.errors import InvalidId
from bson.timestamp import Timestamp

from ..sdk.redaction import clip
from ..textout import printable

ID_JSON = json_util.RELAXED_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.STANDARD)
HEX24 = re.compile(r"[0-9a-fA-F]{24}")
INTEGER = re.compile(r"-?\d{1,19}")
BARE = re.compile(r"[A-Za-z0-9_.:@+/=-]{1,200}")  # a string id printed as it is (no quotes needed)
VALUES = (str, int, float, bool, type(None), ObjectId, Decimal128, datetime, bytes, Timestamp)  # Binary is bytes
DEPTH = 100  # levels of documents and arrays an id may hold


class AdminError(Exception):
    """A bad id, a network that cannot be changed now: one line for the operator."""


class NotAnId(AdminError):
    """A query given where an id belongs (a `$`-keyed document, a regular expression, code): refused, one line."""


def format_id(value: Any) -> str:
    """A network `_id` as `networks list` prints it, in a form `parse_id` reads back to the same BSON value: an
    ObjectId as 24 hex digits, an integer as digits, a plain string as it is, a string that would read as
    something else (24 hex digits, digits, JSON, an `@`, which the networks commands read as a user's email,
    spaces or control characters) as a JSON string, any other type
    (a compound id, a float, a UUID, …) as relaxed Extended JSON. ASCII only."""
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        bare = BARE.fullmatch(value) and not HEX24.fullmatch(value) and not _reads_as_other(value)
        if bare and value[0] != "-" and "@" not in value:
            return value
        return json.dumps(value)  # (a leading "-" would read as an option on the command line)
    text = json_util.dumps(value, json_options=ID_JSON)
    if text.startswith("-") and not INTEGER.fullmatch(text):  # -1.5e-07: an option to argparse, so the canonical
        text = json_util.dumps(value, json_options=json_util.CANONICAL_JSON_OPTIONS)  # {"$numberDouble": ...}
    return text


def _reads_as_other(text: str) -> bool:
    if INTEGER.fullmatch(text) or text in ("true", "false", "null"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_id(text: str) -> Any:
    """The BSON value `format_id` printed as `text` (and, for a bare word, the word itself). AdminError when it is
    no JSON; NotAnId when what it reads is a query rather than a value (`plain`)."""
    text = text.strip()
    if HEX24.fullmatch(text):
        return ObjectId(text)
    if INTEGER.fullmatch(text) and -(2**63) <= int(text) < 2**63:
        return int(text)
    if text[:1] in ('"', "{", "[") or _reads_as_other(text):
        try:
            value = json_util.loads(text, json_options=ID_JSON)
        except (ValueError, TypeError, InvalidId, RecursionError) as exc:
            raise AdminError(f"id {shown(text)} is not valid JSON ({printable(clip(exc, 80))})") from None
        # a UUID goes back as the Binary the database holds (a client without a UUID representation sends that)
        value = Binary.from_uuid(value) if isinstance(value, uuid.UUID) else value
        why = query_in(value)
        if why is not None:
            raise NotAnId(
                f"id {shown(text)} refused: {why} is a query, not an id; give the id as `networks list` prints it"
            )
        return value
    return text


def query_in(value: Any, depth: int = 0) -> str | None:
    """What makes `value` a query rather than a value to compare with (None when it is a plain value): a key
    starting with `$` (or holding a NUL) at any depth, a regular expression, code, a DBRef, any other type."""
    if depth > DEPTH:
        return "a value nested this deep"
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if not isinstance(key, str) or key.startswith("$") or "\x00" in key:
                return f"a document keyed {printable(clip(repr(key), 40))}"
            why = query_in(inner, depth + 1)
            if why is not None:
                return why
        return None
    if isinstance(value, list):
        return next((why for why in (query_in(v, depth + 1) for v in value) if why is not None), None)
    if isinstance(value, VALUES) and not isinstance(value, Code):  # (Code is a str)
        return None
    return f"a {printable(type(value).__name__)}"  # Regex, re.Pattern, Code, DBRef, MinKey, …


def plain(value: Any) -> Any:
    """`value` itself when it is a plain value to compare with; NotAnId otherwise."""
    why = query_in(value)
    if why is not None:
        raise NotAnId(f"{why} is a query, not an id")
    return value


def equal(value: Any) -> dict[str, Any]:
    """A filter's condition matching exactly `value`, whatever it is (a document is compared whole, not run)."""
    return {"$eq": plain(value)}


def shown(text: str) -> str:
    return printable(clip(text, 80))
