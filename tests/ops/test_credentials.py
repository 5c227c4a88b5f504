"""Reading credentials as `networks add` takes them (ops/credentials.py): whatever visible-ASCII token, given
bare, as NAME=value or in JSON, comes back exactly; any input is one answer or one AccountError, never a crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.ops.accounts import AccountError, check_credentials
from collector.ops.credentials import MAX_INPUT, parse_credentials, read_bounded
from collector.sdk import Credential

from helpers import examples

TOKENS = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=200)
FIELDS = (Credential("accessToken"), Credential("refreshToken", required=False))
NAMES = [f.name for f in FIELDS]


@settings(max_examples=examples(300), deadline=None)
@given(token=TOKENS, refresh=TOKENS, form=st.sampled_from(["bare", "named", "json"]))
def test_a_token_comes_back_exactly_whichever_form_it_is_given_in(token, refresh, form):
    if form == "json":
        data = json.dumps({"accessToken": token, "refreshToken": refresh})
    elif form == "named":
        data = f"refreshToken={refresh}\r\n\n  accessToken = {token}  \n"
    else:
        if token.startswith(("#", "{")) or "=" in token:
            token = "t" + token.replace("=", "")  # a bare line that reads as a comment, JSON or NAME=value
        data = f"\n{token}\nrefreshToken={refresh}\n"
    got = check_credentials("svc", FIELDS, parse_credentials(data.encode(), NAMES))
    assert got == {"accessToken": token, "refreshToken": refresh}


@settings(max_examples=examples(500), deadline=None)
@given(data=st.binary(max_size=300))
def test_any_input_is_an_answer_or_one_line(data):
    try:
        check_credentials("svc", FIELDS, parse_credentials(data, NAMES))
    except AccountError as exc:
        assert "\n" not in str(exc)


def test_a_read_stops_one_byte_past_the_bound():
    class Stream:
        asked: list[int] = []

        def read(self, n):
            self.asked.append(n)
            return b"x" * n

    with pytest.raises(AccountError, match="more than 64 KiB"):
        read_bounded(Stream(), "standard input")
    assert Stream.asked == [MAX_INPUT + 1]
