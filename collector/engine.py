"""One pass of the scheduler for one mode, and `run_once`, the library entry point.

All database work happens here, on the caller's thread: load the due networks and their users in two queries,
run each network (connector: HTTP only), then save its items and its state.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from pymongo.database import Database
from pymongo.errors import PyMongoError

from connectors.registry import Registry

from .executor import Outcome, Task, execute, log_run, prepare, stored_items
from .http import Http
from .settings import Settings, load_settings
from .store import Store
from .timeutil import to_ms, utcnow

log = logging.getLogger("collector.engine")
MODES = ("initial", "normal")


@dataclass
class Report:
    """What one pass did. `tasks` is the number of networks run."""

    mode: str
    tasks: int = 0
    new_items: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    save_failures: int = 0
    duration: float = 0.0

    def count(self, outcome: Outcome) -> None:
        self.tasks += 1
        self.new_items += outcome.new_items
        self.by_status[outcome.status] = self.by_status.get(outcome.status, 0) + 1


class Collector:
    """Holds what lives across passes: the store, the connector registry and the HTTP session."""

    def __init__(self, db: Database, settings: Settings, registry: Registry | None = None,
                 http: Http | None = None, rng: random.Random | None = None, unique_items_index: bool = True):
        self.settings = settings
        self.store = Store(db, unique_items_index=unique_items_index)
        self.registry = registry or Registry()
        self.http = http or Http(settings)
        self.rng = rng or random.Random()
        self.store.ensure_indexes()

    def run_pass(self, mode: str, now: datetime | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> Report:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        started = time.perf_counter()
        report = Report(mode)
        pass_now = to_ms(now) if now is not None else utcnow()
        networks = self.store.due(mode, pass_now, self.settings.pass_limit)
        users = self.store.users_by_email(n.get("user") for n in networks)
        for network in networks:
            if should_stop():
                log.info("stop requested: %d due networks left for the next start", len(networks) - report.tasks)
                break
            run_now = to_ms(now) if now is not None else utcnow()
            outcome = self.run_network(network, run_now)
            self.save(outcome, users.get(network.get("user")), run_now, report)
            report.count(outcome)
            log_run(outcome)
        report.duration = time.perf_counter() - started
        return report

    def run_network(self, network: dict, now: datetime) -> Outcome:
        jitter = self.rng.random()
        prepared = prepare(network, self.registry, self.settings, self.http, now, jitter)
        if isinstance(prepared, Task):
            return execute(prepared, self.settings, now, jitter)
        return prepared

    def save(self, outcome: Outcome, user_data: dict | None, now: datetime, report: Report) -> None:
        """Items first, then state: a crash in between re-collects (harmlessly) rather than loses."""
        network = outcome.network
        if outcome.items and user_data is None:
            log.warning("user %r of network %s not found in users: items saved without userData",
                        network.get("user"), network.get("_id"))
        try:
            outcome.new_items = self.store.insert_items(stored_items(outcome, user_data, now))
            self.store.save_state(network["_id"], outcome.update.values, outcome.update.unset)
        except PyMongoError as exc:
            report.save_failures += 1
            log.error("saving network %s failed, it will run again: %s", network.get("_id"), exc)

    def close(self) -> None:
        self.http.close()


def run_once(db: Database, mode: str, settings: Settings | None = None, now: datetime | None = None,
             **options) -> Report:
    """Run one pass of the `mode` collector against `db` (a pymongo Database, real or mongomock).

    Extra keyword options go to Collector (registry=, http=, rng=).
    """
    collector = Collector(db, settings or load_settings(), **options)
    try:
        return collector.run_pass(mode, now)
    finally:
        if "http" not in options:
            collector.close()
