"""Who a token belongs to, and what an operator gives to connect an account: the declarations `Connector.whoami`
(one "who am I" call: `WhoAmI`) and `Connector.credentials` (the fields read when a network is added: `Credential`).

`WhoAmI` makes ONE GET through the connector (its headers, its authentication, its own reading of errors: a 401 is
Unauthorized, Flickr's `stat: fail`, Stack Exchange's `error_id`, …) and reads the service's account id and a name
to show from the answer. It also names network fields the answer fills (Reddit's `username`, Bluesky's `did`,
X's `serviceUserId`), so a network added with it needs no look-up on its first run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .errors import BadResponse
from .http import where
from .redaction import clip
from .validate import HEADER_SAFE, IDENTITY

if TYPE_CHECKING:  # pragma: no cover
    from .job import ConnectorAPI as Connector
    from .job import Job

Path = tuple[str, ...]
MAX_ACCOUNT_CHARS = 256


@dataclass(frozen=True)
class Identity:
    """Who a token belongs to: the service's account id (stable, unique within the service; compared to refuse a
    second network of one account), a name to show (the login, handle or display name), and the network fields
    the answer fills."""

    account_id: str
    name: str
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Credential:
    """A network field an operator gives when adding a network: the token, its secret, a refresh token, an
    instance. `secret` fields are never shown; `required` ones must be given."""

    name: str
    required: bool = True
    secret: bool = True
    help: str = ""


@dataclass(frozen=True)
class WhoAmI:
    """One GET of `url` (a string, or a function of the connector and the job for a URL built from the network or
        the settings) with `params`; the account id at `account` in the answer (a string or a whole number), the name
        at the first of `names` that holds a non-empty string (else the account id), and each of `fields` (network
        field -> path) a plain name that may go into a URL path. `per_host`: the account id is qualified with the
        URL's host (`id@host`: a Mastodon account id is unique on its instance only). `check_body`: the answer goes
    through the connector's `check_body` too (an API that sends its errors with a 200: Flickr's `stat: fail`)."""

    url: str | Callable[[Connector, Job], str]
    account: Path
    names: tuple[Path, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, Path] = field(default_factory=dict)
    per_host: bool = False
    check_body: bool = False

    def identify(self, connector: Connector, job: Job) -> Identity:
        url = self.url if isinstance(self.url, str) else self.url(connector, job)
        body, response = connector.get_json(job, url, params=dict(self.params) or None)
        if self.check_body:
            connector.check_body(job, response, body)  # type: ignore[attr-defined]
        return self.read(connector.name, url, body)

    def read(self, service: str, url: str, body: Any) -> Identity:
        """The Identity in an answer; BadResponse naming what is missing (never the answer's text)."""
        account = account_text(dig(body, self.account))
        if account is None:
            raise BadResponse(f"{service}: GET {where(url)} gave no usable account id at {'.'.join(self.account)}")
        if self.per_host:
            account = f"{account}@{urlsplit(url).hostname}"
        fields = {}
        for name, path in self.fields.items():
            value = dig(body, path)
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str) or not IDENTITY.match(value):
                raise BadResponse(f"{service}: GET {where(url)} gave no usable {name} at {'.'.join(path)}")
            fields[name] = value
        names = (dig(body, path) for path in self.names)
        name = next((clip(n, 200) for n in names if isinstance(n, str) and n.strip()), account)
        return Identity(account, name, fields)


def account_text(value: Any) -> str | None:
    """An account id as text: a whole number or a short visible-ASCII string; None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and len(value) <= MAX_ACCOUNT_CHARS and HEADER_SAFE.match(value) and " " not in value:
        return value
    return None


def dig(body: Any, path: Path) -> Any:
    """The value at `path`: dict keys, and digits for a list's index (`items.0.id`); None where a step is missing."""
    for key in path:
        if isinstance(body, list) and key.isdigit():
            body = body[int(key)] if int(key) < len(body) else None
        else:
            body = body.get(key) if isinstance(body, dict) else None
    return body
