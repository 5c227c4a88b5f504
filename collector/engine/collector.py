"""The Collector: the facade of the engine. It builds the parts that live across passes — the store, the
connector registry, the HTTP session, the quota memory and its sharing, the claims, the saver, the database's
health, the observers and the dispatcher that owns the loop — and offers the ways in: `run_pass` (one pass,
`--once`), `serve` (the daemon's loop), `run_one` (`collector networks run`), `run_once` (the library entry point),
and what the daemon asks of the engine (its settings, what it runs now, due counts, housekeeping). The work itself
is the dispatcher's (dispatch.py); a run's outcome is decide.py's; saving is saving.py's. The glossary and the flow
are in docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from pymongo.database import Database

from ..sdk.http import Http
from ..sdk.redaction import SECRETS, clip, install
from ..sdk.timeutil import to_ms, utcnow
from ..settings import Settings, load_settings
from .claims import Claims
from .dbhealth import DatabaseHealth
from .dispatch import Dispatcher, run_here
from .events import Observer, Observers, Report, Saved
from .housekeeping import housekeeping
from .loglimit import Throttle
from .quota import QuotaMemory, QuotaSharing
from .registry import Registry
from .rules import MODES
from .run import Claimed, RunResult, forget
from .runlog import PassLog, RunLog
from .saving import Saver, Saving
from .store import Store, lease_held
from .store.sealing import Keys, stored_value

log = logging.getLogger("collector.engine")
# Seconds a thread keeps the interpreter while another waits for it (Python's default: 0.005). The run with the
# turn (sdk/slots.py) is the one thread turning answers into items; a request whose answer came waits at most this
# long for the interpreter at each read, not five times as long. With the turn, 1 ms took the history walk of
# `collector bench` from 0.83-0.90 of its bound to 0.88-0.92 (docs/ARCHITECTURE.md, "Why one run at a time turns
# answers into items, and a 1 ms switch interval").
SWITCH_INTERVAL = 0.001


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Collector:
    """The engine's facade: its parts, and the ways in."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        registry: Registry | None = None,
        http: Http | None = None,
        rng: random.Random | None = None,
        instance_id: str | None = None,
        concurrency: int | None = None,
        observers: Iterable[Observer] | None = None,
        ensure_indexes: bool = True,
        services: Iterable[str] | None = None,
    ):
        self.settings = settings
        self.db = db
        self.store = Store(db, Keys.from_settings(settings))  # TOKEN_KEY: tokens sealed at rest
        self.registry = registry or Registry()
        self.rng = rng or random.Random()
        self.instance_id = instance_id or default_instance_id()
        self.http = http or Http(settings, pool_size=max(concurrency or settings.concurrency, 10))  # one per slot
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.quotas = QuotaMemory()
        self.observers = Observers(observers if observers is not None else (RunLog(), PassLog()))
        self.throttle = Throttle(logger=log)  # failure lines that repeat: one a minute each
        self.sharing = QuotaSharing(self.store, self.quotas, self.throttle)
        self.saver = Saver(self.store, settings, self.rng, self.sharing, self.throttle)
        install()  # every log record of the process is redacted from now on
        SECRETS.add(settings.secrets())
        self.health = DatabaseHealth()
        self.claims = Claims(
            self.store, self.registry, self.sharing, self.observers, self.throttle, settings, self.instance_id, services
        )
        self.dispatcher = Dispatcher(
            self.claims,
            self.saver,
            self.http,
            self.quotas,
            self.observers,
            self.throttle,
            self.health,
            self.rng,
            settings,
            concurrency,
        )
        self.store.observe(self.on_database)
        if ensure_indexes:  # a dry run writes nothing, indexes included
            self.store.ensure_indexes()

    def on_database(self, operation: str, seconds: float, error: BaseException | None) -> None:
        """Every database operation: the health (readiness, STATUS=) and the observers (metrics) hear of it."""
        self.health.record(operation, seconds, error)
        self.observers.notify("on_database", operation, seconds, error)

    # --- the ways in --------------------------------------------------------------------------------
    def run_pass(
        self,
        mode: str,
        now: datetime | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        clock: Callable[[], datetime] | None = None,
    ) -> Report:
        """Run every due network of `mode` once. `now` fixes the time of the whole pass (tests); `clock`
        supplies it otherwise (default: the UTC wall clock)."""
        check_mode(mode)
        if clock is None:
            fixed = to_ms(now) if now is not None else None
            clock = (lambda: fixed) if fixed is not None else utcnow
        started = time.perf_counter()
        report = Report(str(mode))
        start = clock()
        self.quotas.prune(start)
        claimed = self.claims.claim(str(mode), self.settings.pass_limit, start, repair=True)
        self.dispatcher.run_pass(claimed, report, clock, should_stop)
        report.duration = time.perf_counter() - started
        self.observers.notify("on_pass", report)
        return report

    def serve(
        self,
        mode: str,
        should_stop: Callable[[], bool],
        wait: Callable[[float], object] = time.sleep,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """The daemon's continuous dispatch for `mode`, until `should_stop()`: keep up to `concurrency` networks in
        flight and some claimed networks waiting, claim the next batch (the most overdue first) whenever few still
        wait (`sizing.claim_size`), refill before saving, save finished runs in batches, and wait (`wait`,
        woken early by a stop) only when nothing is due. A report goes to the observers every REPORT_EVERY
        seconds."""
        check_mode(mode)
        self.dispatcher.serve(str(mode), clock, should_stop, wait)

    def run_one(self, network_id: Any, now: datetime, dry_run: bool = False) -> tuple[RunResult, Saved | None]:
        """Run one network now, in this thread, with the daemon's code: lease, prepare, execute, and (unless
        `dry_run`, which takes no lease and writes nothing but tokens a refresh obtained) the fenced save.
        LookupError when no such network exists or another collector holds its lease."""
        claimed = self.read_one(network_id, now) if dry_run else self.claims.claim_one(network_id, now)
        if claimed is None:
            held = self.store.networks.find_one({"_id": {"$eq": network_id}}, {"leaseOwner": 1, "leaseUntil": 1})
            raise LookupError(
                f"no network with id {network_id!r}"
                if held is None
                else f"network {network_id} is leased by {held.get('leaseOwner')} until {held.get('leaseUntil')}"
            )
        network = claimed.network
        result = run_here(claimed, self.settings, self.http, now, self.rng.random(), self.quotas)
        if dry_run:  # except tokens a refresh obtained: a rotating refresh token is spent once used
            if result.tokens:
                self.store.save_tokens(network["_id"], dict(result.tokens), stored_value(network, "refreshToken"))
            forget(network, result.tokens, result.held)
            return result, None
        saving = Saving(result)
        self.saver.persist([saving], {})
        saved = saving.outcome()
        self.observers.notify("on_run", saving.result, saved)
        forget(network, result.tokens, result.held)
        return saving.result, saved

    def read_one(self, network_id: Any, now: datetime) -> Claimed | None:
        """A network read without a lease (a dry run): None when absent; LookupError when another holds it."""
        network = self.store.networks.find_one({"_id": {"$eq": network_id}})
        if network is None:
            return None
        until = network.get("leaseUntil")
        if lease_held(until, now, self.settings.lease_seconds):
            raise LookupError(
                f"network {network_id} is leased by {clip(network.get('leaseOwner'), 80)} until {until}; "
                "left alone (try again later)"
            )
        return self.claims.admit([network])[0]

    # --- what the daemon asks of the engine -------------------------------------------------------------
    def observe(self, observer: Observer) -> None:
        self.observers.add(observer)

    def notify(self, hook: str, *args: Any) -> None:
        self.observers.notify(hook, *args)

    def served(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        return self.claims.served()

    def services(self) -> list[str]:
        """The services a connector is registered for."""
        return self.registry.names()

    @property
    def running(self) -> dict[int, tuple[Any, Any, Any, datetime]]:
        """The networks running now (id, service, user, since)."""
        return self.dispatcher.running

    @property
    def concurrency(self) -> int:
        return self.dispatcher.concurrency

    @property
    def exhausted_at(self) -> float | None:
        """Unix time the process last ran out of file descriptors."""
        return self.dispatcher.exhausted_at

    def due(self, mode: str, now: datetime) -> int:
        """How many networks of `mode` are due now."""
        return self.store.count_due(mode, now, self.settings.lease_seconds)

    def tokens_blocked(self, now: datetime) -> int:
        """How many tokens the quota memory holds back now."""
        return self.quotas.blocked(now)

    def cut_requests_after(self, seconds: float) -> None:
        """Requests still running after `seconds` are cut, and none starts any more (a stop)."""
        self.http.interrupt_after(seconds)

    def housekeep(self, now: datetime) -> dict[str, int]:
        """One round of housekeeping (engine/housekeeping.py)."""
        return housekeeping(self.store, self.quotas, self.sharing, self.settings, now)

    def apply_settings(self, settings: Settings) -> None:
        """New settings, on the dispatch loop's thread (a reload): pauses, intervals, limits, caps and timeouts
        take effect from the next decision; a new concurrency gets a new worker pool (runs in flight finish in
        the old one). The observers hear of it."""
        old, self.settings = self.settings, settings
        self.saver.settings = self.claims.settings = settings
        self.http.configure(settings)
        SECRETS.add(settings.secrets())
        self.dispatcher.apply_settings(settings)
        self.observers.notify("on_settings", old, settings)

    def close(self) -> None:
        self.dispatcher.close()
        self.http.close()


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def run_once(
    db: Database,
    mode: str,
    settings: Settings | None = None,
    now: datetime | None = None,
    instance_id: str | None = None,
    **options: Any,
) -> Report:
    """Run one pass of the `mode` collector against `db` (a pymongo Database, real or mongomock).

    Extra keyword options go to Collector (registry=, http=, rng=, concurrency=).
    """
    collector = Collector(db, settings or load_settings(), instance_id=instance_id, **options)
    try:
        return collector.run_pass(mode, now)
    finally:
        collector.dispatcher.close()
        if "http" not in options:
            collector.http.close()
