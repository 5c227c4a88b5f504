"""URLs of the collector's requests: prepared as requests prepares them (remembered for plain parameters), and
named in messages by host and path only (`where`: a query string may carry credentials for some services)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import requests


def where(url: str) -> str:
    """host/path of a URL, without the query or credentials: safe to log (no secret travels in a URL's host or
    path, and this runs for every request: it is cut, not masked)."""
    try:
        parts = urlsplit(url)
        return f"{parts.hostname or ''}{parts.path}"[:300]
    except ValueError:
        return "(unreadable URL)"


def prepared_url(url: str, params: Any) -> str:
    """The URL as requests prepares it (checked, IDNA host, quoted, parameters encoded); remembered for plain
    parameters (str/int/float values): the same poll URL serves every network of a service."""
    pairs = _plain(params)
    if pairs is None:
        request = requests.PreparedRequest()
        request.prepare_url(url, params)
        assert request.url is not None
        return request.url
    return _prepared_url(url, pairs)


@functools.lru_cache(maxsize=4096)
def _prepared_url(url: str, pairs: tuple) -> str:
    request = requests.PreparedRequest()
    request.prepare_url(url, pairs or None)
    assert request.url is not None
    return request.url


def _plain(params: Any) -> tuple | None:
    """(name, value) pairs of parameters that can be remembered ((): none), or None when they are not plain."""
    if params is None:
        return ()
    if not isinstance(params, Mapping):
        return None
    pairs = tuple(params.items())
    for name, value in pairs:
        if not isinstance(name, str) or type(value) not in (str, int, float):
            return None
    return pairs
