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

from helpers import examples

GH = "ghp_" + "A1b2C3d4" * 5  # a GitHub token by its shape
# the definition of a secret field name, as one regular expression (fine for short names: it backtracks on long ones)
DEFINITION = re.compile(rf"(?:[A-Za-z_$][\w$.-]*?)?(?:{KEYWORDS})[\w$-]*|key", re.IGNORECASE)
parts = st.sampled_from(
    ["token", "Token", "secret", "passwd", "apiKey", "app-key", "key", "Key", "jwt", "cookie", "ı", "K", "é"]
    + [".", "-", "_", "$", "a", "1", " ", ":", "x"]
)


@settings(max_examples=examples(400), derandomize=True)
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


SECRET_IN_TEXT = "kitSecretValue-" + "Zq9" * 6


@settings(max_examples=examples(300), derandomize=True)
@given(st.integers(0, 700), st.integers(1, 600), st.sampled_from([SECRET_IN_TEXT, GH, f"token={SECRET_IN_TEXT}"]))
def test_clip_masks_then_cuts_so_no_piece_of_a_secret_survives(before, limit, secret):
    from collector.sdk.redaction import clip

    SECRETS.add([SECRET_IN_TEXT])
    try:
        shown = clip("." * before + secret + " after", limit)
    finally:
        SECRETS.remove([SECRET_IN_TEXT])
    assert len(shown) <= limit
    assert not [p for p in (SECRET_IN_TEXT[i : i + 6] for i in range(len(SECRET_IN_TEXT) - 5)) if p in shown]
    assert not [p for p in (GH[i : i + 6] for i in range(len(GH) - 5)) if p in shown]


def test_no_message_is_cut_before_it_is_masked():
    """`clip` is the one way text is shortened: no `str(x)[:n]` or f-string `[:n]` in the collector's or a
    connector's code (the dev tools aside), where a secret straddling the cut would survive in a piece."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    not_messages = {  # cuts that shorten no message
        "collector/sdk/redaction.py",  # clip itself: what it cuts is masked
        "collector/sdk/errors.py",  # a search in an exception's text, not shown
        "collector/sdk/htmltext.py",  # the bound on an item's HTML read, not a message
        "collector/net/urls.py",  # `where`: the host and path of the collector's own request (no secret goes there)
        "collector/net/causes.py",  # OpenSSL's fixed reasons and the request's or proxy's host (no secret goes there)
    }
    found = []
    for path in [*root.glob("collector/**/*.py"), *root.glob("connectors/*.py")]:
        if "devtools" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is None:
                target = node.value
                is_text = isinstance(target, ast.JoinedStr) or (
                    isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "str"
                )
                if is_text and node.slice.upper is not None and str(path.relative_to(root)) not in not_messages:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not found, found


@pytest.mark.parametrize("shrink", [0, 5_000, 16_400, 40_000])
@pytest.mark.parametrize("offset", [-20, -5, 0, 5])
def test_clip_leaves_no_piece_where_masking_shortened_what_came_before_the_window_end(shrink, offset):
    """Masking can shorten text by more than the window it reads past the cut (a long value after a secret name
    becomes `***`): a secret cut by the window's end must still not slide into what is shown."""
    from collector.sdk.redaction import WINDOW, clip

    limit = 200
    SECRETS.add([SECRET_IN_TEXT])
    try:
        head = f"signature={'x' * shrink} " if shrink else ""
        pad = "z" * max(0, limit + WINDOW - len(head) + offset - len(SECRET_IN_TEXT) // 2)
        shown = clip(head + pad + SECRET_IN_TEXT + " and the rest", limit)
    finally:
        SECRETS.remove([SECRET_IN_TEXT])
    assert not [p for p in (SECRET_IN_TEXT[i : i + 6] for i in range(len(SECRET_IN_TEXT) - 5)) if p in shown]


@pytest.mark.parametrize(
    "text",
    [
        "tokens: [abc}Hidden-value-1234]",
        "secret={a: [1, 2}, Hidden-value-1234]}",
        "credentials: {'list': [']'], 'k': 'Hidden-value-1234'}",
        "apiKey=[Hidden-value-1234",  # never closed: masked to the end
        '"password": {"old": "x", "new": "Hidden-value-1234"}, "user": "ann"',
    ],
)
def test_a_list_or_document_under_a_secret_name_is_masked_to_its_own_closing_bracket(text):
    out = SECRETS.redact(text)
    assert "Hidden-value" not in out and "***" in out


def test_a_value_for_a_log_line_is_masked_once_with_the_whole_line_or_clipped_when_records_are_not(caplog):
    import logging

    from collector.sdk.redaction import install, shown

    held = "held-token-0123456789abcdef"
    install()
    SECRETS.add([held])
    try:
        assert shown(f"user {held}", 80) == f"user {held}"  # left to the line's own redaction
        logging.getLogger("collector.run").warning("run user=%s", shown(f"user {held}", 80))
        assert held not in caplog.text and "run user=user " in caplog.text
        assert shown("a" * 81, 80) == "a" * 80 and held not in shown(f"{'a' * 70}{held}", 80)  # cut: masked first
        previous = logging.getLogRecordFactory()
        logging.setLogRecordFactory(logging.LogRecord)  # records made by another factory: not redacted when made
        try:
            assert held not in shown(f"user {held}", 80) and shown("user@x", 80) == "user@x"
        finally:
            logging.setLogRecordFactory(previous)
    finally:
        SECRETS.remove([held])


def test_a_networks_secrets_are_its_credentials_and_what_lies_under_secret_names_not_its_lease_token():
    from collector.engine.run import secrets_of
    from collector.sdk.redaction import secret_values

    network = {
        "_id": 1,
        "accessToken": "token-value-0001",
        "leaseToken": "lease-token-0001",  # the claim's own: the same for a whole batch, no credential
        "oauth": {"secret": "nested-secret-01", "kind": "plain-text-value"},
        "seenIds": ["not-a-secret-01"],
        "apiKeys": ["listed-secret-01", "short"],
        7: "a key that is no string",
    }
    assert sorted(set(secrets_of(network))) == ["listed-secret-01", "nested-secret-01", "token-value-0001"]
    assert "lease-token-0001" in secret_values(network)  # left out by secrets_of only
    assert secret_values(network, leave="leaseToken") == secret_values(
        {k: v for k, v in network.items() if k != "leaseToken"}
    )


def test_secret_values_of_documents_sharing_a_layout_look_into_what_each_holds():
    """The fields with secret names are remembered by layout; what the other fields hold is each document's own:
    a list or a document there (of any subclass) is looked into, whatever an earlier document of the layout held."""
    from collections import OrderedDict

    from collector.sdk.redaction import secret_values

    flat = {"_id": 1, "user": "a@x.test", "accessToken": "token-a-0123456789", "extra": "plain text"}
    nested = {"_id": 2, "user": "b@x.test", "accessToken": "token-b-0123456789", "extra": {"secret": "inner-012345"}}
    subclass = {**nested, "extra": OrderedDict(oauth=[{"token": "deeper-0123456"}])}
    assert secret_values(flat) == ["token-a-0123456789"]
    assert sorted(secret_values(nested)) == ["inner-012345", "token-b-0123456789"]
    assert sorted(secret_values(subclass)) == ["deeper-0123456", "token-b-0123456789"]
    assert secret_values(nested, leave="extra") == ["token-b-0123456789"]  # the same layout, another field left
    assert secret_values(nested, leave="accessToken") == ["inner-012345"]


@pytest.mark.parametrize(
    "document",
    [
        {**{f"field{n}": n for n in range(100)}, "accessToken": "wide-token-0123456789"},  # too many fields
        {"x" * 5000: 1, "accessToken": "wide-token-0123456789"},  # names too long to remember
        {7: "seven", ("a", "b"): 2, "accessToken": "wide-token-0123456789"},  # names without a length
    ],
)
def test_secret_values_of_a_document_too_wide_to_remember_asks_each_field(document):
    from collector.sdk.redaction import _named, secret_values

    before = _named.cache_info().currsize
    assert secret_values(document) == ["wide-token-0123456789"]
    assert _named.cache_info().currsize == before


def _asked_field_by_field(document: dict, leave: str | None = None) -> list[str]:
    """secret_values as it read a document before layouts were remembered: each top-level field asked."""
    from collector.sdk.redaction import _collect, secret_name

    found: list[str] = []
    for key, inner in document.items():
        if key != leave and (secret_name(key) or isinstance(inner, (dict, list, tuple))):
            _collect(inner, secret_name(key), 1, found)
    return found


_values = st.recursive(
    st.none() | st.integers() | st.text(min_size=0, max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "token", "x.secret"]), inner),
    max_leaves=8,
)


@given(
    st.dictionaries(st.sampled_from(["_id", "user", "accessToken", "oauth", "key", "note", "leaseToken"]), _values),
    st.sampled_from([None, "leaseToken", "oauth"]),
)
@settings(max_examples=300, deadline=None)
def test_secret_values_finds_what_asking_each_field_finds(document, leave):
    from collector.sdk.redaction import secret_values

    assert sorted(secret_values(document, leave)) == sorted(_asked_field_by_field(document, leave))
