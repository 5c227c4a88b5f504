"""The header parser that skips the email parser for plain header lines gives exactly what http.client's own
gives, for any block a server may send (generated here), and a 304 poll goes through it."""

from __future__ import annotations

import http.client
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from collector.sdk import headers

from helpers import examples

NAMES = st.text(alphabet="aZ-_:;! \t~\x7f\x80é0", min_size=0, max_size=6)
VALUES = st.text(alphabet='ab :\t\r\n\x0b\x0c\x1c\x85\xff\x00=,"', min_size=0, max_size=8)
ENDINGS = st.sampled_from(["\r\n", "\n", "\r", "\r\r\n"])


@st.composite
def blocks(draw) -> bytes:
    """A header block: lines of name, separator, value and ending; now and then a folded line, a `From ` line
    or a line without a colon; ended by a blank line, a bare LF or the end of the stream."""
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["plain", "plain", "plain", "folded", "from", "bare"]))
        ending = draw(ENDINGS)
        if kind == "plain":
            lines.append(draw(NAMES) + draw(st.sampled_from([":", ": ", ":\t", " :"])) + draw(VALUES) + ending)
        elif kind == "folded":
            lines.append(draw(st.sampled_from([" ", "\t"])) + draw(VALUES) + ending)
        elif kind == "from":
            lines.append("From " + draw(VALUES) + ending)
        else:
            lines.append(draw(VALUES) + ending)
    end = draw(st.sampled_from(["\r\n", "\n", ""]))
    return ("".join(lines) + end).encode("latin-1") + draw(st.sampled_from([b"", b"body"]))


def parsed(parse, block: bytes):
    try:
        message = parse(io.BytesIO(block))
    except http.client.HTTPException as error:
        return ("raised", type(error))
    return (
        message.items(),
        message.get_payload(),
        [type(defect) for defect in message.defects],
        message.get_unixfrom(),
        message.is_multipart(),
    )


@settings(max_examples=examples(1500), deadline=None)
@given(blocks())
def test_any_header_block_is_parsed_as_http_client_parses_it(block):
    assert parsed(headers.parse_headers, block) == parsed(headers._STDLIB, block)


def test_plain_lines_take_the_short_way_and_give_the_same_message(monkeypatch):
    block = b'Date: Mon, 01 Dec 2026 10:00:00 GMT\r\nETag:  W/"1-1-10" \r\nX-Empty:\r\nx-a:\t\xe9\r\n\r\n'
    assert parsed(headers.parse_headers, block) == parsed(headers._STDLIB, block)

    def no_email_parser(*args, **kwargs):
        raise AssertionError("the email parser was used for plain header lines")

    monkeypatch.setattr(headers.email.parser, "Parser", no_email_parser)
    message = headers.parse_headers(io.BytesIO(block))
    assert message["etag"] == 'W/"1-1-10" ' and message["X-Empty"] == "" and message["x-a"] == "\xe9"


def test_too_many_headers_or_too_long_a_line_are_refused_as_http_client_refuses_them():
    many = b"".join(b"X-%d: 1\r\n" % k for k in range(101)) + b"\r\n"
    long = b"X: " + b"a" * 70_000 + b"\r\n\r\n"
    for block in (many, long):
        assert parsed(headers.parse_headers, block)[0] == "raised"
        assert parsed(headers.parse_headers, block) == parsed(headers._STDLIB, block)


def test_an_http_client_of_the_collector_parses_headers_the_short_way():
    from collector.sdk.http import Http
    from collector.settings import settings_for_tests

    Http(settings_for_tests())
    assert http.client.parse_headers is headers.parse_headers
