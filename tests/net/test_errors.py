"""The wire's errors found behind the wrappers urllib3 and requests put around them (collector/net/errors.py)."""

from __future__ import annotations

import ssl

import requests
from urllib3.exceptions import MaxRetryError, ProtocolError, SSLError

from collector.net.errors import AnswerUnclear, BodyTooLarge, InterimRefused, wire_error


def test_a_wire_error_is_found_however_it_is_wrapped():
    interim = InterimRefused("more than 16 interim (1xx) answers")
    protocol = ProtocolError("Connection aborted.", interim)
    retried = MaxRetryError(None, "/x", protocol)  # type: ignore[arg-type]
    assert wire_error(interim) is interim
    assert wire_error(protocol) is interim
    assert wire_error(retried) is interim
    assert wire_error(requests.ConnectionError(retried)) is interim
    unclear = AnswerUnclear("bytes after the end of the answer")
    try:
        try:
            raise unclear
        except AnswerUnclear:
            raise OSError("while closing") from None
    except OSError as exc:
        assert wire_error(exc) is unclear  # the context kept, even when the cause is suppressed


def test_other_errors_and_cycles_find_none():
    assert wire_error(None) is None
    assert wire_error(OSError("reset")) is None
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first  # a cycle: looked at once each
    assert wire_error(first) is None
    assert wire_error(ProtocolError("Connection aborted.", ConnectionResetError())) is None
    ssl_error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    ssl_error.reason = "CERTIFICATE_VERIFY_FAILED"  # as ssl sets it: an attribute named `reason` that is text
    assert wire_error(SSLError(ssl_error)) is None


def test_a_body_too_large_says_its_declared_length_when_it_had_one():
    assert str(BodyTooLarge(100, 250)) == "body of 250 bytes over the 100-byte cap"
    assert str(BodyTooLarge(4096, None)) == "body over the 4096-byte cap"
    assert BodyTooLarge(7, None).cap == 7 and BodyTooLarge(7, 9).length == 9
