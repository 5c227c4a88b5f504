"""The pass: one claim-and-run cycle of a mode, and `run_once`, the library entry point.

A pass leases its due networks in a few round trips, runs them on a worker pool (connectors do HTTP and mapping
only), and saves their results on this, the scheduler's, thread: items of every finished run in one batch, then
each network's state, fenced by its lease epoch. The database is therefore only ever used from one thread,
whatever the driver's thread safety. The glossary and the flow are in docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from pymongo.database import Database

from ..sdk.errors import BadResponse, OutOfDescriptors
from ..sdk.http import Http
from ..sdk.redaction import SECRETS, install
from ..sdk.timeutil import to_ms, utcnow
from ..sdk.validate import SECRET_FIELDS
from ..settings import Settings, load_settings
from . import rules as schedule
from .dbhealth import DatabaseHealth, reason_of
from .events import Observer, Observers, PassLog, RunLog, Saved
from .loglimit import Throttle, held_note
from .quota import Facts, QuotaMemory
from .registry import Registry
from .rules import MODES, Update, schedule_lag
from .run import Run, RunResult, Status, crashed, execute, fail, prepare, secrets_of, stored_items
from .store import DUPLICATE_KEY, DatabaseDown, Store, unavailable

log = logging.getLogger("collector.engine")
STOP_SAVE_GRACE = 5.0  # seconds a stopping collector keeps retrying saves the database refused
REPORT_EVERY = 60.0  # seconds between the continuous loop's reports to the observers
HOLD_LIMIT = 4  # at most this many concurrencies' worth of claimed networks wait to start
DESCRIPTOR_PAUSE = 5.0  # seconds without claims after the process ran out of file descriptors


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class Report:
    """What one pass did. `tasks` is the number of runs saved (or settled without running)."""

    mode: str
    tasks: int = 0
    new_items: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    requests_skipped: int = 0  # networks moved to their quota reset without an API call
    stale: int = 0  # state writes refused because the lease was lost
    save_failures: int = 0
    released: int = 0  # leases given back unrun (shutdown)
    dropped: int = 0  # finished runs whose results could not be saved before their leases lapsed
    skipped: int = 0  # entries not kept (unreadable, or refused by the database)
    db_seconds: float = 0.0  # time spent saving items and state
    duration: float = 0.0

    def count(self, result: RunResult, saved: Saved) -> None:
        self.tasks += 1
        self.new_items += saved.new_items
        self.skipped += result.skipped
        self.by_status[str(result.status)] = self.by_status.get(str(result.status), 0) + 1
        if result.status == Status.RATE_LIMIT and not result.called:
            self.requests_skipped += 1
        if not saved.state_saved:
            self.stale += 1


class Saving:
    """The save of one RunResult in progress, so that a database hiccup retries only what is missing. The result
    itself stays whole; when the database refuses some of its items or its state, a new result replaces it."""

    def __init__(self, result: RunResult):
        self.result = result
        self.docs: list[dict] | None = None
        self.duplicates = 0
        self.new_items = 0
        self.tokens_saved = not result.tokens
        self.items_saved = False
        self.state_saved = False
        self.accepted = False  # the state write matched our lease epoch

    @property
    def network(self) -> Mapping[str, Any]:
        return self.result.network

    def saved(self, dropped: bool = False) -> Saved:
        return Saved(self.new_items, self.accepted or dropped, dropped)


class Collector:
    """What lives across passes: the store, connector registry, HTTP session, worker pool, quota memory and the
    observers."""

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
    ):
        self.settings = settings
        self.store = Store(db)
        self.registry = registry or Registry()
        self.rng = rng or random.Random()
        self.instance_id = instance_id or default_instance_id()
        self.concurrency = concurrency or settings.concurrency
        self.concurrency_given = concurrency is not None  # --concurrency wins over CONCURRENCY, reloads too
        self.http = http or Http(settings, pool_size=max(self.concurrency, 10))  # a connection per worker
        self.pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="network")
        self.quotas = QuotaMemory()
        self.observers = Observers(observers if observers is not None else (RunLog(), PassLog()))
        self.throttle = Throttle()
        install()  # every log record of the process is redacted from now on
        SECRETS.add(settings.secrets())
        self.database = DatabaseHealth()
        self.exhausted_at: float | None = None  # Unix time the process last ran out of file descriptors
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
        self.trouble(
            "descriptors",
            "out of file descriptors (%d open, limit %d): the runs are put back, no network is charged; claims "
            "wait %gs",
            open_now,
            resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            DESCRIPTOR_PAUSE,
            level=logging.ERROR,
        )

    def trouble(self, key: str, message: str, *args: Any, level: int = logging.WARNING) -> None:
        """A failure line that repeats while the trouble lasts: at most one a minute per `key` (loglimit)."""
        held = self.throttle.allow(key)
        if held is not None:
            shown = [reason_of(a) if isinstance(a, BaseException) else a for a in args]
            log.log(level, message + held_note(held), *shown)

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
        Pass(self, deque(networks), {}, report, clock, should_stop, start + self.lease).run()
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
        dispatcher = Pass(self, deque(), {}, Report(str(mode)), clock, should_stop, clock() + self.lease)
        dispatcher.continuous(mode, wait)

    def claim_batch(self, mode: str, limit: int, now: datetime, skip_services: Iterable[str] = ()) -> list[dict]:
        """Lease up to `limit` due networks of `mode`, none of `skip_services` (their users are looked up when
        they have items to save)."""
        networks = self.store.claim(mode, now, limit, self.instance_id, now + self.lease, skip_services)
        self.observers.notify("on_claim", str(mode), len(networks))
        self.observers.notify("on_lag", str(mode), schedule_lag(networks, now))
        self.adopt_quotas(networks, now)
        for network in networks:
            SECRETS.add(secrets_of(network))
        return networks

    def look_up_users(self, batch: list[Saving], users: dict[Any, dict | None]) -> None:
        """Add to `users` (a cache: None for a user not found) the users of the runs in `batch` that have items
        to store: one query per save batch, none for runs that found nothing new (most polls)."""
        missing = {s.network.get("user") for s in batch if s.docs is None and s.result.items and s.network.get("user")}
        missing = {u for u in missing if isinstance(u, str) and u not in users}
        if not missing:
            return
        try:
            found = self._guard(self.store.users_by_email, missing)
        except DatabaseDown:
            raise
        except Exception as exc:  # the items matter more than their userData
            self.trouble("users", "looking up %d users failed (%s); items saved without userData", len(missing), exc)
            return
        users.update({email: found.get(email) for email in missing})

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
                    f"network {network_id} is leased by {str(network.get('leaseOwner'))[:80]} until {until}; "
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
        self.persist([saving], users)
        saved = saving.saved()
        self.observers.notify("on_run", saving.result, saved)
        self.forget(network, result.tokens)
        return saving.result, saved

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.settings.lease_seconds)

    # --- saving (the scheduler's thread only) ---------------------------------------------------------------
    def persist(self, batch: list[Saving], users: dict) -> None:
        """Save what `batch` still needs, in this order: tokens a refresh obtained (on their own, so a failure
        below cannot lose them), the items of every run in one batch, then every state in one batch of fenced
        updates. Items before state: a crash in between re-collects (harmlessly) rather than loses.

        A document the database refuses is that network's problem alone (reported on it); a database that
        cannot be reached raises DatabaseDown with the progress kept on each Saving, for a retry."""
        for saving in batch:
            if not saving.tokens_saved:
                self._guard(
                    self.store.save_tokens,
                    saving.network["_id"],
                    dict(saving.result.tokens),
                    saving.network.get("refreshToken"),
                )
                saving.tokens_saved = True
        self.insert_items([s for s in batch if not s.items_saved], users)
        pending = [s for s in batch if not s.state_saved]
        outcomes = self._guard(self.store.save_states, [state_write(s.result) for s in pending])
        for saving, outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, Exception):
                self.save_error_instead(saving, outcome)
            else:
                saving.accepted = outcome
            self.saved(saving)
        self.share_quotas()

    def share_quotas(self) -> None:
        """Write the blocking quota facts learnt since the last save (a failure keeps them for the next)."""
        facts = self.quotas.unshared()
        if not facts:
            return
        try:
            self.store.save_quotas(facts)
        except Exception as exc:
            self.quotas.share_again(facts)
            self.trouble("quotas", "sharing %d quota facts failed (%s); kept for the next save", len(facts), exc)

    def adopt_quotas(self, networks: list[dict], now: datetime) -> None:
        """Read, in one query, the quota blocks other collectors shared for the tokens of these networks."""
        keys = {}
        for network in networks:
            token = network.get("accessToken")
            try:
                cls = self.registry.get(network.get("service"))
            except Exception:  # an unknown or broken service is reported when the network is prepared
                continue
            if isinstance(token, str):
                keys[QuotaMemory.key(cls.quota_group or cls.name, token)] = True
        if not keys:
            return
        try:
            shared = self.store.load_quotas(keys, now)
        except Exception as exc:
            log.warning(
                "reading shared quota facts failed (%s); going on with this collector's own", type(exc).__name__
            )
            return
        self.quotas.adopt({k: Facts(remaining, limit, until) for k, (remaining, limit, until) in shared.items()})

    @staticmethod
    def _guard(call: Callable, *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as exc:
            if unavailable(exc):
                raise DatabaseDown(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
            raise

    def insert_items(self, batch: list[Saving], users: dict) -> None:
        self.look_up_users(batch, users)
        docs: list[dict] = []
        owners: list[Saving] = []
        for saving in batch:
            if saving.docs is None:
                user = saving.network.get("user")
                if saving.result.items and users.get(user) is None:
                    log.warning(
                        "user %r of network %s not found in users: items saved without userData",
                        user,
                        saving.network.get("_id"),
                    )
                saving.docs = stored_items(saving.result, users.get(user)) if saving.result.items else []
            docs.extend(saving.docs)
            owners.extend([saving] * len(saving.docs))
            saving.duplicates = 0
        errors = self._guard(self.store.insert_items, docs) if docs else []
        refused: dict[int, list[tuple[str, str]]] = {}
        for index, code, message in errors:
            owner = owners[index]
            if code == DUPLICATE_KEY:
                owner.duplicates += 1
            else:
                refused.setdefault(id(owner), []).append((str(docs[index].get("itemId")), message))
        for saving in batch:
            bad = refused.get(id(saving), [])
            if bad:
                log.warning(
                    "network %s: %d items refused by the database, first %r: %s",
                    saving.network.get("_id"),
                    len(bad),
                    bad[0][0][:80],
                    bad[0][1][:200],
                )
                saving.result = refused_by_database(saving.result, bad)
            saving.new_items = len(saving.docs or []) - saving.duplicates - len(bad)
            saving.items_saved = True

    def save_error_instead(self, saving: Saving, exc: Exception) -> None:
        """The database refused this state (a value the API gave): record that error on the network instead."""
        result, network = saving.result, saving.network
        reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        log.error("network %s: state cannot be stored (%s); recording the error instead", network.get("_id"), reason)
        failed = fail(
            network,
            result.mode,
            BadResponse(f"state could not be stored: {reason}"),
            self.settings,
            result.at,
            self.rng.random(),
        )
        saving.result = result = replace(
            result, error=failed.error, update=Update({**failed.update.values, **result.tokens})
        )
        try:
            saving.accepted = self._guard(self.store.save_state, *state_write(result))
        except DatabaseDown:
            raise
        except Exception as again:
            log.error(
                "network %s: even the error record cannot be stored (%s); its lease will lapse",
                network.get("_id"),
                type(again).__name__,
            )

    def saved(self, saving: Saving) -> None:
        network = saving.network
        saving.state_saved = True
        if not saving.accepted:
            log.warning("network %s: lease lost to another collector, state not saved (items kept)", network.get("_id"))

    def learn(self, result: RunResult) -> None:
        """What a run learnt about its token's quota, remembered the moment it finishes, before the next run of
        the same token can start."""
        network = result.network
        if result.called and result.quota_scope and isinstance(network.get("accessToken"), str):
            self.quotas.remember(result.quota_scope, network["accessToken"], result.quota, result.wait_until)

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
        self.settings = settings
        self.http.timeout, self.http.max_bytes = settings.http_timeout, settings.http_max_bytes
        SECRETS.add(settings.secrets())
        if not self.concurrency_given and settings.concurrency != self.concurrency:
            old, self.concurrency = self.pool, settings.concurrency
            self.pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="network")
            old.shutdown(wait=False)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.http.close()


def service_key(network: Mapping[str, Any]) -> str | None:
    """The service a network counts against for the per-service cap (None for a garbage value)."""
    service = network.get("service")
    return service if isinstance(service, str) else None


def state_write(result: RunResult) -> tuple[Any, dict, frozenset[str], Any]:
    network = result.network
    return network["_id"], dict(result.update.values), result.update.unset, network.get("leaseEpoch")


def refused_by_database(result: RunResult, refused: list[tuple[str, str]]) -> RunResult:
    """The result, with items the database refused named on the network (see schedule.with_skips)."""
    if result.error is not None:
        return result
    all_refused = (*result.refused, *refused)
    skipped = result.skipped + len(refused)
    reason = result.skip_reason or f"refused by the database: {refused[0][1][:160]}"
    update = schedule.with_skips(result.update, result.network, skipped, reason, all_refused, result.at)
    return replace(result, update=update, refused=all_refused, skipped=skipped, skip_reason=reason)


class Pass:
    """The dispatch loop of one pass: keep up to `concurrency` networks in flight (and at most the per-service
    cap of each service), save finished ones as they come, renew the leases of every network this pass holds
    (running, waiting for a worker, or waiting to be saved), stop early on request.

    Nothing in it may end the pass because of one network: a network the engine itself cannot handle gets an
    `internal` error, and database errors delay saves (kept and retried) rather than drop runs that finished."""

    def __init__(
        self,
        collector: Collector,
        pending: deque,
        users: dict,
        report: Report,
        clock: Callable[[], datetime],
        should_stop: Callable[[], bool],
        lease_until: datetime,
    ):
        self.c = collector
        self.pending = pending
        self.users = users
        self.report = report
        self.clock = clock
        self.should_stop = should_stop
        self.inflight: dict[Future, Mapping[str, Any]] = {}
        self.unsaved: list[Saving] = []
        self.per_service: Counter = Counter()
        self.renew_every = max(collector.settings.lease_seconds / 3, 0.05)
        self.last_renew = time.monotonic()
        self.lease_until = lease_until
        self.retry_at = 0.0
        self.retries = 0
        self.stop_seen: float | None = None
        self.unreleased: list[tuple[Any, Any]] = []
        self.claims_open = False  # continuous mode claims as slots free up; a pass runs what it was given
        self.mode = report.mode
        self.next_claim = 0.0
        self.claim_failures = 0

    def run(self) -> None:
        """One pass: run what was claimed, until all of it is saved (or dropped)."""
        while self.pending or self.inflight or self.unsaved:
            self.step()
        self.release()  # one last try for leases a failed release kept

    def continuous(self, mode: str, idle_wait: Callable[[float], object]) -> None:
        """The daemon's loop: claim as slots free up, until a stop is requested and everything held is saved."""
        self.mode, self.claims_open = mode, True
        report_at = time.monotonic() + REPORT_EVERY
        while True:
            self.step()
            if time.monotonic() >= report_at:
                self.report.duration = REPORT_EVERY
                self.c.observers.notify("on_pass", self.report)
                self.report, report_at = Report(str(mode)), time.monotonic() + REPORT_EVERY
            if self.stop_seen is not None and not (self.pending or self.inflight or self.unsaved):
                break
            if not (self.pending or self.inflight or self.unsaved):  # nothing due: wait until the next look
                delay = min(max(self.next_claim - time.monotonic(), 0.0), self.c.settings.heartbeat_seconds)
                if delay:
                    if not self.claim_failures and self.c.database.up:  # it answered "nothing due": progress
                        self.c.observers.notify("on_idle", mode)
                    idle_wait(delay)
        self.release()
        self.report.duration = REPORT_EVERY - max(report_at - time.monotonic(), 0.0)
        self.c.observers.notify("on_pass", self.report)

    def step(self) -> None:
        if self.should_stop():
            self.stopping()
        self.claim()
        self.save(self.dispatch())
        if self.inflight:
            done, _ = wait(self.inflight, timeout=self.wait_time(), return_when=FIRST_COMPLETED)
            results = [self.finish(future) for future in done]
            results += self.dispatch()  # refill the free slots from what waits, then claim, then save
            self.claim()
            results += self.dispatch()
            self.save(results)
        elif self.unsaved:
            self.pause()
        self.renew()
        self.expire()
        self.release()
        self.c.observers.notify("on_tick", len(self.inflight))
        self.c.observers.notify("on_leases", len(self.pending) + len(self.inflight) + len(self.unsaved))

    def claim(self) -> None:
        """Continuous mode: claim the next batch when few claimed networks still wait (`wanted`; and not before
        the next look after an empty claim or a failed one)."""
        if not self.claims_open or self.stop_seen is not None or time.monotonic() < self.next_claim:
            return
        saturated = self.saturated()
        wanted = self.wanted(saturated)
        if not wanted:
            return
        try:
            networks = self.c.claim_batch(self.mode, wanted, self.clock(), saturated)
        except Exception as exc:  # the database is away: try again soon, the held runs go on
            self.claim_failures += 1
            self.next_claim = time.monotonic() + min(2.0**self.claim_failures, self.c.settings.loop_idle_pause)
            self.c.trouble(
                "claim",
                "claiming %s networks failed (%s); next try in %.0fs",
                self.mode,
                exc,
                max(self.next_claim - time.monotonic(), 0.0),
                level=logging.ERROR,
            )
            return
        self.claim_failures = 0
        self.c.throttle.forget("claim")
        if not networks:
            self.next_claim = time.monotonic() + self.c.settings.loop_idle_pause
            return
        if len(self.users) > 8 * self.c.concurrency:  # keep the user look-ups of held networks only
            held = {n.get("user") for n in self.held_networks()}
            self.users = {email: data for email, data in self.users.items() if email in held}
        if not (self.pending or self.inflight):
            self.lease_until = self.clock() + self.c.lease
        self.pending.extend(networks)

    def wait_time(self) -> float:
        """How long to wait for a run to finish: until the next renewal, save retry, claim or tick is due."""
        now = time.monotonic()
        until = min(self.renew_every - (now - self.last_renew), self.c.settings.heartbeat_seconds)
        if self.unsaved:
            until = min(until, self.retry_at - now)
        if self.claims_open and self.stop_seen is None and self.wanted(self.saturated()):
            until = min(until, self.next_claim - now)  # networks may come due while others run
        return max(until, 0.0)

    def wanted(self, saturated: set[str]) -> int:
        """How many networks to claim now: none while more than a quarter of a concurrency's worth is claimed and
        waiting to start; else enough for the free slots plus two concurrencies more. So workers find the next
        network waiting when they finish, even while a claim is under way, and claims (three round trips) stay
        few; waiting networks keep their leases, renewed with the others. Networks of a service at its cap
        (SERVICE_CONCURRENCY) that has a cap's worth waiting do not count as ready: the next claim skips that
        service and brings the others' networks, so one busy service never leaves the other slots idle."""
        c = self.c.concurrency
        if len(self.pending) >= HOLD_LIMIT * c:
            return 0
        ready = sum(1 for n in self.pending if service_key(n) not in saturated) if saturated else len(self.pending)
        if ready > max(c // 4, 1):
            return 0
        return max(c - len(self.inflight), 0) + 2 * c - ready

    def saturated(self) -> set[str]:
        """Services held back by their own cap (below the concurrency: a cap as large as the concurrency never
        holds a network that a free slot could take) that have a cap's worth of networks already waiting."""
        c = self.c.concurrency
        full = {
            s
            for s, n in self.per_service.items()
            if s is not None and n >= self.c.service_cap(s) and self.c.service_cap(s) < c
        }
        if not full:
            return set()
        waiting = Counter(service_key(n) for n in self.pending)
        return {s for s in full if waiting[s] >= self.c.service_cap(s)}

    def pause(self) -> None:
        """Nothing running, saves waiting for the database: wait a little before the next try."""
        delay = self.retry_at - time.monotonic()
        if delay > 0:
            time.sleep(min(delay, 0.25))

    def stopping(self) -> None:
        if self.pending:
            self.give_back()
        if self.stop_seen is None:
            self.stop_seen = time.monotonic()

    def dispatch(self) -> list[RunResult]:
        """Start what capacity allows; returns the results of networks settled without running (bad input,
        spent quota)."""
        if self.should_stop():  # a stop requested while runs were finishing: start nothing more
            self.stopping()
            return []
        settled: list[RunResult] = []
        waiting: deque[Mapping[str, Any]] = deque()
        while self.pending and len(self.inflight) < self.c.concurrency:
            network = self.pending.popleft()
            service = network.get("service")
            key = service_key(network)
            if self.per_service[key] >= self.c.service_cap(service):
                waiting.append(network)
                continue
            now, jitter = self.clock(), self.c.rng.random()
            try:
                prepared = prepare(network, self.c.registry, self.c.settings, self.c.http, now, jitter, self.c.quotas)
            except Exception as exc:  # our bug, shown on that network only
                prepared = crashed(network, None, exc, self.c.settings, now, jitter)
            if isinstance(prepared, Run):
                self.inflight[self.c.pool.submit(execute, prepared, self.c.settings, now)] = network
                self.per_service[key] += 1
            else:
                settled.append(prepared)
        self.pending.extendleft(reversed(waiting))
        return settled

    def finish(self, future: Future) -> RunResult:
        network = self.inflight.pop(future)
        self.per_service[service_key(network)] -= 1
        try:
            result = future.result()  # execute() never raises, but a bug must not take the pass with it
        except Exception as exc:
            return crashed(network, None, exc, self.c.settings, self.clock(), self.c.rng.random())
        self.c.learn(result)
        if isinstance(result.error, OutOfDescriptors):
            self.c.out_of_descriptors()
            self.next_claim = max(self.next_claim, time.monotonic() + DESCRIPTOR_PAUSE)
        return result

    def save(self, results: list[RunResult]) -> None:
        if not results and (not self.unsaved or time.monotonic() < self.retry_at):
            return
        batch = self.unsaved + [Saving(result) for result in results]
        started = time.perf_counter()
        try:
            self.c.persist(batch, self.users)
            self.unsaved, self.retries = [], 0
        except DatabaseDown as exc:
            self.unsaved = [s for s in batch if not s.state_saved]
            self.report.save_failures += 1
            self.retries += 1
            self.retry_at = time.monotonic() + min(0.5 * 2 ** (self.retries - 1), 5.0) * (self.retries > 1)
            self.c.trouble(
                "save",
                "database unavailable while saving (%s): %d finished networks kept, retrying",
                exc,
                len(self.unsaved),
                level=logging.ERROR,
            )
        self.report.db_seconds += time.perf_counter() - started
        for saving in batch:
            if saving.state_saved:
                self.settle(saving, saving.saved())

    def settle(self, saving: Saving, saved: Saved) -> None:
        if not saved.dropped:
            self.report.count(saving.result, saved)
        self.c.observers.notify("on_run", saving.result, saved)
        self.c.forget(saving.network, saving.result.tokens)

    def expire(self) -> None:
        """Saves that waited for the database past their lease (or past a stop's grace) are dropped: the
        networks run again once another pass claims them, and their items are stored once all the same."""
        if not self.unsaved:
            return
        lapsed = self.clock() >= self.lease_until
        grace_over = self.stop_seen is not None and time.monotonic() - self.stop_seen > STOP_SAVE_GRACE
        if not (lapsed or grace_over) or (grace_over and not lapsed and self.inflight):
            return
        log.error(
            "dropping %d finished networks whose results could not be saved (%s); they run again "
            "when their leases lapse",
            len(self.unsaved),
            "lease lapsed" if lapsed else "stopping",
        )
        for saving in self.unsaved:
            self.report.dropped += 1
            self.settle(saving, saving.saved(dropped=True))
        self.unsaved = []

    def held_networks(self) -> list[Mapping[str, Any]]:
        return [*self.inflight.values(), *self.pending, *(s.network for s in self.unsaved)]

    def held_ids(self) -> list:
        return [n["_id"] for n in self.held_networks()]

    def renew(self) -> None:
        if time.monotonic() - self.last_renew < self.renew_every:
            return
        ids = self.held_ids()
        if not ids:
            return
        until = self.clock() + self.c.lease
        try:
            self.c.store.renew(ids, self.c.instance_id, until)
        except Exception as exc:  # keep going: the next try comes soon, and saves are fenced anyway
            self.c.trouble("renew", "renewing %d leases failed (%s); retrying", len(ids), exc)
            self.last_renew = time.monotonic() - self.renew_every + min(self.renew_every, 1.0)
            return
        self.lease_until = until
        self.last_renew = time.monotonic()

    def release(self) -> None:
        """Give back leases of networks this pass will not run; a failure is logged and retried while the pass
        lasts (after that the leases simply lapse)."""
        if not self.unreleased:
            return
        try:
            self.c.store.release(self.unreleased)
            self.unreleased = []
        except Exception as exc:
            self.c.trouble(
                "release",
                "giving back %d leases failed (%s); retrying, else they lapse in %gs",
                len(self.unreleased),
                exc,
                self.c.settings.lease_seconds,
            )

    def give_back(self) -> None:
        log.info("stop requested: %d claimed networks given back unrun", len(self.pending))
        self.unreleased += [(n["_id"], n.get("leaseEpoch")) for n in self.pending]
        self.release()
        self.report.released += len(self.pending)
        for network in self.pending:
            self.c.forget(network, {})
        self.pending.clear()


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
