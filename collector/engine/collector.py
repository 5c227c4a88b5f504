"""The Collector: what lives across passes — the store, the connector registry, the HTTP session, the worker
pool, the quota memory and its sharing, the saver, the database's health and the observers — and the ways in:
`run_pass` (one pass, `--once`), `serve` (the daemon's loop), `run_one` (`collector networks run`) and
`run_once`, the library entry point. The work itself is the dispatcher's (dispatch.py); saving is saving.py's.
The glossary and the flow are in docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pymongo.database import Database

from ..sdk.http import Http
from ..sdk.redaction import SECRETS, clip, install
from ..sdk.slots import Slots
from ..sdk.timeutil import to_ms, utcnow
from ..sdk.validate import SECRET_FIELDS
from ..settings import Settings, load_settings
from ..textout import printable
from .dbhealth import DatabaseHealth
from .dispatch import DESCRIPTOR_PAUSE, Dispatcher
from .events import Observer, Observers, Report, Saved
from .loglimit import Throttle
from .quota import QuotaMemory, QuotaSharing
from .registry import Registry
from .rules import MODES, latest_wait, schedule_lag
from .run import Run, RunResult, crashed, execute, prepare, secrets_of
from .runlog import PassLog, RunLog
from .saving import Saver, Saving
from .sizing import seats
from .store import Store
from .store.control import Pause, holding
from .store.control import read as read_pause
from .workers import Workers

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
    """What lives across passes, and the ways in."""

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
        self.store = Store(db)
        self.registry = registry or Registry()
        self.rng = rng or random.Random()
        self.instance_id = instance_id or default_instance_id()
        self.concurrency = concurrency or settings.concurrency
        self.concurrency_given = concurrency is not None  # --concurrency wins over CONCURRENCY, reloads too
        self.http = http or Http(settings, pool_size=max(self.concurrency, 10))  # a connection per request slot
        self.http.slots = Slots(self.concurrency, self.service_cap)  # requests out at once (sdk/slots.py)
        self.pool = Workers(seats(self.concurrency))
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.quotas = QuotaMemory()
        self.observers = Observers(observers if observers is not None else (RunLog(), PassLog()))
        self.throttle = Throttle(logger=log)  # failure lines that repeat: one a minute each
        self.sharing = QuotaSharing(self.store, self.quotas, self.registry, self.throttle)
        self.saver = Saver(self.store, settings, self.rng, self.sharing, self.throttle)
        install()  # every log record of the process is redacted from now on
        SECRETS.add(settings.secrets())
        self.database = DatabaseHealth()
        self.exhausted_at: float | None = None  # Unix time the process last ran out of file descriptors
        self.services_given = frozenset(services) if services else None  # --services wins over SERVICES
        # the networks running now (id, service, user, since), for the heartbeat: what this collector is doing
        self.running: dict[int, tuple[Any, Any, Any, datetime]] = {}
        self.pauses: list[Pause] = []  # the operator's pauses as last read (engine/store/control.py)
        self.pauses_read_at = 0.0  # monotonic time of the next read
        self.store.observe(self.on_database)
        if ensure_indexes:  # a dry run writes nothing, indexes included
            self.store.ensure_indexes()

    def on_database(self, operation: str, seconds: float, error: BaseException | None) -> None:
        """Every database operation: the health (readiness, STATUS=) and the observers (metrics) hear of it."""
        self.database.record(operation, seconds, error)
        self.observers.notify("on_database", operation, seconds, error)

    def out_of_descriptors(self) -> None:
        """A run met EMFILE/ENFILE: the collector's own trouble (the network was left as it was)."""
        import resource

        self.exhausted_at = time.time()
        try:
            open_now = len(os.listdir("/proc/self/fd"))
        except OSError:
            open_now = -1
        self.throttle.trouble(
            "descriptors",
            "out of file descriptors (%d open, limit %d): the runs are put back, no network is charged; claims "
            "wait %gs",
            open_now,
            resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            DESCRIPTOR_PAUSE,
            level=logging.ERROR,
        )

    def run_pass(
        self,
        mode: str,
        now: datetime | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        clock: Callable[[], datetime] | None = None,
    ) -> Report:
        """Run every due network of `mode` once. `now` fixes the time of the whole pass (tests); `clock`
        supplies it otherwise (default: the UTC wall clock)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if clock is None:
            fixed = to_ms(now) if now is not None else None
            clock = (lambda: fixed) if fixed is not None else utcnow
        started = time.perf_counter()
        report = Report(str(mode))
        start = clock()
        self.quotas.prune(start)
        networks = self.claim_batch(str(mode), self.settings.pass_limit, start)
        Dispatcher(self, deque(networks), report, clock, should_stop).run_pass()
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
        wait (`Pass.wanted`), refill before saving, save finished runs in batches, and wait (`wait`,
        woken early by a stop) only when nothing is due. A report goes to the observers every REPORT_EVERY
        seconds."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        Dispatcher(self, deque(), Report(str(mode)), clock, should_stop).serve(mode, wait)

    def claim_batch(self, mode: str, limit: int, now: datetime, skip_services: Iterable[str] = ()) -> list[dict]:
        """Lease up to `limit` due networks of `mode`, none of `skip_services` (their users are looked up when
        they have items to save)."""
        only, excluded = self.served()
        skip = {*skip_services, *excluded}
        networks = self.store.claim(mode, now, limit, self.instance_id, now + self.lease, skip, only)
        self.observers.notify("on_claim", str(mode), len(networks))
        self.observers.notify("on_lag", str(mode), schedule_lag(networks, now))
        self.sharing.adopt(networks, now, latest_wait(self.settings, now))
        for network in networks:
            SECRETS.add(secrets_of(network))
        return networks

    def run_one(self, network_id: Any, now: datetime, dry_run: bool = False) -> tuple[RunResult, Saved | None]:
        """Run one network now, in this thread, with the daemon's code: lease, prepare, execute, and (unless
        `dry_run`, which takes no lease and writes nothing but tokens a refresh obtained) the fenced save.
        LookupError when no such network exists or another collector holds its lease."""
        if dry_run:  # no lease either: the document is read, never written
            network = self.store.networks.find_one({"_id": network_id})
            if network is None:
                raise LookupError(f"no network with id {network_id!r}")
            until = network.get("leaseUntil")
            if isinstance(until, datetime) and to_ms(until) > now:
                raise LookupError(
                    f"network {network_id} is leased by {clip(network.get('leaseOwner'), 80)} until {until}; "
                    "left alone (try again later)"
                )
        else:
            network = self.store.claim_one(network_id, now, self.instance_id, now + self.lease)
        if network is None:
            held = self.store.networks.find_one({"_id": network_id}, {"leaseOwner": 1, "leaseUntil": 1})
            raise LookupError(
                f"no network with id {network_id!r}"
                if held is None
                else f"network {network_id} is leased by {held.get('leaseOwner')} until {held.get('leaseUntil')}"
            )
        SECRETS.add(secrets_of(network))
        users: dict[Any, dict | None] = {}
        try:
            prepared = prepare(network, self.registry, self.settings, self.http, now, self.rng.random(), self.quotas)
        except Exception as exc:
            prepared = crashed(network, None, exc, self.settings, now, self.rng.random())
        result = execute(prepared, self.settings, now) if isinstance(prepared, Run) else prepared
        if dry_run:  # except tokens a refresh obtained: a rotating refresh token is spent once used
            if result.tokens:
                self.store.save_tokens(network["_id"], dict(result.tokens), network.get("refreshToken"))
            self.forget(network, result.tokens)
            return result, None
        saving = Saving(result)
        self.saver.persist([saving], users)
        saved = saving.outcome()
        self.observers.notify("on_run", saving.result, saved)
        self.forget(network, result.tokens)
        return saving.result, saved

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.settings.lease_seconds)

    def served(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        """The services this collector claims (None: every one) and those it leaves to others: SERVICES (or
        --services) and SERVICES_EXCLUDE, as the settings now say (a reload may change them)."""
        only = self.services_given if self.services_given is not None else self.settings.services
        return (frozenset(only) if only else None), frozenset(self.settings.services_exclude)

    def paused(self, mode: str, now: datetime) -> tuple[bool, set[str]]:
        """What the operator's pauses hold back for `mode` now (the whole mode, services), read from the store at
        most every HEARTBEAT_SECONDS; a failed read keeps what was known."""
        if time.monotonic() >= self.pauses_read_at:
            self.pauses_read_at = time.monotonic() + self.settings.heartbeat_seconds
            try:
                found = [p for p in (read_pause(d) for d in self.store.pauses()) if p is not None]
            except Exception as exc:
                self.throttle.trouble(
                    "pauses", "reading the operator's pauses failed (%s); keeping %d known", exc, len(self.pauses)
                )
            else:
                self.note_pauses(found, mode, now)
        return holding(self.pauses, mode, now)

    def note_pauses(self, found: list[Pause], mode: str, now: datetime) -> None:
        """Log a pause that starts or stops holding this mode (once), and tell the observers (metrics)."""
        before = {p.scope for p in self.pauses if not p.expired(now) and p.covers(mode)}
        after = {p.scope: p for p in found if not p.expired(now) and p.covers(mode)}
        for scope in after.keys() - before:
            p = after[scope]
            log.warning(
                "paused by %s since %s: %s%s — no claims for mode %s, service %s; runs in flight finish",
                printable(p.by),
                p.at,
                printable(p.reason) or "no reason given",
                f" (until {p.until})" if p.until else "",
                p.mode,
                p.service,
            )
        for scope in before - after.keys():
            log.warning("pause %s lifted (resumed or expired): claims go on", scope)
        self.pauses = found
        self.observers.notify("on_pauses", mode, list(after.values()))

    def learn(self, result: RunResult) -> None:
        """What a run learnt about its token's quota, remembered the moment it finishes, before the next run of
        the same token can start."""
        network = result.network
        if result.called and result.quota_scope and isinstance(network.get("accessToken"), str):
            until = result.wait_until
            scheduled = result.update.values.get("scheduledTo")
            if str(result.status) == "rateLimit" and isinstance(scheduled, datetime):
                # the wait this network got (a reset already past waits RATE_LIMIT_MIN_WAIT): the token's other
                # networks wait as long, instead of calling again at once
                until = scheduled if until is None else max(until, scheduled)
            latest = latest_wait(self.settings, result.at)
            self.quotas.remember(result.quota_scope, network["accessToken"], result.quota, until, latest)

    def forget(self, network: Mapping[str, Any], tokens: Mapping[str, Any]) -> None:
        """The collector lets go of a network: its secrets no longer need hiding from the logs."""
        SECRETS.remove(secrets_of(network))
        if tokens:
            SECRETS.remove(v for k, v in tokens.items() if k in SECRET_FIELDS)

    def service_cap(self, service: object) -> int:
        return self.settings.service_concurrency_for(str(service))

    def apply_settings(self, settings: Settings) -> None:
        """New settings, on the dispatch loop's thread (a reload): pauses, intervals, limits, caps and timeouts
        take effect from the next decision; a new concurrency gets a new worker pool (runs in flight finish in
        the old one)."""
        caps = (settings.service_concurrency, settings.service_concurrencies)
        caps_changed = caps != (self.settings.service_concurrency, self.settings.service_concurrencies)
        self.settings = self.saver.settings = settings
        self.http.timeout, self.http.max_bytes = settings.http_timeout, settings.http_max_bytes
        SECRETS.add(settings.secrets())
        if not self.concurrency_given and settings.concurrency != self.concurrency:
            old, self.concurrency = self.pool, settings.concurrency
            self.pool = Workers(seats(self.concurrency))
            old.shutdown(wait=False)
            caps_changed = True
        if caps_changed:  # exchanges under way give back the old slots; new ones take the new
            self.http.slots = Slots(self.concurrency, self.service_cap)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.http.close()


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
        collector.pool.shutdown(wait=True)
        if "http" not in options:
            collector.http.close()
