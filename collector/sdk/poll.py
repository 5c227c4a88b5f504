"""A connector's poll, declared: the request a normal-mode run sends first, and the answers that mean nothing new.

A connector that declares it (`Connector.poll`) lets the engine send that request on its event loop
(net/pollloop.py) without waking a worker thread. An answer of a status in `unchanged` (GitHub's 304 to the stored
ETag) ends the run there (`Connector.unchanged`: no item, the quota the answer told); any other answer reaches a
worker as usual, and the run's first `get` of the same URL receives it instead of sending the request again (the
request is sent once). Nothing changes for the connector's `normal`: it runs as if it had sent the request itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Poll:
    """The first request of a normal-mode run: `url`, `params` and `headers` as the run's first `get` passes them
    (the connector's `headers` and its authentication are added as for every `get`); `unchanged`, the statuses
    that mean nothing new since the last run."""

    url: str
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    unchanged: frozenset[int] = frozenset({304})
