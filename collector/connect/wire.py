"""The flows' exchanges with an authorisation server, on the collectors' own HTTP client (collector.sdk `Http`: the
whole-request deadline, the address checks, CA_BUNDLE's authorities): a form or a JSON body posted, the answer read
as JSON (or as a form, as GitHub and OAuth 1.0a servers answer), every failure a `ConnectError`."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import parse_qsl

from ..sdk import BadResponse, Http, NetworkError, where
from ..sdk.redaction import SECRETS
from ..textout import printable
from .errors import MALFORMED, UNREACHABLE, ConnectError

ERROR_SHOWN = 120  # characters of a server's own error words in a line
_LEARNT: ContextVar[list[str] | None] = ContextVar("learnt", default=None)


def hide(*values: str) -> None:
    """Secret values a flow learns (a code, a verifier, a token, a client secret) masked in every log line of the
    process from now on (the record factory's redaction, sdk/redaction.py): oauthlib logs what it signs, urllib3
    what it sends. Inside `learning`, they are also noted, to be let go of when the flow ends."""
    found = [v for v in values if v]
    SECRETS.add(found)
    noted = _LEARNT.get()
    if noted is not None:
        noted.extend(found)


@contextmanager
def learning() -> Iterator[list[str]]:
    """The secrets `hide` masks within (this thread's context), let go of when it ends: for a long-running process
    (the monitor), where every flow's values held for ever would grow the set (a command's flow ends with it)."""
    noted: list[str] = []
    reset = _LEARNT.set(noted)
    try:
        yield noted
    finally:
        _LEARNT.reset(reset)
        SECRETS.remove(noted)


def post(
    http: Http,
    url: str,
    *,
    data: Mapping[str, str] | None = None,
    json_body: Mapping[str, Any] | None = None,
    auth: Any = None,
) -> tuple[int, dict[str, Any]]:
    """POST to `url`; (status, the answer's fields). Unreachable, cut by the deadline or refused by the address
    checks: ConnectError(unreachable); an answer that is neither a JSON object nor a form: ConnectError(malformed)."""
    headers = {"Accept": "application/json"}
    try:
        if json_body is not None:
            response = http.request("POST", url, json=dict(json_body), headers=headers)
        else:
            response = http.post(url, data=dict(data or {}), headers=headers, auth=auth)
    except BadResponse as exc:
        raise ConnectError(UNREACHABLE, f"{where(url)} gave no usable answer: {printable(exc.message)}") from None
    except NetworkError as exc:
        raise ConnectError(UNREACHABLE, f"{where(url)} cannot be reached: {printable(exc.message)}") from None
    status = response.status_code
    if status >= 500:
        raise ConnectError(UNREACHABLE, f"{where(url)} answered {status}: the service is down, try again later")
    return status, fields(response.content, url)


def fields(body: bytes, url: str) -> dict[str, Any]:
    """An answer's fields: a JSON object, else a form (`a=1&b=2`); anything else is malformed."""
    text = body.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        pairs = parse_qsl(text, keep_blank_values=True)
        if pairs and "=" in text and "<" not in text:
            return dict(pairs)
        raise ConnectError(MALFORMED, f"{where(url)} answered neither JSON nor a form") from None
    if not isinstance(value, dict):
        raise ConnectError(MALFORMED, f"{where(url)} answered JSON that is not an object")
    return value


def server_error(body: Mapping[str, Any]) -> str:
    """The OAuth error code of an answer ("" when none), plain: a server's words reach the terminal escaped."""
    error = body.get("error")
    return printable(error[:ERROR_SHOWN]) if isinstance(error, str) else ""


def text_field(body: Mapping[str, Any], name: str, url: str) -> str:
    """A required text field of an answer; its absence (or another type) is malformed."""
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise ConnectError(MALFORMED, f"{where(url)} answered without {name}")
    return value
