"""A response body decoded with its memory bounded whatever the encoding: `Content-Encoding` layers (gzip,
x-gzip, deflate — zlib-wrapped or raw —, identity; "gzip, gzip" is two layers) undone one bounded step at a time,
so the decoded bytes held at any moment stay within the cap plus one chunk, however the layers are stacked
(urllib3 inflates a whole network read per layer at once: a deflate or double-gzip bomb reached two and three
times the cap before it was refused). The compressed input is bounded too: at most the cap. Steps produce at
most 64 KiB each, so the bound is the cap plus one step.

Inflating is zlib-ng's (the `zlib-ng` package: the same formats, errors and API as the standard library's `zlib`,
about three times faster on a 560 KB page, a fifth of a changed page's CPU), or the standard library's where that
package cannot be installed.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from types import ModuleType

from .errors import BadResponse


def _inflater() -> ModuleType:
    try:
        from zlib_ng import zlib_ng
    except ImportError:  # pragma: no cover - a platform without a wheel: the standard library's, slower
        return zlib
    return zlib_ng


INFLATER = _inflater()
INFLATE_ERRORS = (zlib.error, INFLATER.error)

CHUNK = 64 * 1024  # bytes read from the socket at a time
STEP = 64 * 1024  # bytes one decompression step may produce (the "small constant" over the cap)


class _Layer:
    """One encoding undone: a zlib decompressor that yields at most CHUNK bytes per step, a new member after the
    end of a gzip member, and raw deflate when zlib-wrapped deflate fails on the first bytes."""

    def __init__(self, encoding: str):
        self.encoding = encoding
        self.wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self.started = False
        self.obj = INFLATER.decompressobj(self.wbits)

    def steps(self, data: bytes) -> Iterable[bytes]:
        while data:
            try:
                piece = self.obj.decompress(data, STEP)
            except INFLATE_ERRORS:
                if self.encoding == "deflate" and not self.started and self.wbits > 0:
                    self.wbits, self.obj = -zlib.MAX_WBITS, INFLATER.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise
            self.started = True
            data = self.obj.unconsumed_tail
            if self.obj.eof:
                data = self.obj.unused_data.lstrip(b"\0")
                if data:  # another gzip member follows
                    self.obj = INFLATER.decompressobj(self.wbits)
            yield piece

    def finish(self) -> bytes:
        return self.obj.flush(STEP)


def decode_body(chunks: Iterable[bytes], content_encoding: str, cap: int) -> bytes:
    """The body from raw `chunks`, every layer of `content_encoding` undone; BadResponse past `cap` decoded bytes
    (or compressed ones), or for an encoding this client never asked for."""
    names = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
    names = [n for n in names if n != "identity"]
    unknown = [n for n in names if n not in ("gzip", "x-gzip", "deflate")]
    if unknown:
        raise BadResponse(f"body in an encoding not asked for ({', '.join(unknown)[:60]})")
    layers = [_Layer(n) for n in reversed(names)]  # the last applied comes off first
    out: list[bytes] = []  # joined once at the end: one copy of the body, not one per step
    size = 0
    received = 0

    def push(data: bytes, level: int) -> None:
        nonlocal size
        if level == len(layers):
            out.append(data)
            size += len(data)
            if size > cap:
                raise BadResponse(f"decoded body exceeds the {cap}-byte cap")
            return
        for piece in layers[level].steps(data):
            push(piece, level + 1)

    try:
        for chunk in chunks:
            received += len(chunk)
            if received > cap:
                raise BadResponse(f"body exceeds the {cap}-byte cap")
            push(chunk, 0)
        for level in range(len(layers)):
            while tail := layers[level].finish():
                push(tail, level + 1)
    except INFLATE_ERRORS as exc:
        raise BadResponse(f"body could not be decoded ({content_encoding[:40]}: {exc})") from None
    return out[0] if len(out) == 1 else b"".join(out)
