"""The redaction's patterns against text a server or a document may hold: long runs that made the old patterns
backtrack (16 KB of `a.a.a…` took 11 s, a 100 KB field name in `networks show` 12 s) are masked as before, in
one pass; what a name means is what its definition says."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.ops.networks import masked
from collector.sdk.redaction import KEYWORDS, SECRETS, secret_name

GH = "ghp_" + "A1b2C3d4" * 5  # a GitHub token by its shape
# the definition of a secret field name, as one regular expression (fine for short names: it backtracks on long ones)
DEFINITION = re.compile(rf"(?:[A-Za-z_$][\w$.-]*?)?(?:{KEYWORDS})[\w$-]*|key", re.IGNORECASE)
parts = st.sampled_from(
    ["token", "Token", "secret", "passwd", "apiKey", "app-key", "key", "Key", "jwt", "cookie", "ı", "K", "é"]
    + [".", "-", "_", "$", "a", "1", " ", ":", "x"]
)


@settings(max_examples=400, derandomize=True)
@given(st.lists(parts, max_size=6).map("".join))
def test_a_secret_name_is_what_its_definition_says(name):
    assert secret_name(name) == (DEFINITION.fullmatch(name) is not None)


@pytest.mark.parametrize("unit", ["a.", "a-", "$token$", "token-", "tokentoken.", "\\", "eyJa-", "key=\\", "Bearer  "])
def test_a_long_hostile_run_before_a_secret_leaves_the_secret_masked(unit):
    text = unit * (16_000 // len(unit)) + f' "accessToken": "{GH}" then Authorization: Bearer abcdef123456'
    out = SECRETS.redact(text)
    assert GH not in out and "abcdef123456" not in out
    assert out.endswith('"accessToken": "***" then Authorization: ***')  # the scheme goes with the value


def test_a_field_name_of_any_length_is_read_in_one_pass():
    assert secret_name("token" * 20_000 + "Secret")
    assert secret_name("a." * 50_000 + "refreshToken")
    assert not secret_name("token" * 20_000 + ".expiry")  # a keyword before the last dot names a parent
    assert not secret_name("a." * 50_000 + "name")
    shown = masked({"a." * 10_000 + "accessToken": "s3cr3t-value", "note" * 10_000: GH})
    assert list(shown.values()) == ["***", "***"]


def test_a_jwt_is_masked_from_the_start_of_its_run_only():
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU"
    assert SECRETS.redact(f"got {jwt} back") == "got *** back"
    assert SECRETS.redact(f"x={jwt}") == "x=***"
    assert jwt not in SECRETS.redact("eyJa-" * 4_000 + jwt)  # inside a run: masked as a whole, with the run
