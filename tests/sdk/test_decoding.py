"""Bodies are inflated by zlib-ng (sdk/decoding.py), the last layer in calls as large as the cap allows: the same
bytes and the same errors as the standard library's zlib in 64 KiB steps, whatever the encodings, truncations and
corruptions a server sends."""

from __future__ import annotations

import gzip
import zlib

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.devtools.fakeapi import generated_star
from collector.sdk import decoding
from collector.sdk.decoding import decode_body
from collector.sdk.errors import BadResponse

from helpers import examples


def deflate_raw(data: bytes, level: int) -> bytes:
    packer = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


ENCODERS = {  # gzip with a fixed mtime: its header's clock made a layer around it differ from run to run
    "gzip": lambda data, level: gzip.compress(data, level, mtime=0),
    "x-gzip": lambda data, level: gzip.compress(data, level, mtime=0),
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


def same(candidate: tuple[str, bytes | str], reference: tuple[str, bytes | str]) -> bool:
    """The same outcome. A body with two faults, over the cap and corrupt further on, may show either first: a
    larger call reaches the cap before the corruption that a 64 KiB step ran into (still a bad response)."""
    if candidate == reference:
        return True
    over_cap = [str(message).startswith("decoded body exceeds") for _, message in (candidate, reference)]
    return candidate[0] == reference[0] == "bad" and any(over_cap)


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


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_zlib_ng_decodes_every_body_as_the_standard_library_does(body):
    chunks, header, cap = body
    assert same(with_inflater(decoding.INFLATER, chunks, header, cap), with_inflater(zlib, chunks, header, cap))


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "deflate-raw"])
def test_a_page_decodes_to_its_bytes(encoding):
    page = b'[{"repo": {"id": 1, "full_name": "a/b"}}]' * 5000  # ~200 KB: several bounded steps
    header = "deflate" if encoding == "deflate-raw" else encoding
    assert decode_body([ENCODERS[encoding](page, 6)], header, len(page)) == page
    with pytest.raises(BadResponse, match="cap"):
        decode_body([ENCODERS[encoding](page, 6)], header, len(page) - 1)


def test_a_page_is_inflated_in_one_call(monkeypatch):
    """Each inflating call lets go of the interpreter's lock, and under load a thread waits up to a switch interval
    to get it back: a 560 KB page is one call, not one per buffer doubling (~27 in 64 KiB steps)."""
    page = orjson.dumps([generated_star(1, k) for k in range(100)])
    asked: list[int] = []
    real = decoding.INFLATER._ZlibDecompressor

    class Counted:
        def __init__(self, wbits: int):
            self.inner = real(wbits)

        def decompress(self, data: bytes, max_length: int) -> bytes:
            asked.append(max_length)
            return self.inner.decompress(data, max_length)

        def __getattr__(self, name: str):
            return getattr(self.inner, name)

    monkeypatch.setattr(decoding.INFLATER, "_ZlibDecompressor", Counted)
    assert decode_body([gzip.compress(page, 6)], "gzip", 4 * 2**20) == page
    assert len(asked) == 1 and len(page) < asked[0] <= 4 * 2**20 + 1


INFLATERS = pytest.mark.parametrize("inflater", [decoding.INFLATER, zlib], ids=["zlib-ng", "zlib"])


@st.composite
def cut_bodies(draw: st.DrawFn) -> tuple[list[bytes], str]:
    """A body in one to three compressing layers, cut short by at least one byte but not to nothing (a connection
    closed early on a body without a length reads as a whole, shorter body), in chunks."""
    body = draw(st.binary(max_size=2000)) * draw(st.integers(1, 20))
    names = draw(st.lists(st.sampled_from(["gzip", "x-gzip", "deflate", "deflate-raw"]), min_size=1, max_size=3))
    for name in names:
        body = ENCODERS[name](body, draw(st.integers(0, 9)))
    body = body[: draw(st.integers(1, len(body) - 1))]
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=3)))
    header = ", ".join("deflate" if n == "deflate-raw" else n for n in names)
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)], header


@INFLATERS
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut_bodies())
def test_a_compressed_body_cut_short_is_never_taken_for_a_whole_one(inflater, body):
    """The part of a page that arrived must not pass for the page: it could parse (a JSON list cut after an entry,
    once inflated) and end a history walk early, its last items lost."""
    chunks, header = body
    kind, message = with_inflater(inflater, chunks, header, 4 * 2**20)
    assert kind == "bad", f"a body cut short decoded to {len(message)} bytes"


@INFLATERS
def test_a_page_cut_short_is_named_as_such(inflater):
    page = b'[{"id": 1}, {"id": 2}]' * 3000
    packed = gzip.compress(page)
    assert with_inflater(inflater, [packed[: len(packed) // 2]], "gzip", 4 * 2**20) == (
        "bad",
        "body cut short: its gzip stream does not end",
    )
    second = gzip.compress(b"more")  # a whole member, then one cut inside
    assert with_inflater(inflater, [packed, second[:-3]], "gzip", 4 * 2**20)[0] == "bad"


@INFLATERS
@settings(max_examples=examples(200), deadline=None)
@given(
    st.binary(min_size=1, max_size=3000),
    st.binary(min_size=2, max_size=64).filter(lambda junk: not junk.lstrip(b"\0").startswith(b"\x1f")),
    st.integers(1, 4),
)
def test_bytes_after_a_whole_gzip_body_that_begin_no_member_are_ignored(inflater, page, junk, members):
    """As gzip(1) and urllib3 do ("trailing garbage ignored"): every member before them was read whole."""
    packed = b"".join(gzip.compress(page) for _ in range(members))
    junk = junk if junk.lstrip(b"\0") else junk + b"x"
    assert with_inflater(inflater, [packed + junk[:1], junk[1:]], "gzip", 4 * 2**20) == ("ok", page * members)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "gzip, gzip"])
def test_a_decoded_body_is_let_go_of_when_decoding_ends_not_at_the_next_garbage_collection(encoding):
    """Nothing decode_body makes is left in a reference cycle: a page's body is freed by its reference count when the
    caller drops it (with the daemon's young collections every 5,000 allocations, bodies kept by cycles took the
    history walk's peak memory from ~100 to ~220 MB)."""
    import gc

    body = orjson.dumps([generated_star(0, n) for n in range(300)])
    data = body
    for name in reversed([n.strip() for n in encoding.split(",")]):
        data = gzip.compress(data) if name == "gzip" else zlib.compress(data)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        assert decode_body([data[:1000], data[1000:]], encoding, 10**7) == body
        gc.collect()
        left = [o for o in gc.garbage if "decode_body" in getattr(o, "__qualname__", "")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []
