"""The checks of one sink's settings that need its kind, made wherever the settings are checked (config.py), so a
value the destination cannot take is one line naming the setting before anything starts — never a sink that
registers, backfills and then fails its prepare step for as long as it runs:

- its URL (`url_problem`): a URL, http(s) with a host, no credentials, no spaces or control characters; for a kind
  whose URL is a user host (`Sink.checks_addresses`, a webhook) https and not a non-public address literal,
  unless ALLOW_PRIVATE_HOSTS. A name is not resolved here: every connection is checked again by the address it
  reaches (sinks/http.py).
- each option's own check (`Option.check`) and the kind's checks across options (`Sink.check_config`), a plugin's
  as a built-in's. A check that raises anything but ValueError is that sink's setting error too, not a crash.

A reason never holds a secret of the sink (masked) nor a URL's credentials (the URL is never quoted), and any text
it quotes is escaped."""

from __future__ import annotations

from urllib.parse import urlsplit

from ..net.addresses import is_public, literal_address
from ..sdk.redaction import clip
from ..settings import SettingsError
from ..textout import printable
from .sdk import Sink, SinkConfig

REASON_CHARS = 200


def url_problem(url: str, user_host: bool, allow_private: bool) -> str | None:
    """What makes `url` unusable as a sink's URL, or None. The URL itself is never quoted (it may hold
    credentials); a non-public address literal is named (it is an address, nothing secret)."""
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return "must not hold spaces or control characters"
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname, parts.port
    except ValueError as exc:
        why = "its port is not a number from 0 to 65535" if "port" in str(exc).lower() else "it cannot be parsed"
        return f"is not a valid URL ({why})"
    if parts.scheme not in ("http", "https") or not host:
        return "must be an http(s) URL with a host"
    if "@" in parts.netloc:
        return "must not hold credentials: give them as the sink's own options (which are masked)"
    if user_host and not allow_private:
        if parts.scheme != "https":
            return "must be an https URL (the receiver is a user host; or set ALLOW_PRIVATE_HOSTS=true)"
        if literal_address(host) and not is_public(host):
            return f"host {host} is a non-public address; set ALLOW_PRIVATE_HOSTS=true to allow it"
    return None


def check_url(config: SinkConfig, user_host: bool, allow_private: bool) -> None:
    """SettingsError naming SINK_<NAME>_URL when the sink's URL cannot be used."""
    problem = url_problem(config.url, user_host, allow_private)
    if problem is not None:
        raise SettingsError(f"SINK_{config.name.upper()}_URL", problem)


def check_options(config: SinkConfig, cls: type[Sink]) -> None:
    """Each option's own check, then the kind's checks across options: SettingsError naming the first setting
    refused, its reason with the sink's secrets masked."""
    prefix = f"SINK_{config.name.upper()}_"
    for option in cls.options:
        value = config.options.get(option.name, "")
        if option.check is None or not value:
            continue
        try:
            option.check(value)
        except ValueError as exc:
            raise SettingsError(prefix + option.name, reason(exc, config, value if option.secret else "")) from None
        except Exception as exc:  # a plugin's check that fails is its sink's setting error, not a crash
            text = f"its check failed: {type(exc).__name__}: {reason(exc, config, value if option.secret else '')}"
            raise SettingsError(prefix + option.name, text) from None
    try:
        problems = [(str(name), why) for name, why in cls.check_config(config)]
    except Exception as exc:  # a plugin's that fails, or answers what is not (option, reason) pairs
        text = f"the {config.kind} kind's check of the sink's options failed: {type(exc).__name__}: "
        raise SettingsError(prefix + "KIND", text + reason(exc, config, "")) from None
    for name, why in problems:
        raise SettingsError(prefix + printable(name)[:60], reason(why, config, ""))


def reason(text: object, config: SinkConfig, secret: str) -> str:
    """A check's reason, safe to print: every secret of the sink (and `secret`) masked, escaped, clipped."""
    out = str(text) or "refused"
    for value in sorted({*config.secret_values, secret} - {""}, key=len, reverse=True):
        out = out.replace(value, "***")
    return clip(printable(out), REASON_CHARS)
