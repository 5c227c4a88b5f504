"""Capacity: how much one collector runs at once — the concurrency (request slots), the worker pool with its seats
(engine/sizing.py), and the HTTP session's request slots per service (sdk/slots.py). The dispatcher owns it; a
reload resizes it between two steps (runs in flight finish in the old pool, exchanges under way give back the
old slots).
"""

from __future__ import annotations

from ..sdk.http import Http
from ..sdk.slots import Slots
from ..settings import Settings
from .sizing import seats
from .workers import Workers


class Capacity:
    def __init__(self, http: Http, settings: Settings, concurrency: int | None = None):
        self.http, self.settings = http, settings
        self.given = concurrency is not None  # --concurrency wins over CONCURRENCY, reloads too
        self.concurrency = concurrency or settings.concurrency
        self.pool = Workers(seats(self.concurrency))
        self.http.slots = Slots(self.concurrency, self.service_cap)  # requests out at once

    @property
    def seats(self) -> int:
        """Runs held at once (two per request slot)."""
        return seats(self.concurrency)

    def service_cap(self, service: object) -> int:
        return self.settings.service_concurrency_for(str(service))

    def service_seats(self, service: object) -> int:
        return seats(self.service_cap(service))

    def resize(self, settings: Settings) -> None:
        """New settings (a reload): a new concurrency gets a new worker pool, new caps new request slots."""
        caps = (settings.service_concurrency, settings.service_concurrencies)
        caps_changed = caps != (self.settings.service_concurrency, self.settings.service_concurrencies)
        self.settings = settings
        if not self.given and settings.concurrency != self.concurrency:
            old, self.concurrency = self.pool, settings.concurrency
            self.pool = Workers(seats(self.concurrency))
            old.shutdown(wait=False)
            caps_changed = True
        if caps_changed:
            self.http.slots = Slots(self.concurrency, self.service_cap)
