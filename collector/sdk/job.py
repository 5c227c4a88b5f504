"""What a connector runs with, and what its declared parts (authentication, token refresh, identity look-up) may
ask of the connector: `Job` (one run of one network) and `ConnectorAPI`, the connector as those parts see it.
A leaf of the SDK, so that connector.py imports auth.py and refresh.py and never the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from .errors import Malformed

if TYPE_CHECKING:  # pragma: no cover
    import requests

    from ..settings import Settings
    from .http import Http


class ConnectorAPI(Protocol):
    """The connector, as its declared parts use it."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def http(self) -> Http: ...

    def setting(self, name: str) -> str: ...

    def get_json(self, job: Job, url: str, *, params=None, headers=None) -> tuple[Any, requests.Response]: ...

    def parse_json(self, job: Job, response: requests.Response) -> tuple[Any, requests.Response]: ...

    @staticmethod
    def reason(response: requests.Response) -> str: ...


@dataclass(frozen=True)
class Job:
    """One run of one network: its document (read only), the mode to run in, and the time."""

    network: Mapping[str, Any]
    mode: str  # 'initial' or 'normal' (modes.py; a rateLimit network runs in its prevMode)
    now: datetime

    @property
    def token(self) -> str:
        return self.network["accessToken"]

    def with_network(self, changes: Mapping[str, Any]) -> Job:
        return Job({**self.network, **changes}, self.mode, self.now)

    def state_int(self, name: str, default: int, minimum: int = 0) -> int:
        value = self.network.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise Malformed(f"field {name!r} must be a whole number >= {minimum}, got {value!r}")
        return value

    def state_datetime(self, name: str) -> datetime | None:
        value = self.network.get(name)
        if value is None or isinstance(value, datetime):
            return value
        raise Malformed(f"field {name!r} must be a date, got {type(value).__name__}")
