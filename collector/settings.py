"""Settings: declared once, read from config/, a .env file, the environment and the operator's settings file,
validated at start and at every reload.

Precedence, lowest first: config/defaults.env, config/<COLLECTOR_ENV>.env, ./.env, the process environment, then
the settings file named by `--env-file` or COLLECTOR_ENV_FILE. That file wins over the environment, as systemd's
EnvironmentFile= wins over Environment=: it is where an operator edits settings, and a reload (SIGHUP) reads it
again, while the environment of a running process cannot change.

Every file is read the same way (read_settings_file): UTF-8 text up to 1 MiB in a regular file, or one line naming
the file and what is wrong — at start (exit 2) as at a reload (every old setting kept). The config/ files and the
settings file must exist; ./.env may be absent.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from dotenv import dotenv_values
from dotenv.parser import parse_stream

ENVIRONMENTS = ("development", "test", "production")
DEFAULT_ENV = "production"
PER_SERVICE_INITIAL = re.compile(r"^INITIAL_INTERVAL_([A-Z0-9_]+)$")
PER_SERVICE_CONCURRENCY = re.compile(r"^SERVICE_CONCURRENCY_([A-Z0-9_]+)$")


class SettingsError(ValueError):
    """An invalid or missing setting, or a settings file that cannot be read: one line naming it."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"setting {name}: {problem}" if name else problem)  # no name: a file none names
        self.name = name


MAX_SECONDS = 366 * 86400  # every duration setting: beyond a year is a typo, and far beyond breaks date arithmetic
MAX_CONCURRENCY = 4096  # a pooled connection and two threads each (two runs per request slot)


def _number(text: str) -> float:
    """A duration in seconds."""
    value = float(text)
    if value < 0 or value != value or value == float("inf"):
        raise ValueError("must be a finite number >= 0")
    if value > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS} seconds (366 days)")
    return value


def _positive_number(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise ValueError("must be a number > 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be a whole number >= 1")
    return value


def _concurrency(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_CONCURRENCY:
        raise ValueError(f"must be at most {MAX_CONCURRENCY}")
    return value


def _http_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http(s) URL with a host")
    return text.rstrip("/")


def _mongodb_uri(text: str) -> str:
    """Validated with pymongo's own parser, strictly: an unknown option or a bad option value is refused (an
    SRV URI is checked as a plain one: no DNS look-up here)."""
    if not text.startswith(("mongodb://", "mongodb+srv://")):
        raise ValueError("must start with mongodb:// or mongodb+srv://")
    import warnings

    from pymongo import uri_parser
    from pymongo.errors import PyMongoError

    plain = text
    if text.startswith("mongodb+srv://"):
        hosts = text[len("mongodb+srv://") :].split("/", 1)[0].rsplit("@", 1)[-1]
        if "," in hosts or ":" in hosts.strip("[]").rsplit("]", 1)[-1]:
            raise ValueError("a mongodb+srv:// URI takes one host name without a port")
        plain = "mongodb://" + text[len("mongodb+srv://") :]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # strict: MongoClient only warns about an unknown option or a bad value, then ignores it
            uri_parser.parse_uri(plain, warn=False)
    except (PyMongoError, ValueError, TypeError) as exc:
        raise ValueError(f"pymongo cannot parse it: {mask_text(str(exc), text)}") from None
    return text


def _log_level(text: str) -> str:
    level = text.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return level


def _port(text: str) -> int:
    if not text.strip():
        return 0  # off
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError("must be a TCP port (1-65535), or empty or 0 for off")
    return value


def _address(text: str) -> str:
    import ipaddress

    ipaddress.ip_address(text.strip())  # ValueError names the bad address
    return text.strip()


MAX_DAYS = 36_500  # a century: past that the date arithmetic of the sweep overflows long before it matters


def _days(text: str) -> int:
    value = int(text)
    if not 0 <= value <= MAX_DAYS:
        raise ValueError(f"must be a whole number of days from 0 (off) to {MAX_DAYS}")
    return value


def _crontab(text: str) -> str:
    from datetime import UTC

    from apscheduler.triggers.cron import CronTrigger

    try:
        CronTrigger.from_crontab(text.strip(), timezone=UTC)
    except ValueError as exc:
        raise ValueError(f"must be a crontab expression (minute hour day month weekday), UTC: {exc}") from None
    return text.strip()


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of service names (empty: none)."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    for name in names:
        if not re.fullmatch(r"[a-z0-9_-]{1,40}", name):
            raise ValueError(f"{name!r} is not a service name (letters, digits, _ and -)")
    return names


def _log_format(text: str) -> str:
    value = text.strip().lower()
    if value not in ("text", "json"):
        raise ValueError("must be text or json")
    return value


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


# (environment name, Settings field, parser)
SCHEMA: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("MONGODB_URI", "mongodb_uri", _mongodb_uri),
    ("LOOP_IDLE_PAUSE", "loop_idle_pause", _number),
    ("PASS_LIMIT", "pass_limit", _positive_int),
    ("NORMAL_INTERVAL", "normal_interval", _number),
    ("RATE_LIMIT_INTERVAL", "rate_limit_interval", _number),
    ("INITIAL_INTERVAL", "initial_interval", _number),
    ("BACKOFF_BASE", "backoff_base", _number),
    ("BACKOFF_MAX", "backoff_max", _number),
    ("MAX_ERRORS", "max_errors", _positive_int),
    ("HTTP_TIMEOUT", "http_timeout", _positive_number),
    ("HTTP_MAX_BYTES", "http_max_bytes", _positive_int),
    ("RATE_LIMIT_MIN_WAIT", "rate_limit_min_wait", _number),
    ("RATE_LIMIT_MAX_WAIT", "rate_limit_max_wait", _positive_number),
    ("CONCURRENCY", "concurrency", _concurrency),
    ("SERVICE_CONCURRENCY", "service_concurrency", _concurrency),
    ("LEASE_SECONDS", "lease_seconds", _positive_number),
    ("USER_AGENT", "user_agent", _text),
    ("GITHUB_API_URL", "github_api_url", _http_url),
    ("ALLOW_PRIVATE_HOSTS", "allow_private_hosts", _bool),
    ("LOG_LEVEL", "log_level", _log_level),
    ("LOG_FORMAT", "log_format", _log_format),
    ("HEARTBEAT_SECONDS", "heartbeat_seconds", _positive_number),
    ("METRICS_PORT", "metrics_port", _port),
    ("METRICS_ADDR", "metrics_addr", _address),
    ("INACTIVE_DAYS", "inactive_days", _days),
    ("INACTIVE_SWEEP_CRON", "inactive_sweep_cron", _crontab),
    ("SERVICES", "services", _names),
    ("SERVICES_EXCLUDE", "services_exclude", _names),
)
SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD")


@dataclass(frozen=True)
class Settings:
    env: str
    mongodb_uri: str
    loop_idle_pause: float
    pass_limit: int
    normal_interval: float
    rate_limit_interval: float
    initial_interval: float
    backoff_base: float
    backoff_max: float
    max_errors: int
    http_timeout: float
    http_max_bytes: int
    rate_limit_min_wait: float
    rate_limit_max_wait: float
    concurrency: int
    service_concurrency: int
    lease_seconds: float
    user_agent: str
    github_api_url: str
    allow_private_hosts: bool
    log_level: str
    log_format: str
    heartbeat_seconds: float
    metrics_port: int = 0  # 0: no /metrics or /healthz
    metrics_addr: str = "127.0.0.1"
    inactive_days: int = 60  # 0: no sweep
    inactive_sweep_cron: str = "0 4 * * *"
    services: tuple[str, ...] = ()  # claim only these services' networks (empty: every service)
    services_exclude: tuple[str, ...] = ()  # never claim these
    initial_intervals: Mapping[str, float] = field(default_factory=dict)
    service_concurrencies: Mapping[str, int] = field(default_factory=dict)
    raw: Mapping[str, str] = field(default_factory=dict, repr=False)
    file_keys: frozenset[str] = field(default=frozenset(), repr=False)
    sources: tuple[str, ...] = field(default=(), repr=False)  # what was read, lowest precedence first

    def initial_interval_for(self, service: str) -> float:
        return self.initial_intervals.get(service.lower(), self.initial_interval)

    def service_concurrency_for(self, service: str) -> int:
        return self.service_concurrencies.get(service.lower(), self.service_concurrency)

    def get(self, name: str, default: str | None = None) -> str | None:
        """A raw setting by its environment name, for connectors' own settings (app keys, client ids)."""
        return self.raw.get(name, default)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def secrets(self) -> list[str]:
        """Every secret value among the settings (app keys and secrets, the MongoDB password and secret URI
        options): what log redaction must hide. Values under 6 characters are not keys (flags, ports)."""
        values = uri_secrets(self.mongodb_uri)
        values += [
            v for k, v in self.raw.items() if any(w in k for w in SECRET_WORDS) and isinstance(v, str) and len(v) >= 6
        ]
        return [v for v in values if v]

    def describe(self) -> dict[str, Any]:
        """The effective settings by environment name, secrets masked (for --check-config)."""
        out: dict[str, Any] = {"COLLECTOR_ENV": self.env}
        for name, attr, _ in SCHEMA:
            out[name] = getattr(self, attr)
        for service, value in sorted(self.initial_intervals.items()):
            out[f"INITIAL_INTERVAL_{service.upper()}"] = value
        for service, value in sorted(self.service_concurrencies.items()):
            out[f"SERVICE_CONCURRENCY_{service.upper()}"] = value
        for name in sorted(self.raw):
            if name not in out and name in self.file_keys:
                out[name] = self.raw[name]
        return {name: mask(name, value) for name, value in out.items()}


def mask(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if name == "MONGODB_URI":
        return mask_uri(value)
    if any(word in name for word in SECRET_WORDS) and value:
        return "***"
    return value


SECRET_OPTION = re.compile(r"pass|secret|token|key|credential", re.IGNORECASE)


def split_credentials(uri: str) -> tuple[str, str | None, str]:
    """(scheme://, the userinfo or None, everything after its "@"), found without parsing the URI: a password
    may hold "/", "?", "#" or "@" unescaped, which would make a URL parser misplace it (and quote it whole in its
    error). The userinfo runs to the last "@" (over-masking an "@" in an option value is the safe mistake)."""
    scheme, sep, rest = uri.partition("://")
    if not sep or "@" not in rest:
        return uri, None, ""
    userinfo, _, after = rest.rpartition("@")
    return scheme + sep, userinfo, after


def mask_uri(uri: str) -> str:
    """The URI with its password and every secret-looking option value (tlsCertificateKeyFilePassword,
    AWS_SESSION_TOKEN inside authMechanismProperties, ...) replaced by ***. The password is masked before any
    parsing."""
    head, userinfo, after = split_credentials(uri)
    if userinfo is not None and ":" in userinfo:
        uri = f"{head}{userinfo.split(':', 1)[0]}:***@{after}"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return head + "***" if userinfo is not None else "***"
    netloc = parts.netloc
    options = []
    for pair in parts.query.split("&") if parts.query else []:
        name, sep, value = pair.partition("=")
        if SECRET_OPTION.search(name):
            value = "***"
        elif name.lower() == "authmechanismproperties":
            value = ",".join(_mask_property(p) for p in value.split(","))
        options.append(f"{name}{sep}{value}")
    return urlunsplit(parts._replace(netloc=netloc, query="&".join(options)))


def _mask_property(pair: str) -> str:
    name, sep, value = pair.partition(":")
    return f"{name}{sep}***" if sep and SECRET_OPTION.search(name) else pair


def uri_secrets(uri: str) -> list[str]:
    """The secret values in a MongoDB URI (password, secret options), for log redaction."""
    from urllib.parse import unquote

    found = []
    head, userinfo, after = split_credentials(uri)
    if userinfo is not None and ":" in userinfo:
        found.append(userinfo.split(":", 1)[1])
        uri = f"{head}{userinfo.split(':', 1)[0]}:***@{after}"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return [v for s in found for v in {s, unquote(s)} if v]
    for pair in parts.query.split("&") if parts.query else []:
        name, _, value = pair.partition("=")
        if SECRET_OPTION.search(name):
            found.append(value)
        elif name.lower() == "authmechanismproperties":
            found += [p.partition(":")[2] for p in value.split(",") if SECRET_OPTION.search(p.partition(":")[0])]
    return [v for s in found for v in {s, unquote(s)} if v]


def mask_text(text: str, uri: str) -> str:
    for secret in uri_secrets(uri):
        if len(secret) >= 3:
            text = text.replace(secret, "***")
    return text


def config_dir() -> Path:
    """The directory of the per-environment files: COLLECTOR_CONFIG_DIR, else the config/ beside the code (a
    checkout), else the installed copy."""
    override = os.environ.get("COLLECTOR_CONFIG_DIR")
    if override:
        return Path(override)
    checkout = Path(__file__).resolve().parent.parent / "config"
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
    broken = next((b.original.line for b in parse_stream(io.StringIO(text)) if b.error), None)
    if broken is not None:  # python-dotenv would skip the line, warn without naming the file, and apply the rest
        raise refuse(f"line {broken} is not a setting (NAME=value; an unclosed quote?)")
    return {k: v for k, v in dotenv_values(stream=io.StringIO(text)).items() if v is not None}


def read_env_file(path: str | Path) -> dict[str, str]:
    """The operator's settings file, which must exist."""
    return read_settings_file(path, "COLLECTOR_ENV_FILE") or {}


def _working_dir(cwd: str | Path | None) -> Path:
    try:
        return Path(cwd or os.getcwd())
    except OSError:  # removed under the running daemon: a removed directory holds no .env
        return Path(".")


def load_settings(
    environ: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    env: str | None = None,
    read_dotenv: bool = True,
    env_file: str | Path | None = None,
) -> Settings:
    """Merge the sources and validate. Raises SettingsError naming the first bad setting or the first settings
    file that cannot be read: the two config/ files ship with the code and must be there, ./.env may be absent.
    `env_file` defaults to COLLECTOR_ENV_FILE from `environ`; none is read without either."""
    environ = os.environ if environ is None else environ
    env_file = env_file or environ.get("COLLECTOR_ENV_FILE") or None
    operator = read_env_file(env_file) if env_file else {}
    env = env or operator.get("COLLECTOR_ENV") or environ.get("COLLECTOR_ENV") or DEFAULT_ENV
    if env not in ENVIRONMENTS:
        raise SettingsError("COLLECTOR_ENV", f"{env!r} is not one of {', '.join(ENVIRONMENTS)}")
    base = config_dir()
    merged: dict[str, str] = {}
    files = [(base / "defaults.env", True), (base / f"{env}.env", True)]  # both ship with the code
    if read_dotenv:
        files.append((_working_dir(cwd) / ".env", False))
    read = []
    for path, required in files:
        values = read_settings_file(path, required=required)
        if values is not None:
            read.append(str(path))
            merged.update(values)
    file_keys = frozenset(merged) | frozenset(operator)
    merged.update({k: v for k, v in environ.items() if isinstance(v, str)})
    merged.update(operator)
    read.append("the environment")
    if env_file:
        read.append(str(env_file))
    return _build(env, merged, file_keys).with_(sources=tuple(read))


def _build(env: str, merged: Mapping[str, str], file_keys: frozenset[str]) -> Settings:
    values: dict[str, Any] = {"env": env}
    for name, attr, parse in SCHEMA:
        if name not in merged:
            raise SettingsError(name, "is missing")
        values[attr] = _parse(name, parse, merged[name])
    values["initial_intervals"] = {
        match.group(1).lower(): _parse(key, _number, value)
        for key, value in merged.items()
        if (match := PER_SERVICE_INITIAL.match(key))
    }
    values["service_concurrencies"] = {
        match.group(1).lower(): _parse(key, _concurrency, value)
        for key, value in merged.items()
        if (match := PER_SERVICE_CONCURRENCY.match(key))
    }
    values["raw"] = dict(merged)
    values["file_keys"] = file_keys
    return Settings(**values)


def _parse(name: str, parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text.strip())
    except (TypeError, ValueError) as exc:
        problem = f"invalid value {mask(name, text)!r} ({exc})"
        if name == "MONGODB_URI":  # the parser's own words may quote the URI
            problem = mask_text(problem, text)
        raise SettingsError(name, problem) from None


def settings_for_tests(**changes: Any) -> Settings:
    """Settings of the test environment, ignoring the process environment and ./.env."""
    settings = load_settings(environ={}, env="test", read_dotenv=False)
    return settings.with_(**changes) if changes else settings


__all__ = ["Settings", "SettingsError", "load_settings", "settings_for_tests"]
