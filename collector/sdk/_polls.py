"""What the lane's answers are to the SDK (sdk/http.py): `Asked`, the GET a primed answer is for, and `as_response`,
an answer read on the lane as requests' Response; `unsendable`, a header the lane will not write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import requests
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from ..net.pollloop import Answer
from ._session import NoCookies


@dataclass(frozen=True)
class Asked:
    """What a run's GET asks, as `Connector.get` passes it: the URL with its parameters (before authentication
    adds any), and the headers (the connector's and the call's). A primed answer is for that GET only."""

    url: str
    headers: Mapping[str, str] = field(repr=False)  # an If-None-Match, an app's key: never in a repr


def unsendable(text: str) -> bool:
    """Whether a header name or value holds what would end the line (CR, LF) or a NUL."""
    return "\r" in text or "\n" in text or "\0" in text


def as_response(answer: Answer, url: str) -> requests.Response:
    """An answer read on the lane as requests' Response, its body still encoded (`Http._decode` decodes it);
    headers sent more than once joined by ", " (as urllib3 joins them)."""
    headers: dict[str, str] = {}
    lower: dict[str, str] = {}
    for name, value in answer.headers:
        key = lower.setdefault(name.lower(), name)
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    response = requests.Response()
    response.status_code = answer.status
    response.headers = CaseInsensitiveDict(headers)
    response.encoding = get_encoding_from_headers(response.headers)
    response.reason = answer.reason
    response.url = url
    response.cookies = NoCookies()
    response._content = answer.chunks  # type: ignore[assignment]  # raw until _decode
    response._content_consumed = True  # type: ignore[attr-defined]
    return response
