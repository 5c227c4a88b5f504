"""A response body decoded with its memory bounded whatever the encoding: `Content-Encoding` layers (gzip,
x-gzip, deflate — zlib-wrapped or raw —, identity; "gzip, gzip" is two layers) undone one bounded step at a time,
so the decoded bytes held at any moment stay within the cap plus one chunk, however the layers are stacked
(urllib3 inflates a whole network read per layer at once: a deflate or double-gzip bomb reached two and three
times the cap before it was refused). The compressed input is bounded too: at most the cap. The last layer's
calls produce at most what the cap still allows plus one byte (the byte that shows the cap is passed), inner
layers' steps at most 64 KiB each, so the bound is the cap plus one step per inner layer.

A body is whole only when every layer's stream reached its own end marker: a body sent without a length ends
where the connection closes, so one cut short there is, at the HTTP level, a shorter body, and the part that came
could parse (a JSON list cut after an entry). It is refused ("body cut short"). Bytes after a whole gzip member
that do not begin another (a newline, padding other than zeros) are ignored, as gzip(1) and urllib3 ignore them.

Inflating is zlib-ng's (the `zlib-ng` package: the same formats, errors and API as the standard library's `zlib`,
about three times faster on a 560 KB page, a fifth of a changed page's CPU), or the standard library's where that
package cannot be installed.

Each inflating call lets go of the interpreter's lock, and with other threads busy, a thread that let go waits up
to a switch interval (5 ms) to get it back. A `decompressobj` step starts from a 16 KiB buffer and doubles it,
one call per doubling: a 560 KB page took ~27 calls in 64 KiB steps, 25-50 ms of a run's wall time spent waiting
for the lock under load for 0.15 ms of work. zlib-ng's `_ZlibDecompressor` fills a buffer of the size asked in one
call, so the last layer asks for what its input can plausibly give (EXPANSION times its size, within what the cap
still allows): a page is one call, into a buffer of ~1 MB cut to the page's size. Inner layers (a body encoded
twice) keep 64 KiB steps.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from .errors import BadResponse
from .redaction import clip


def _inflater() -> ModuleType:
    try:
        from zlib_ng import zlib_ng
    except ImportError:  # pragma: no cover - a platform without a wheel: the standard library's, slower
        return zlib
    return zlib_ng


INFLATER = _inflater()
INFLATE_ERRORS = (zlib.error, INFLATER.error)

CHUNK = 64 * 1024  # bytes read from the socket at a time
STEP = 64 * 1024  # bytes one decompression step of an inner layer may produce (the "small constant" over the cap)
GZIP_MAGIC = b"\x1f\x8b"
EXPANSION = 32  # a JSON page inflates ~19 times: the last layer asks for this many times its input in one call


class _Layer:
    """One encoding undone by `decompressobj` (the standard library's, or zlib-ng's without `_ZlibDecompressor`):
    at most STEP bytes per step whatever `room()` allows, a new member after the end of a gzip member, and raw
    deflate when zlib-wrapped deflate fails on the first bytes."""

    def __init__(self, encoding: str):
        self.encoding = encoding
        self.wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self.started = False
        self.obj = self.inflater(self.wbits)
        self.members = 0  # gzip members begun after the first (each a fresh inflater)
        self.head = b""  # a later member's first two bytes, as far as they came
        self.garbage = False  # bytes after a whole member that begin no other: ignored from there on

    def next_member(self) -> None:
        """A whole gzip member ended and more bytes follow: they begin the next member."""
        self.obj = self.inflater(self.wbits)
        self.members += 1
        self.head = b""

    def feed(self, data: bytes) -> None:
        """Note the first bytes of a later member (whether they begin one at all is known from two)."""
        if self.members and len(self.head) < 2:
            self.head = (self.head + data)[:2]

    def after_member(self) -> bool:
        """True when the bytes after a whole gzip member do not begin another (its magic): trailing garbage, ignored
        from there on, as gzip(1) and urllib3 ignore it. A member that begins as one and fails later is corrupt."""
        gzip = self.wbits > zlib.MAX_WBITS
        if gzip and self.members and self.head and not GZIP_MAGIC.startswith(self.head):
            self.garbage = True
        return self.garbage

    def complete(self) -> bool:
        """Every stream this layer began was ended by its own end marker (not cut short), or it got no bytes (a
        single byte of trailing garbage, a newline say, fails no inflater: it is found here)."""
        return self.after_member() or self.obj.eof or not self.started

    def inflater(self, wbits: int) -> Any:
        return INFLATER.decompressobj(wbits)

    def raw_instead(self) -> bool:
        """zlib-wrapped deflate failed on its first bytes: raw deflate instead (servers send either)."""
        if self.encoding == "deflate" and not self.started and self.wbits > 0:
            self.wbits = -zlib.MAX_WBITS
            self.obj = self.inflater(self.wbits)
            return True
        return False

    def steps(self, data: bytes, room: Callable[[], int]) -> Iterable[bytes]:
        while data and not self.garbage:
            self.feed(data)
            try:
                piece = self.obj.decompress(data, STEP)
            except INFLATE_ERRORS:
                if self.raw_instead():
                    continue
                if self.after_member():
                    return
                raise
            self.started = True
            data = self.obj.unconsumed_tail
            if self.obj.eof:
                data = self.obj.unused_data.lstrip(b"\0")
                if data:  # another gzip member follows
                    self.next_member()
            yield piece

    def finish(self) -> bytes:
        return self.obj.flush(STEP)


class _OneCallLayer(_Layer):
    """One encoding undone by zlib-ng's `_ZlibDecompressor`: each call inflates into one buffer of the size asked
    (`room()`, at most), so a page takes one call instead of one per buffer doubling; the same members, zero
    padding and raw-deflate fallback as _Layer, and no output held back for a flush."""

    def __init__(self, encoding: str):
        super().__init__(encoding)
        self.after_end = b""  # input past the end of a member, zero padding stripped: the next member's start

    def inflater(self, wbits: int) -> Any:
        return INFLATER._ZlibDecompressor(wbits)

    def steps(self, data: bytes, room: Callable[[], int]) -> Iterable[bytes]:
        while not self.garbage:
            if self.obj.eof:
                data = (self.after_end + data).lstrip(b"\0")
                self.after_end = b""
                if not data:
                    return
                self.next_member()  # another gzip member follows
            if not data and self.obj.needs_input:  # nothing to inflate, nothing held back
                return
            self.feed(data)
            try:
                piece = self.obj.decompress(data, room())
            except INFLATE_ERRORS:
                if self.raw_instead():
                    continue
                if self.after_member():
                    return
                raise
            self.started, data = True, b""
            if self.obj.eof:
                self.after_end = self.obj.unused_data
            yield piece
            if not self.obj.eof and self.obj.needs_input:
                return

    def finish(self) -> bytes:
        return b""


def decode_body(chunks: Iterable[bytes], content_encoding: str, cap: int) -> bytes:
    """The body from raw `chunks`, every layer of `content_encoding` undone; BadResponse past `cap` decoded bytes
    (or compressed ones), or for an encoding this client never asked for."""
    names = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
    names = [n for n in names if n != "identity"]
    unknown = [n for n in names if n not in ("gzip", "x-gzip", "deflate")]
    if unknown:
        raise BadResponse(f"body in an encoding not asked for ({clip(', '.join(unknown), 60)})")
    kind = _OneCallLayer if hasattr(INFLATER, "_ZlibDecompressor") else _Layer
    layers = [kind(n) for n in reversed(names)]  # the last applied comes off first
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
        hint = max(STEP, EXPANSION * len(data)) if level == len(layers) - 1 else 0

        def room() -> int:  # the last layer: the hint, within the cap (one over it: the cap's check); inner: STEP
            return max(min(hint, cap - size + 1), 1) if hint else STEP

        for piece in layers[level].steps(data, room):
            push(piece, level + 1)  # noqa: F821 - its own name, emptied (`del push` below) once the body is read

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
        raise BadResponse(f"body could not be decoded ({clip(content_encoding, 40)}: {exc})") from None
    finally:
        # `push` calls itself, so it holds itself (a reference cycle through its closure) and with it `out`, the
        # body: emptied here, the body goes when this returns, not at the garbage collector's next pass (the pages
        # of 64 walks in flight took 120 MB more at their peak with young collections every 5,000 allocations)
        del push
    cut = next((layer.encoding for layer in layers if not layer.complete()), None)
    if cut is not None:  # a connection closed early on a body without a length, or a server's own fault
        raise BadResponse(f"body cut short: its {cut} stream does not end")
    return out[0] if len(out) == 1 else b"".join(out)


def bounded_decompress(data: bytes, limit: int, wbits: int) -> bytes:
    """zlib/gzip data decompressed to at most `limit` bytes; BadResponse past it (a decompression bomb), or when
    the stream does not end (cut short: the part that came is not the page)."""
    decompressor = zlib.decompressobj(wbits)
    out = decompressor.decompress(data, limit + 1)
    if len(out) > limit:
        raise BadResponse(f"decompressed body exceeds the {limit}-byte cap")
    if not decompressor.eof:
        raise BadResponse("body cut short: its compressed stream does not end")
    return out
