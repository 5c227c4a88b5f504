"""Secrets in settings: which names are secret, masking a value or a MongoDB URI for output, and finding the secret
values a log must never show."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD")
SECRET_OPTION = re.compile(r"pass|secret|token|key|credential", re.IGNORECASE)


def mask(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if name == "MONGODB_URI":
        return mask_uri(value)
    if any(word in name for word in SECRET_WORDS) and value and not name.endswith("_FILE"):  # a path is no secret
        return "***"
    return value


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
