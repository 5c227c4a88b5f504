"""One pass of the scheduler for one mode, and `run_once`, the library entry point.

A pass leases its due networks in a few round trips, runs them on a worker pool (connectors do HTTP and mapping
only), and saves what they return on this, the scheduler's, thread: items of every finished network in one batch,
then each network's state, fenced by its lease epoch. The database is therefore only ever used from one thread,
whatever the driver's thread safety.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable

from pymongo.database import Database
from pymongo.errors import PyMongoError

from connectors.registry import Registry

from .executor import Outcome, Task, execute, log_run, prepare, stored_items
from .http import Http
from .quota import QuotaMemory
from .settings import Settings, load_settings
from .store import Store
from .timeutil import to_ms, utcnow

log = logging.getLogger("collector.engine")
MODES = ("initial", "normal")


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class Report:
    """What one pass did. `tasks` is the number of networks run (or settled without running)."""

    mode: str
    tasks: int = 0
    new_items: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    requests_skipped: int = 0  # networks moved to their quota reset without an API call
    stale: int = 0  # state writes refused because the lease was lost
    save_failures: int = 0
    released: int = 0  # leases given back unrun (shutdown)
    db_seconds: float = 0.0  # time spent saving items and state
    duration: float = 0.0

    def count(self, outcome: Outcome) -> None:
        self.tasks += 1
        self.new_items += outcome.new_items
        self.by_status[outcome.status] = self.by_status.get(outcome.status, 0) + 1
        if outcome.status == "rateLimit" and not outcome.called:
            self.requests_skipped += 1


class Collector:
    """What lives across passes: the store, connector registry, HTTP session, worker pool and quota memory."""

    def __init__(self, db: Database, settings: Settings, registry: Registry | None = None,
                 http: Http | None = None, rng: random.Random | None = None, unique_items_index: bool = True,
                 instance_id: str | None = None, concurrency: int | None = None):
        self.settings = settings
        self.store = Store(db, unique_items_index=unique_items_index)
        self.registry = registry or Registry()
        self.http = http or Http(settings)
        self.rng = rng or random.Random()
        self.instance_id = instance_id or default_instance_id()
        self.concurrency = concurrency or settings.concurrency
        self.pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="network")
        self.quotas = QuotaMemory()
        self.store.ensure_indexes()

    def run_pass(self, mode: str, now: datetime | None = None,
                 should_stop: Callable[[], bool] = lambda: False,
                 clock: Callable[[], datetime] | None = None) -> Report:
        """Run every due network of `mode` once. `now` fixes the time of the whole pass (tests); `clock`
        supplies it otherwise (default: the UTC wall clock)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if clock is None:
            fixed = to_ms(now) if now is not None else None
            clock = (lambda: fixed) if fixed is not None else utcnow
        started = time.perf_counter()
        report = Report(mode)
        start = clock()
        self.quotas.prune(start)
        networks = self.store.claim(mode, start, self.settings.pass_limit, self.instance_id, start + self.lease)
        users = self.store.users_by_email(n.get("user") for n in networks)
        _Pass(self, deque(networks), users, report, clock, should_stop).run()
        report.duration = time.perf_counter() - started
        return report

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.settings.lease_seconds)

    def save(self, outcomes: list[Outcome], users: dict, report: Report) -> None:
        """Items of all `outcomes` in one batch, then each state (fenced by its lease epoch).
        Items first: a crash in between re-collects (harmlessly) rather than loses."""
        if not outcomes:
            return
        docs: list[dict] = []
        spans = []
        for outcome in outcomes:
            user = outcome.network.get("user")
            if outcome.items and user not in users:
                log.warning("user %r of network %s not found in users: items saved without userData",
                            user, outcome.network.get("_id"))
            first = len(docs)
            docs.extend(stored_items(outcome, users.get(user)))
            spans.append(range(first, len(docs)))
        started = time.perf_counter()
        try:
            skipped = self.store.insert_items(docs)
            for outcome, span in zip(outcomes, spans, strict=True):
                outcome.new_items = sum(1 for i in span if i not in skipped)
                self.save_state(outcome, report)
        except PyMongoError as exc:
            report.save_failures += len(outcomes)
            log.error("saving %d networks failed; they run again when their leases expire: %s", len(outcomes), exc)
        report.db_seconds += time.perf_counter() - started
        for outcome in outcomes:
            report.count(outcome)
            log_run(outcome)

    def save_state(self, outcome: Outcome, report: Report) -> None:
        network = outcome.network
        outcome.saved = self.store.save_state(network["_id"], outcome.update.values, outcome.update.unset,
                                              epoch=network.get("leaseEpoch"))
        if not outcome.saved:
            report.stale += 1
            log.warning("network %s: lease lost to another collector, state not saved (items kept)",
                        network["_id"])
        if outcome.called and outcome.quota_scope and isinstance(network.get("accessToken"), str):
            self.quotas.remember(outcome.quota_scope, network["accessToken"], outcome.quota, outcome.wait_until)

    def service_cap(self, service: object) -> int:
        return self.settings.service_concurrency_for(str(service))

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.http.close()


class _Pass:
    """The dispatch loop of one pass: keep up to `concurrency` networks in flight (and at most the per-service
    cap of each service), save finished ones as they come, renew leases of long runs, stop early on request."""

    def __init__(self, collector: Collector, pending: deque, users: dict, report: Report,
                 clock: Callable[[], datetime], should_stop: Callable[[], bool]):
        self.c = collector
        self.pending = pending
        self.users = users
        self.report = report
        self.clock = clock
        self.should_stop = should_stop
        self.inflight: dict[Future, dict] = {}
        self.per_service: Counter = Counter()
        self.renew_every = max(collector.settings.lease_seconds / 3, 0.05)
        self.last_renew = time.monotonic()

    def run(self) -> None:
        while self.pending or self.inflight:
            if self.pending and self.should_stop():
                self.give_back()
            self.c.save(self.dispatch(), self.users, self.report)
            if self.inflight:
                timeout = max(self.renew_every - (time.monotonic() - self.last_renew), 0)
                done, _ = wait(self.inflight, timeout=timeout, return_when=FIRST_COMPLETED)
                self.c.save([self.finish(future) for future in done], self.users, self.report)
                self.renew()

    def dispatch(self) -> list[Outcome]:
        """Start what capacity allows; returns outcomes settled without running (bad input, spent quota)."""
        settled, waiting = [], deque()
        while self.pending and len(self.inflight) < self.c.concurrency:
            network = self.pending.popleft()
            service = network.get("service")
            if self.per_service[service] >= self.c.service_cap(service):
                waiting.append(network)
                continue
            now, jitter = self.clock(), self.c.rng.random()
            prepared = prepare(network, self.c.registry, self.c.settings, self.c.http, now, jitter, self.c.quotas)
            if isinstance(prepared, Task):
                self.inflight[self.c.pool.submit(execute, prepared, self.c.settings, now, jitter)] = network
                self.per_service[service] += 1
            else:
                settled.append(prepared)
        self.pending.extendleft(reversed(waiting))
        return settled

    def finish(self, future: Future) -> Outcome:
        network = self.inflight.pop(future)
        self.per_service[network.get("service")] -= 1
        return future.result()  # execute() never raises

    def renew(self) -> None:
        if not self.inflight or time.monotonic() - self.last_renew < self.renew_every:
            return
        ids = [network["_id"] for network in self.inflight.values()]
        self.c.store.renew(ids, self.c.instance_id, self.clock() + self.c.lease)
        self.last_renew = time.monotonic()

    def give_back(self) -> None:
        log.info("stop requested: %d claimed networks given back unrun", len(self.pending))
        self.c.store.release([(n["_id"], n.get("leaseEpoch")) for n in self.pending])
        self.report.released += len(self.pending)
        self.pending.clear()


def run_once(db: Database, mode: str, settings: Settings | None = None, now: datetime | None = None,
             instance_id: str | None = None, **options) -> Report:
    """Run one pass of the `mode` collector against `db` (a pymongo Database, real or mongomock).

    Extra keyword options go to Collector (registry=, http=, rng=, concurrency=).
    """
    collector = Collector(db, settings or load_settings(), instance_id=instance_id, **options)
    try:
        return collector.run_pass(mode, now)
    finally:
        collector.pool.shutdown(wait=True)
        if "http" not in options:
            collector.http.close()
