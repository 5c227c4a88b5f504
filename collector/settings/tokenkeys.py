"""The keys that seal tokens at rest, resolved: TOKEN_KEY, or the first line of TOKEN_KEY_FILE (its further lines
old keys still accepted), and TOKEN_KEYS_OLD. Each key is 32 random bytes in base64 (parsers.key_bytes); a bad key
or an unreadable file is a SettingsError of one line naming the setting, never quoting a key. The sealing itself
is the engine's store's (collector/engine/store/sealing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..textout import printable
from .files import _read_bytes
from .model import SettingsError
from .parsers import KEY_RULE, MAX_KEYS, key_bytes, key_list

NAME = "TOKEN_KEY_FILE"


def resolve(values: dict[str, Any]) -> None:
    """Put TOKEN_KEY_FILE's keys into the parsed settings `values` (`token_key`, `token_keys_old`), when it is
    set; both it and TOKEN_KEY set is refused."""
    path = values.get("token_key_file") or ""
    if not path:
        return
    if values.get("token_key"):
        raise SettingsError(NAME, "set it or TOKEN_KEY, not both")
    current, old = read_key_file(path)
    values["token_key"] = current
    values["token_keys_old"] = ",".join(dict.fromkeys([*old, *key_list(values.get("token_keys_old") or "")]))


def read_key_file(path: str | Path) -> tuple[str, list[str]]:
    """(the current key, the old ones) from a key file: a regular file of UTF-8 text, a key per line, blank lines
    and lines starting with # skipped."""
    shown = repr(printable(str(path)))
    try:
        data = _read_bytes(path)
    except OSError as exc:
        raise SettingsError(NAME, f"cannot read {shown}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise SettingsError(NAME, f"cannot read {shown}: not UTF-8 text") from None
    keys: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key_bytes(line)
        except ValueError:
            raise SettingsError(NAME, f"line {number} of {shown} is not a key: it {KEY_RULE}") from None
        keys.append(line)
    keys = list(dict.fromkeys(keys))
    if not keys:
        raise SettingsError(NAME, f"{shown} holds no key")
    if len(keys) > MAX_KEYS:
        raise SettingsError(NAME, f"{shown} holds more than {MAX_KEYS} keys")
    return keys[0], keys[1:]
