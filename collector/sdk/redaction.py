"""One redaction for every log record of the process, third-party loggers included.

Two nets:
- **values**: every secret the collector knows (tokens of the networks it holds, tokens a refresh obtained, app
  keys and secrets from the settings, the MongoDB password) is replaced by `***` wherever it appears, also in
  its percent-encoded forms (OAuth signature base strings, query strings), all of them found in one pass of an
  Aho–Corasick automaton per text whatever their number (`secretset.py`);
- **shapes**: the value after a secret-looking field name (`"accessToken": "..."` in pymongo's command logs,
  `Authorization: Bearer ...`, `key=...` in a query string) is masked even when the value is not known yet.

`install()` wraps the logging record factory, so every record is redacted when it is made, whatever handler
(a file, journald, pytest's capture) receives it; `RedactingFilter` does the same on a handler.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable
from datetime import datetime

from .secretset import MIN_LENGTH as MIN_LENGTH
from .secretset import RELEASED_KEPT as RELEASED_KEPT
from .secretset import SecretSet, finder

MASK = "***"
# a field name that holds a secret, at any depth and in any writer's spelling: accessToken, oauth.token,
# tokenSecret, client_secret, password, apiKey, app-key, privateKey, refreshJwt, oauth_signature, key, ...
KEYWORDS = (
    r"token|secret|passw(?:or)?d|api[_-]?key|app[_-]?key|private[_-]?key|credential|jwt|signature|authorization|cookie"
)
# In free text a name is looked for within REACH characters of its keyword on either side, and an escaping run of
# at most 8 backslashes: every pattern here then costs time linear in the text, whatever a server or a document
# puts in it (unbounded, `a.a.a.…` or `\\\…` made the search quadratic: 16 KB took 11 s). `secret_name`, for a
# field name alone, has no such bound.
REACH = 64
_NAME_IN_TEXT = rf"(?:[A-Za-z_$][\w$.-]{{0,{REACH - 1}}}?)?(?:{KEYWORDS})[\w$-]{{0,{REACH}}}|key"
_SHAPES = re.compile(
    r"""(?P<q1>\\{0,8}["'])?(?P<name>\b""" + _NAME_IN_TEXT + r""")(?P=q1)?(?P<sep>\s*[:=]\s*)"""
    r"""(?:(?P<schemed>(?:Bearer|Basic|OAuth|Digest|token)\s+[^\s"',\\]+)|(?P<esc>\\{1,8}")(?P<escaped>(?:(?!\\{1,8}").){0,8192})\\{1,8}"|"(?P<quoted>(?:[^"\\]|\\.){0,8192})"|'(?P<single>[^']{0,8192})'"""
    # a value cut short (a log line truncated inside it) runs to the end of what is there; a list or a document
    # (`"tokens": ["…"]`, `'secret': {…}`) is masked whole (`_structure_end`)
    r"""|(?P<open>\\{0,8}["'])(?P<unclosed>.{0,8192})|(?P<nested>[\[{])"""
    r"""|(?P<value>[^"'\s&,;)}\\]+))"""
    r"""|(?P<scheme>\b(?:Bearer|Basic|OAuth)\s+)(?P<cred>[^\s"',\\]+)""",
    re.IGNORECASE | re.DOTALL,
)
SPAN = 8192  # the most a shape's value is taken to be: a token is at most 8,192 characters (sdk/validate.py)
# text without any of these (case-folded; re's IGNORECASE also takes the dotless ı for i) has no shape to mask
_SHAPE_WORDS = (
    *("token", "secret", "passw", "key", "credential", "jwt", "signature", "authorization", "cookie"),
    *("bearer", "basic", "oauth"),
)
_NAME_CHARS = re.compile(r"[\w$.-]+", re.IGNORECASE)
_NAME_START = re.compile(r"[A-Za-z_$]", re.IGNORECASE)
_KEYWORD = re.compile(KEYWORDS, re.IGNORECASE)
_KEY = re.compile("key", re.IGNORECASE)
# values that are credentials by their shape alone, whatever field or text they sit in
_CREDENTIALS = re.compile(
    r"\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|\bgithub_pat_[A-Za-z0-9_]{40,}"
    # JWTs (Bluesky, Google, ...); from the start of a run of base64url characters (possessive: linear time)
    r"|(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|\bya29\.[A-Za-z0-9_-]{20,}"  # Google OAuth access tokens
    r"|\b1//0[A-Za-z0-9_-]{20,}"  # Google refresh tokens
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe-style secret keys
)


def secret_name(name: object) -> bool:
    """Whether a field of this name holds a secret (masked by `networks show` at any depth): `key`, or a name of
    word characters, `$`, `.` and `-` with a keyword after its last dot (a name that does not start with a
    letter, `_` or `$` only as the keyword itself). In one pass over the name, however long."""
    if not isinstance(name, str) or _NAME_CHARS.fullmatch(name) is None:
        return False
    if _KEY.fullmatch(name):
        return True
    last_part = name.rfind(".") + 1
    if _NAME_START.match(name):
        return _KEYWORD.search(name, last_part) is not None
    return last_part == 0 and _KEYWORD.match(name) is not None


_holds_shape_word = finder(_SHAPE_WORDS)
# what every credential shape starts with: text with none of these has no credential to mask (the regular
# expression, tried at every position, cost ~9 µs on a run line)
_holds_credential_start = finder(
    (*(f"gh{kind}_" for kind in "pousr"), "github_pat_", "eyJ", "xox", "ya29.", "1//0", "AKIA", "k_live_", "k_test_")
)


def _may_hold_shape(text: str) -> bool:
    return _holds_shape_word(text.casefold().replace("ı", "i"))


def mask_credentials(text: str) -> str:
    """`text` with every value of a known credential shape masked."""
    return _CREDENTIALS.sub(MASK, text) if _holds_credential_start(text) else text


def mask_shapes(text: str) -> str:
    """`text` with the value after every secret-looking name masked: quoted, bare, cut short, or a whole list or
    document. One pass: each search starts where the last masked value ended."""
    parts, position = [], 0
    while (match := _SHAPES.search(text, position)) is not None:
        start, end, replacement = _masked_span(match, text)
        parts += [text[position:start], replacement]
        position = max(end, match.start() + 1)
    return "".join(parts) + text[position:] if parts else text


def _masked_span(match: re.Match[str], text: str) -> tuple[int, int, str]:
    """Where a match's secret value is and what replaces it: (start, end, text for text[start:end])."""
    if match.group("name") is None:
        return match.start(), match.end(), match.group("scheme") + MASK
    if match.group("nested") is not None:
        start = match.start("nested")
        return start, _structure_end(text, start), MASK
    for group in ("schemed", "escaped", "quoted", "single", "unclosed", "value"):
        if match.group(group) is not None:
            start, end = match.span(group)
            if end == start:
                return match.start(), match.end(), match.group(0)  # an empty value hides nothing
            return start, end, MASK
    return match.start(), match.end(), match.group(0)  # pragma: no cover - one of the groups always matched


def _structure_end(text: str, start: int) -> int:
    """The end of the list or document that opens at `start` (the bracket that closes it, strings skipped; a
    bracket of the other kind closes nothing), or, when it is not closed within SPAN characters, where the reading
    stopped: the rest is masked too."""
    closers, quote, index, stop = [], "", start, min(len(text), start + SPAN)
    while index < stop:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "[{":
            closers.append("]" if char == "[" else "}")
        elif closers and char == closers[-1]:
            closers.pop()
            if not closers:
                return index + 1
        index += 1
    return stop


class Secrets(SecretSet):
    """The secret values to hide (secretset.py), and the redaction of a text by them, by shape and by credential."""

    def redact(self, text: str) -> str:
        spans = self.spans(text)
        if spans:
            text = _masked(text, spans)
        if _may_hold_shape(text):
            text = mask_shapes(text)
        return mask_credentials(text)


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each of `spans` (in order, apart) replaced by MASK."""
    parts, position = [], 0
    for start, end in spans:
        parts += [text[position:start], MASK]
        position = end
    return "".join(parts) + text[position:]


SECRETS = Secrets()


def redact(text: str) -> str:
    return SECRETS.redact(text)


WINDOW = 2 * SPAN  # masked past the cut at first: more than any secret the masks know (≤ SPAN), with its name


def clip(text: object, limit: int) -> str:
    """Text shortened the one way that leaks nothing: masked first, then cut to `limit` characters (a secret that
    straddled the cut would otherwise survive in a piece no mask recognises). Only a window of the text is masked,
    so the cost stays bounded however long it is: one that still reaches SPAN characters past the cut once masked,
    so a secret cut by the window's own end lies past the cut (masking shortens text: the window grows until then
    or the text ends)."""
    text = str(text)
    end = limit + WINDOW
    while True:
        masked = redact(text[:end])
        if end >= len(text) or len(masked) >= limit + SPAN:
            return masked[:limit]
        end *= 2


NESTED_KEPT = 100  # secret values taken from one document at most (a document is not ours to trust)
NESTED_MIN = 8  # shorter ones under secret names are settings, not secrets (`tokenType: "bearer"`)


def secret_values(document: object, leave: str | None = None) -> list[str]:
    """Every string held under a secret-looking name in a document, at any depth (a token in a list, a nested
    `oauth.secret`): hidden by value from every log line while the collector holds the document. At most
    NESTED_KEPT of them, each of NESTED_MIN to SPAN characters. `leave`: a top-level field not looked into."""
    found: list[str] = []
    if not isinstance(document, dict):
        _collect(document, False, 0, found)
        return found
    layout = _layout(document)
    if layout is None:  # too wide to remember: each field asked
        _fields(((key, inner) for key, inner in document.items() if key != leave), False, 1, found)
        return found
    named = _named(layout, leave)
    for key in named:
        _collect(document[key], True, 1, found)
    if _nesting(document.values()):  # a list or a document under another name: looked into for secret names
        for key, inner in document.items():
            if key != leave and key not in named and isinstance(inner, (dict, list, tuple)):
                _collect(inner, False, 1, found)
    return found


# A network's top level is read at each claim of it, and the documents of one collection share a few layouts: the
# fields with secret names are remembered by layout (~1 µs a document, against ~3 asking each field), for layouts of
# at most LAYOUT_FIELDS fields of LAYOUT_CHARS characters in all (a document is not ours to trust), LAYOUTS_KEPT.
LAYOUT_FIELDS, LAYOUT_CHARS, LAYOUTS_KEPT = 64, 2048, 256


def _layout(document: dict) -> tuple | None:
    """The document's field names, when few and short enough to remember; else None."""
    if len(document) > LAYOUT_FIELDS:
        return None
    names = tuple(document)
    try:
        return names if sum(map(len, names)) <= LAYOUT_CHARS else None
    except TypeError:  # a name without a length (a document made in Python): asked field by field
        return None


@functools.lru_cache(maxsize=LAYOUTS_KEPT)
def _named(layout: tuple, leave: str | None) -> frozenset:
    """The names of a layout that hold secrets (`secret_name`), `leave` left out."""
    return frozenset(name for name in layout if name != leave and _secret_field(name))


_FLAT: set[type] = {str, int, float, bool, type(None), datetime}  # types that are never a list or a document
FLAT_KEPT = 64


def _nesting(values: Iterable[object]) -> bool:
    """Whether any of `values` is a list, a tuple or a document (of any subclass). The types seen are remembered."""
    kinds = set(map(type, values))
    if kinds <= _FLAT:
        return False
    for kind in kinds - _FLAT:
        if issubclass(kind, (dict, list, tuple)):
            return True
        if len(_FLAT) < FLAT_KEPT:
            _FLAT.add(kind)
    return False


def _collect(value: object, inside: bool, depth: int, found: list[str]) -> None:
    """Strings under a secret name go to `found`; outside one, only lists and documents are looked into."""
    if depth > 100 or len(found) >= NESTED_KEPT:
        return
    if isinstance(value, dict):
        _fields(value.items(), inside, depth + 1, found)
    elif isinstance(value, (list, tuple)):
        for inner in value:
            if inside or isinstance(inner, (dict, list, tuple)):
                _collect(inner, inside, depth + 1, found)
    elif inside and isinstance(value, str) and NESTED_MIN <= len(value) <= SPAN:
        found.append(value)


def _fields(items: Iterable[tuple[object, object]], inside: bool, depth: int, found: list[str]) -> None:
    """A document's fields: each looked into under a secret name (or inside one), or when a list or a document."""
    for key, inner in items:
        secret = inside or _secret_field(key)
        if secret or isinstance(inner, (dict, list, tuple)):
            _collect(inner, secret, depth, found)


_NAMES: dict[str, bool] = {}  # `secret_name` of the short names every network document repeats (`accessToken`)
NAMES_KEPT = 1024


def _secret_field(name: object) -> bool:
    """`secret_name`, remembered for short names (a plain dict: its look-up is a fraction of a function call's)."""
    if type(name) is not str or len(name) > 64:
        return secret_name(name)
    known = _NAMES.get(name)
    if known is None:
        known = secret_name(name)
        if len(_NAMES) < NAMES_KEPT:
            _NAMES[name] = known
    return known


def redact_record(record: logging.LogRecord) -> None:
    """Rewrite a record in place: its message (arguments merged in), exception and stack text."""
    if getattr(record, "_redacted", False):
        return
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: keep what can be shown
        message = f"{record.msg!r} {record.args!r}"
    record.msg, record.args = redact(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
        record.exc_info = None  # only the redacted text travels on
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    record._redacted = True


class RedactingFilter(logging.Filter):
    """For a handler: redact every record that passes through it; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Redact every record of the process when it is made (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args, **kwargs) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
        _factory.append(factory)


_factory: list[Callable[..., logging.LogRecord]] = []  # install()'s, once installed


def shown(text: object, limit: int) -> str:
    """A value for a log line's arguments, at most `limit` characters: a string within the limit as it is while
    every record is redacted whole when made (`install()`'s factory still the one making records: the line is
    masked in one pass, not each value again), else `clip`ped (masked, then cut)."""
    if type(text) is str and len(text) <= limit and _factory and logging.getLogRecordFactory() is _factory[0]:
        return text
    return clip(text, limit)
