"""Settings files: where the config/ files are, and reading any settings file one way (read_settings_file): UTF-8
text of NAME=value lines up to 1 MiB in a regular file, or one line naming the file and what is wrong."""

from __future__ import annotations

import codecs
import functools
import io
import os
import stat
from importlib import resources
from pathlib import Path

from dotenv import dotenv_values
from dotenv.parser import parse_stream

from .model import SettingsError

CHECKOUT = Path(__file__).resolve().parents[2]  # the source tree, when the code runs from a checkout


def config_dir() -> Path:
    """The directory of the per-environment files: COLLECTOR_CONFIG_DIR, else the config/ beside the code (a
    checkout), else the installed copy."""
    override = os.environ.get("COLLECTOR_CONFIG_DIR")
    if override:
        return Path(override)
    checkout = CHECKOUT / "config"
    if os.path.isfile(checkout / "defaults.env"):  # code run from a checkout reads that checkout's config/
        return checkout
    return Path(str(resources.files("collector_config")))


MAX_ENV_FILE = 1 << 20  # a settings file is a few kilobytes; a megabyte is a mistake (a log, a binary)
KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket"}


def _regular(mode: int) -> None:
    kind = stat.S_IFMT(mode)
    if kind != stat.S_IFREG:
        raise OSError(f"{KINDS.get(kind, 'a device')}, not a file")


def _read_bytes(path: str | Path) -> bytes:
    """At most MAX_ENV_FILE + 1 bytes of a regular file. Its kind is looked at before it is opened (a named pipe
    would block the reader for ever, a device may act on an open) and again once open (it may have been swapped)."""
    _regular(os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _regular(os.fstat(fd).st_mode)
        with open(fd, "rb", closefd=False) as f:
            return f.read(MAX_ENV_FILE + 1)
    finally:
        os.close(fd)


def read_settings_file(path: str | Path, name: str = "", required: bool = True) -> dict[str, str] | None:
    """Any settings file, read one way: UTF-8 text of KEY=value lines (a leading byte order mark, which Windows
    editors write, is dropped), at most 1 MiB, in a regular file. Anything else is a SettingsError of one line
    naming the file and why, never a traceback nor half a file. None when an optional file is absent."""

    def refuse(reason: str) -> SettingsError:
        return SettingsError(name, f"cannot read {str(path)!r}: {reason}")

    try:
        data = _read_bytes(path)
    except FileNotFoundError as exc:
        if not required and not os.path.lexists(path):
            return None
        raise refuse("a symbolic link to nothing" if os.path.islink(path) else exc.strerror or "missing") from None
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    if len(data) > MAX_ENV_FILE:
        raise refuse(f"larger than {MAX_ENV_FILE} bytes")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise refuse("UTF-16 or UTF-32 text, not UTF-8")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise refuse(f"not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise refuse("not text (it holds a NUL byte)")
    if "$" in text:  # ${NAME} is expanded from the environment, which may change: read anew each time
        values = _values(text)
    else:  # settings are read at every start, reload and command; the parser costs more than the rest together
        values = _values_kept(text)
    if isinstance(values, int):  # python-dotenv would skip the line, warn without naming the file, apply the rest
        raise refuse(f"line {values} is not a setting (NAME=value; an unclosed quote?)")
    return dict(values)


def _values(text: str) -> tuple[tuple[str, str], ...] | int:
    """The settings `text` holds, in order, or the number of its first line that is not a setting."""
    broken = next((b.original.line for b in parse_stream(io.StringIO(text)) if b.error), None)
    if broken is not None:
        return int(broken)
    return tuple((k, v) for k, v in dotenv_values(stream=io.StringIO(text)).items() if v is not None)


_values_kept = functools.lru_cache(maxsize=32)(_values)


def read_env_file(path: str | Path) -> dict[str, str]:
    """The operator's settings file, which must exist."""
    return read_settings_file(path, "COLLECTOR_ENV_FILE") or {}


def _working_dir(cwd: str | Path | None) -> Path:
    try:
        return Path(cwd or os.getcwd())
    except OSError:  # removed under the running daemon: a removed directory holds no .env
        return Path(".")
