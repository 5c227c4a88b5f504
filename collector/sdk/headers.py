"""Response headers parsed without the email parser when every line is a plain `Name: value` line.

http.client hands the header block of every response to `email.parser` (a general MIME parser: a line splitter,
a feed parser, policy objects), about a quarter of a worker's CPU per 304 poll at 64 in flight. A block whose
every line is one header name (the characters the email parser accepts as one), a colon and a value without a
CR or LF inside gives exactly what the email parser makes of it: the same (name, value) pairs in order, no defect,
an empty payload (tests/sdk/test_headers.py holds that over generated blocks). Any other block (folded lines,
a line without a colon, stray CRs, an empty name, a mail-style `From ` line) goes to the email parser as before.
The lines are read by http.client's own reader, so its limits (line length, header count) stay as they are.

`install()` puts it in place of `http.client.parse_headers` for the process; `Http` calls it.
"""

from __future__ import annotations

import email.parser
import http.client
import re
from typing import Any

_PLAIN = re.compile(r"([!-9;-~]+):[ \t]*([^\r\n]*)\r?\n")  # the email parser's header name characters, then ':'
_STDLIB = http.client.parse_headers
_READ = getattr(http.client, "_read_headers", None)


def parse_headers(fp: Any, _class: Any = http.client.HTTPMessage) -> Any:
    """`http.client.parse_headers`, the email parser skipped for a block of plain header lines."""
    assert _READ is not None  # install() puts this in place only where http.client has its reader
    lines = [line.decode("iso-8859-1") for line in _READ(fp)]
    pairs = []
    for line in lines[:-1]:  # the last line is the blank line (or the end of the stream)
        plain = _PLAIN.fullmatch(line)
        if plain is None:
            return email.parser.Parser(_class=_class).parsestr("".join(lines))
        pairs.append(plain.groups())
    message = _class()
    for name, value in pairs:
        message.set_raw(name, value)
    message.set_payload("")
    return message


def install() -> bool:
    """Use `parse_headers` for every response of this process; False (nothing changed) on a Python whose
    http.client reads headers differently."""
    if _READ is None or http.client.parse_headers not in (_STDLIB, parse_headers):
        return False
    http.client.parse_headers = parse_headers
    return True
