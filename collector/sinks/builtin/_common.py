"""What the built-in sinks share: JSON lines, the batch size check, reading a JSON answer, a setting's name, the
check of an option sent in a header."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ..sdk import Answer, BatchRefused, Doc, SinkConfig, TooLarge


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def lines(rows: Iterable[Any]) -> bytes:
    """Newline-delimited JSON, the last line ended too (OpenSearch's _bulk requires it)."""
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def within(body: bytes, limit: int, what: str) -> bytes:
    """`body`, or TooLarge when it is over the sink's `max_batch_bytes` (the service then splits the batch; a
    single document too large is rejected)."""
    if len(body) > limit:
        raise TooLarge(f"batch of {len(body)} bytes over the {limit}-byte limit: {what}")
    return body


def json_answer(answer: Answer, what: str) -> Any:
    """The answer's body as JSON, or BatchRefused (a malformed answer: nothing can be known of any document)."""
    try:
        return orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        raise BatchRefused(f"{answer.status}: an answer that is not JSON: {what}") from None


def with_id(doc: Doc) -> dict[str, Any]:
    """`{"id": <the item's id>, ...its fields}` (a field `id` or `_id` of the item's own is left out)."""
    return {"id": doc.id, **{name: value for name, value in doc.body.items() if name not in ("id", "_id")}}


def check_header_value(value: str) -> None:
    """ValueError when an option sent in a header (an API key) holds a space or a control character: no request
    could carry it. Its value is not quoted."""
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise ValueError("must not hold spaces or control characters (it is sent in a header)")


def setting(config: SinkConfig, option: str) -> str:
    return f"SINK_{config.name.upper()}_{option}"


def error_text(error: object) -> str:
    """An error object a destination sent (`{"type", "reason"}` or text) as one line: type and reason."""
    if isinstance(error, Mapping):
        kind, reason = error.get("type"), error.get("reason")
        return ": ".join(str(part) for part in (kind, reason) if part) or "error"
    return str(error)
