"""Bodies are inflated by zlib-ng (sdk/decoding.py): the same bytes and the same errors as the standard library's
zlib, whatever the encodings, truncations and corruptions a server sends."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.sdk import decoding
from collector.sdk.decoding import decode_body
from collector.sdk.errors import BadResponse


def deflate_raw(data: bytes, level: int) -> bytes:
    packer = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


ENCODERS = {
    "gzip": lambda data, level: gzip.compress(data, level),
    "x-gzip": lambda data, level: gzip.compress(data, level),
    "deflate": lambda data, level: zlib.compress(data, level),
    "deflate-raw": deflate_raw,
    "identity": lambda data, level: data,
}


@st.composite
def bodies(draw: st.DrawFn) -> tuple[list[bytes], str, int]:
    """Raw chunks as a server would send them, the Content-Encoding it declares, and a cap."""
    text = draw(st.one_of(st.binary(max_size=3000), st.text(max_size=3000).map(str.encode)))
    body = text * draw(st.integers(1, 40))  # compressible runs, as JSON pages are
    names = draw(st.lists(st.sampled_from(sorted(ENCODERS)), max_size=3))
    for name in names:
        body = ENCODERS[name](body, draw(st.integers(0, 9)))
    damage = draw(st.sampled_from(["none", "truncate", "flip", "append", "zeros"]))
    if body and damage == "truncate":
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif body and damage == "flip":
        at = draw(st.integers(0, len(body) - 1))
        body = body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1 :]
    elif damage == "append":
        body += draw(st.binary(min_size=1, max_size=64))
    elif damage == "zeros":
        body += b"\0" * draw(st.integers(1, 16))
    header = ", ".join("deflate" if n == "deflate-raw" else n for n in names)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    cap = draw(st.sampled_from([len(text) * 40 + 1, 64, 70_000, 4 * 2**20]))
    return chunks, header, cap


def outcome(chunks: list[bytes], header: str, cap: int) -> tuple[str, bytes | str]:
    try:
        return "ok", decode_body(iter(chunks), header, cap)
    except BadResponse as exc:
        return "bad", exc.message


def with_inflater(module, *args):
    saved = decoding.INFLATER, decoding.INFLATE_ERRORS
    decoding.INFLATER, decoding.INFLATE_ERRORS = module, (zlib.error, module.error)
    try:
        return outcome(*args)
    finally:
        decoding.INFLATER, decoding.INFLATE_ERRORS = saved


def test_the_inflater_in_use_is_zlib_ng():
    assert decoding.INFLATER.__name__ == "zlib_ng.zlib_ng"  # a dependency: installed with the collector


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_zlib_ng_decodes_every_body_as_the_standard_library_does(body):
    chunks, header, cap = body
    assert with_inflater(decoding.INFLATER, chunks, header, cap) == with_inflater(zlib, chunks, header, cap)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "deflate-raw"])
def test_a_page_decodes_to_its_bytes(encoding):
    page = b'[{"repo": {"id": 1, "full_name": "a/b"}}]' * 5000  # ~200 KB: several bounded steps
    header = "deflate" if encoding == "deflate-raw" else encoding
    assert decode_body([ENCODERS[encoding](page, 6)], header, len(page)) == page
    with pytest.raises(BadResponse, match="cap"):
        decode_body([ENCODERS[encoding](page, 6)], header, len(page) - 1)
