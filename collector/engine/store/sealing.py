"""Tokens sealed at rest (TOKEN_KEY): every secret the collector writes is encrypted with AES-256-GCM
(`cryptography`'s AESGCM, an AEAD) and bound to its network and field, so a sealed value copied onto another
document or another field does not open.

A sealed value is a string: `sealed:v1:<key id>:<base64url of nonce, ciphertext and tag>`. The key id (8
characters of a hash of the key) says which key opens it, so old keys (TOKEN_KEYS_OLD) still open what they
sealed while `collector networks reseal` moves every token to TOKEN_KEY. The associated data is the format's
version, the key id, the field's name and the BSON of the network's `_id`. Any other string is a plain token, as
another program writes it: read as it is, and sealed at its network's next save. Without a key nothing is sealed
and nothing is written differently.

Pure: no I/O. A value that cannot be opened is a `SealError` naming the field and the key setting, never a value;
the engine makes it that network's `sealed` error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import bson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...sdk.validate import SECRET_FIELDS
from ...settings import Settings
from ...settings.parsers import key_bytes, key_list
from .filters import state_update

PREFIX = "sealed:"
VERSION = "v1"
HEAD = f"{PREFIX}{VERSION}:"
SEALED_FIELDS = SECRET_FIELDS  # the fields the collector seals when it writes them (a sealed field of any name opens)
NONCE = 12
TAG = 16
KID_CHARS = 8
MAX_SEALED = 16 * 1024  # a token of MAX_TOKEN_CHARS (8192) seals into ~11,000 characters; longer is no sealed value
_SHAPE = re.compile(r"sealed:(v[0-9]{1,4}):([A-Za-z0-9_-]{8}):([A-Za-z0-9_-]*={0,2})", re.ASCII)
_AAD = b"likeastore-collector sealed token"
_KID = b"likeastore-collector token key id\x00"
SETTING = "TOKEN_KEY"


class SealError(ValueError):
    """A sealed value that cannot be opened (or a value that cannot be sealed): one line naming the field and the
    key setting, never a value."""


@dataclass(frozen=True)
class Key:
    """One key: its id (in every value it seals) and its cipher."""

    kid: str
    aead: AESGCM = field(repr=False, compare=False)

    @classmethod
    def of(cls, text: str) -> Key:
        raw = key_bytes(text)
        kid = base64.urlsafe_b64encode(hashlib.sha256(_KID + raw).digest()).decode()[:KID_CHARS]
        return cls(kid, AESGCM(raw))


@dataclass(frozen=True)
class Keys:
    """The keys of a process: `current` seals (None: nothing is sealed), `current` and `old` open."""

    current: Key | None = None
    old: tuple[Key, ...] = ()

    @classmethod
    def of(cls, current: str = "", old: Iterable[str] = ()) -> Keys:
        """From keys in base64 (as the settings hold them); a bad one is a ValueError that quotes none."""
        now = Key.of(current) if current else None
        others = tuple(Key.of(k) for k in dict.fromkeys(old) if k and k != current)
        return cls(now, tuple(k for k in others if now is None or k.kid != now.kid))

    @classmethod
    def from_settings(cls, settings: Settings) -> Keys:
        return cls.of(settings.token_key, key_list(settings.token_keys_old.replace(",", " ")))

    def __bool__(self) -> bool:
        return self.current is not None or bool(self.old)

    def find(self, kid: str) -> Key | None:
        return next((k for k in (self.current, *self.old) if k is not None and k.kid == kid), None)


NO_KEYS = Keys()


def is_sealed(value: object) -> bool:
    """Whether `value` is meant as a sealed value (it may still be damaged: `open_value` says)."""
    return isinstance(value, str) and value.startswith(PREFIX)


def key_id(value: object) -> str | None:
    """The id of the key that sealed `value` (None: not a well-formed sealed value)."""
    if not isinstance(value, str) or not value.startswith(PREFIX) or len(value) > MAX_SEALED:
        return None
    match = _SHAPE.fullmatch(value)
    return match.group(2) if match else None


def _aad(network_id: Any, name: str, kid: str) -> bytes:
    try:
        owner = bson.encode({"_id": network_id})
    except Exception:  # an _id BSON cannot hold: no document has it
        raise SealError(f"{SETTING} cannot seal {name}: the network's _id is not a BSON value") from None
    return b"\x00".join((_AAD, VERSION.encode(), kid.encode(), name.encode("utf-8", "surrogatepass"), owner))


def seal_value(plain: str, *, network_id: Any, name: str, keys: Keys) -> str:
    """`plain` sealed with the current key for field `name` of network `network_id`."""
    key = keys.current
    if key is None:
        raise SealError(f"{SETTING} is not set: {name} cannot be sealed")
    nonce = os.urandom(NONCE)
    data = key.aead.encrypt(nonce, plain.encode("utf-8", "surrogatepass"), _aad(network_id, name, key.kid))
    return f"{HEAD}{key.kid}:{base64.urlsafe_b64encode(nonce + data).decode()}"


def open_value(stored: str, *, network_id: Any, name: str, keys: Keys) -> str:
    """The plain value of a sealed `stored` value of field `name` of network `network_id`; SealError when it is no
    sealed value, its key is not among `keys`, or the key refuses it (altered, or copied from elsewhere)."""
    cannot = f"{SETTING} cannot open {name}"
    match = _SHAPE.fullmatch(stored) if len(stored) <= MAX_SEALED else None
    if match is None:
        raise SealError(f"{cannot}: it starts as a sealed value but is not one ({len(stored)} characters)")
    version, kid, payload = match.groups()
    if version != VERSION:
        raise SealError(f"{cannot}: it was sealed in format {version}, which this collector does not know")
    key = keys.find(kid)
    if key is None:
        held = "neither TOKEN_KEY nor TOKEN_KEYS_OLD holds it" if keys else "TOKEN_KEY is not set"
        raise SealError(f"{cannot}: it is sealed with key {kid}, and {held}")
    try:
        raw = base64.urlsafe_b64decode(payload)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) < NONCE + TAG:
        raise SealError(f"{cannot}: the sealed value is damaged (key {kid})")
    try:
        plain = key.aead.decrypt(raw[:NONCE], raw[NONCE:], _aad(network_id, name, kid))
    except InvalidTag:
        raise SealError(f"{cannot}: key {kid} refuses it (altered, or copied from another network or field)") from None
    return plain.decode("utf-8", "surrogatepass")


def seal_credentials(
    fields: Mapping[str, Any], *, network_id: Any, keys: Keys, names: Iterable[str] = SEALED_FIELDS
) -> dict[str, Any]:
    """`fields` (a network's document, or the fields of an update) with each plain, non-empty string of `names`
    sealed for network `network_id`. Without a current key: the same fields, unchanged. The one call every write
    of a network's secrets goes through (the state and token saves here; a new network's document)."""
    out = dict(fields)
    if keys.current is None:
        return out
    for name in names:
        value = out.get(name)
        if isinstance(value, str) and value and not is_sealed(value):
            out[name] = seal_value(value, network_id=network_id, name=name, keys=keys)
    return out


class OpenedNetwork(dict):
    """A network document with its sealed fields opened. `stored` keeps the value the database holds (sealed or
    plain) of each field that holds a secret: what the save compares before it seals a plain token or one sealed
    with an old key (reseal_plan), and what a token refresh fences on."""

    stored: dict[str, str]


def open_network(network: Mapping[str, Any], keys: Keys) -> tuple[dict, SealError | None]:
    """The network with its sealed fields opened (an OpenedNetwork), and the first field that could not be
    (left sealed). A network with nothing sealed and no key to seal with is given back as it is."""
    secret = {
        name: value
        for name, value in network.items()
        if isinstance(value, str) and (name in SEALED_FIELDS or value.startswith(PREFIX))  # is_sealed, inline
    }
    if keys.current is None and not any(is_sealed(v) for v in secret.values()):
        return dict(network) if not isinstance(network, dict) else network, None
    opened = OpenedNetwork(network)
    opened.stored = secret
    problem: SealError | None = None
    for name, value in secret.items():
        if is_sealed(value):
            try:
                opened[name] = open_value(value, network_id=network.get("_id"), name=name, keys=keys)
            except SealError as exc:
                problem = problem or exc
    return opened, problem


def stored_value(network: Mapping[str, Any], name: str) -> Any:
    """Field `name` as the database holds it (sealed or plain), for a write fenced on it."""
    stored = getattr(network, "stored", None)
    return stored[name] if stored is not None and name in stored else network.get(name)


def reseal_plan(network: Mapping[str, Any], keys: Keys) -> dict[str, tuple[str, str]]:
    """The secret fields the next save of `network` (opened) seals with the current key, each with (its value as
    the database holds it, its plain value): plain ones, and those sealed with an old key. Nothing without a
    current key, or for a field that could not be opened."""
    stored = getattr(network, "stored", None)
    if keys.current is None or not stored:
        return {}
    plan = {}
    for name, value in stored.items():
        plain = network.get(name)
        if not isinstance(plain, str) or not plain or is_sealed(plain) or key_id(value) == keys.current.kid:
            continue
        plan[name] = (value, plain)
    return plan


def sealed_state_write(
    keys: Keys,
    network_id: Any,
    set_fields: dict,
    unset_fields: Iterable[str] = (),
    epoch: Any = None,
    reseal: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[dict, dict, dict[str, str]]:
    """The filter and update of a state write (filters.state_update) with its tokens sealed, and the tokens it
    seals from `reseal` (reseal_plan), as written: each only while its field still holds what was read."""
    fields = seal_credentials(set_fields, network_id=network_id, keys=keys)
    expect: dict[str, str] = {}
    for name, (stored, plain) in (reseal or {}).items() if keys.current else ():
        if name not in fields:
            fields[name] = seal_value(plain, network_id=network_id, name=name, keys=keys)
            expect[name] = stored
    query, update = state_update(network_id, fields, unset_fields, epoch, expect)
    return query, update, {name: fields[name] for name in expect}
