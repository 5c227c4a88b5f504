"""A body read as it came (every Content-Encoding layer still on), bounded in bytes: the one capped read of the
collectors' `Http` and the sinks' client. A connection goes back to its pool only after a clean exchange: the final
status read (answers.py skips interim ones), the body read to its end as its framing says, nothing after it. Any
other ending closes it instead: a body over the cap, cut short, unclear (`AnswerUnclear`), or left unread.

- `read_capped`: the whole body, at most `cap` bytes; `BodyTooLarge` past it (a declared length over the cap is
  refused before any byte is read).
- `read_prefix`: at most `limit` bytes kept, the rest neither read nor kept (an error answer's reason); with
  `keep=False` every byte is dropped as it comes (a 2xx whose body no one needs).
- `finish`: the connection back to the pool when the body was read whole and cleanly, else closed.

Each takes urllib3's HTTPResponse, read with `preload_content=False`.
"""

from __future__ import annotations

from typing import Any

from .errors import AnswerUnclear, BodyTooLarge

READ_CHUNK = 64 * 1024
NO_CONTENT = frozenset({204, 304})  # statuses that have no body (RFC 9110)


def declared_length(response: Any) -> int | None:
    """The Content-Length an answer declares, when it is a plain number."""
    length = str(response.headers.get("content-length", "")).strip()
    return int(length) if length.isdigit() else None


def read_capped(response: Any, cap: int) -> list[bytes]:
    """The whole body as it came, at most `cap` bytes (checked clean); BodyTooLarge past it. The caller closes the
    response on any error."""
    length = declared_length(response)
    if length is not None and length > cap:
        raise BodyTooLarge(cap, length)
    if response.status in NO_CONTENT:  # no body by definition: nothing to gather
        response.read(decode_content=False)  # read to its end: the connection is free for the next
        check_clean(response)
        return []
    chunks: list[bytes] = []
    received = 0
    for chunk in response.stream(READ_CHUNK, decode_content=False):
        received += len(chunk)
        if received > cap:
            raise BodyTooLarge(cap, None)
        chunks.append(chunk)
    check_clean(response)
    return chunks


def read_prefix(response: Any, limit: int, keep: bool = True) -> tuple[bytes, bool]:
    """(the first `limit` bytes of the body, or b"" without `keep`; whether it was read whole and cleanly). Past
    `limit` nothing more is read: the caller closes the response (`finish`)."""
    length = declared_length(response)
    if not keep and length is not None and length > limit:  # nothing to keep, and more than may be dropped
        return b"", False
    chunks: list[bytes] = []
    received = 0
    for chunk in response.stream(READ_CHUNK, decode_content=False):
        received += len(chunk)
        if keep:
            chunks.append(chunk)
        if received > limit:
            return b"".join(chunks)[:limit], False
    check_clean(response)
    return b"".join(chunks), True


def check_clean(response: Any) -> None:
    """AnswerUnclear when bytes followed the body (answers.py's `Response` saw them; its socket is shut)."""
    why = getattr(getattr(response, "_original_response", None), "unclear", "")
    if why:
        response.close()
        raise AnswerUnclear(why)


def finish(response: Any, whole: bool) -> None:
    """The connection back to the pool after a body read whole and cleanly; closed otherwise."""
    if whole:
        response.release_conn()
    else:
        response.close()
