"""The dispatcher: the one owner of the dispatch loop's state — the claims in hand, the slots (the worker pool and
the runs per service), the runs in flight, the finished runs on their way to the database (outbox.py), the leases
held (leases.py) and the next wake-up. It keeps up to `concurrency` networks in flight (and at most the
per-service cap of each service), claims the next batch when few claimed networks still wait, refills free slots
before saving, and saves finished runs in batches. Two ways drive it: `run_pass()`, one pass over what was claimed
(`--once`, `run_once`), and `serve()`, the daemon's continuous loop; each starts from an empty hand.

Nothing in it may end the work because of one network: a network the engine itself cannot handle gets an
`internal` error (decide.py), and database errors delay saves (kept and retried) rather than drop runs that
finished.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import resource
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..modes import Mode
from ..sdk.errors import OutOfDescriptors
from ..sdk.http import Http
from ..settings import Settings
from .capacity import Capacity
from .claimahead import OVERDUE, ClaimAhead, Leased
from .claims import Claims
from .dbhealth import DatabaseHealth
from .decide import decide, failure
from .events import Observers, Report
from .intake import Intake
from .loglimit import Throttle
from .outbox import Outbox
from .polls import WAIT, returned_by, sent
from .quota import QuotaMemory
from .rules import latest_wait
from .run import Attempt, Claimed, Run, RunResult, execute, prepare
from .saving import Saver
from .sizing import Blocked, Pending, claim_size, saturated_services, service_key
from .workers import Finished, drain

log = logging.getLogger("collector.engine")
STOP_SAVE_GRACE = 5.0  # seconds a stopping collector keeps retrying saves the database refused
REPORT_EVERY = 60.0  # seconds between the continuous loop's reports to the observers
DESCRIPTOR_PAUSE = 5.0  # seconds without claims after the process ran out of file descriptors
# Polls on the lane end one by one: each end taken in alone wakes the dispatcher, and the refill it sends wakes the
# lane. While few ended at the last look, the dispatcher lets GATHER_S pass after the first end, so that the ends
# arriving meanwhile are taken in (and their slots refilled) together (docs/performance.md: at 64 in flight at
# 200 ms, ~0.45 loop turns a poll on the lane instead of ~1.1, and each run ends up to GATHER_S later).
GATHER_S = 0.005
GATHER_FROM = 16  # runs in flight, at least
GATHER_BELOW = 4  # ends taken in at the last look, fewer than
Stop = Callable[[], bool]  # whether a stop was requested
CLAIM_HANGS = "claiming %s networks has not come back from the database for %.0fs; the watchdog is not told we go on"


class Dispatcher(Intake):
    def __init__(
        self,
        claims: Claims,
        saver: Saver,
        http: Http,
        quotas: QuotaMemory,
        observers: Observers,
        throttle: Throttle,
        health: DatabaseHealth,
        rng: random.Random,
        settings: Settings,
        concurrency: int | None = None,
    ):
        self.claims, self.saver, self.http, self.quotas = claims, saver, http, quotas
        self.observers, self.throttle, self.health, self.rng = observers, throttle, health, rng
        self.settings = settings
        self.capacity = Capacity(http, settings, concurrency)  # the slots: concurrency, worker pool, caps
        # the networks running now (id, service, user, since), for the heartbeat: what this collector is doing
        self.running: dict[int, tuple[Any, Any, Any, datetime]] = {}
        self.exhausted_at: float | None = None  # Unix time the process last ran out of file descriptors
        self.ahead = ClaimAhead(claims, lambda finished: self.completions.put(finished))  # claims while runs run
        self.begin("normal", Report("normal"), lambda: datetime.min, lambda: False)

    def begin(self, mode: str, report: Report, clock: Callable[[], datetime], should_stop: Stop) -> None:
        """An empty hand for a new pass or loop."""
        self.mode, self.report, self.clock, self.should_stop = mode, report, clock, should_stop
        self.pending: Pending = Pending()  # claimed, waiting to start
        self.inflight: dict[int, Run] = {}  # by the workers' ticket of its run
        self.completions: queue.SimpleQueue[Finished] = queue.SimpleQueue()  # runs as they end; claims ahead
        self.outbox = Outbox(self.saver, self.throttle, self.observers)
        self.per_service: Counter = Counter()
        self.leases = self.claims.leases(clock, lambda: [n["_id"] for n in self.held_networks()])
        self.stop_seen: float | None = None
        self.claims_open = False  # serve() claims as slots free up; a pass runs what it was given
        self.next_claim = 0.0  # monotonic time of the next look for due networks
        self.claim_failures = 0
        self.last_batch = 0  # runs the last look took in

    def run_pass(self, claimed: list[Claimed], report: Report, clock: Callable[[], datetime], stop: Stop) -> None:
        """Drive it as one pass: run what was claimed, until all of it is saved (or dropped)."""
        self.begin(report.mode, report, clock, stop)
        self.pending.extend(claimed)
        while self.holding():
            self.step()
        self.leases.release()  # one last try for leases a failed release kept

    def serve(self, mode: str, clock: Callable[[], datetime], stop: Stop, idle_wait: Callable[[float], object]) -> None:
        """Drive it as the daemon's loop: claim as slots free up, until a stop is requested and everything held is
        saved; wait (`idle_wait`, woken early by a stop) only when nothing is due."""
        self.begin(mode, Report(mode), clock, stop)
        self.claims_open = True
        report_at = time.monotonic() + REPORT_EVERY
        while True:
            wait = self.step()
            if time.monotonic() >= report_at:
                self.report.duration = REPORT_EVERY
                self.observers.notify("on_pass", self.report)
                self.report, report_at = Report(str(self.mode)), time.monotonic() + REPORT_EVERY
            if self.stop_seen is not None and not self.holding():
                break
            if wait:  # nothing due: wait until the next look
                if not self.claim_failures and self.health.up:  # it answered "nothing due": progress
                    self.observers.notify("on_idle", self.mode)
                idle_wait(wait)
        self.leases.release()
        self.report.duration = REPORT_EVERY - max(report_at - time.monotonic(), 0.0)
        self.observers.notify("on_pass", self.report)

    def step(self) -> float:
        """One round: claim, start, finish, save, renew. Returns the seconds until the next look for due networks
        when nothing is held (0 while something is)."""
        if self.should_stop():
            self.stopping()
        self.claim()
        self.save(self.dispatch())
        if self.inflight or self.ahead.busy:
            ended = drain(self.completions, self.wait_time(), self.gather())
            self.last_batch = len(ended)
            finished = [self.finish(one) for one in ended]
            results = [result for result in finished if result is not None]
            results += self.dispatch()  # refill the free slots from what waits, then claim, then save
            self.claim()
            results += self.dispatch()
            if self.save(results):  # networks due again at once (a history's next page) are claimable now
                self.next_claim = 0.0
                self.claim()
                self.save(self.dispatch())
        elif self.outbox.kept():
            self.outbox.pause()
        self.leases.renew()
        if self.outbox.kept():  # saves that waited past their lease, or past a stop's grace, are dropped
            grace_over = self.stop_seen is not None and time.monotonic() - self.stop_seen > STOP_SAVE_GRACE
            self.outbox.expire(self.leases.lapsed(), grace_over, bool(self.inflight), self.report)
        self.leases.release()
        if self.ahead.overdue():  # a claim hangs in the database: no "it goes round" for the watchdog meanwhile
            self.throttle.trouble("claim", CLAIM_HANGS, self.mode, OVERDUE + self.ahead.overdue(), level=logging.ERROR)
        else:
            self.observers.notify("on_tick", len(self.inflight))
        self.observers.notify("on_leases", len(self.pending) + len(self.inflight) + len(self.outbox))
        if self.holding():
            return 0.0
        return min(max(self.next_claim - time.monotonic(), 0.0), self.settings.heartbeat_seconds)

    def holding(self) -> bool:
        """Whether anything claimed is not saved yet: waiting to start, running, finished or kept for a retry."""
        return bool(self.pending or self.inflight or self.outbox or self.ahead.busy)

    def wait_time(self) -> float:
        """How long to wait for a run to finish: until the next renewal, save, claim or tick is due."""
        now = time.monotonic()
        until = min(self.leases.renew_in(), self.settings.heartbeat_seconds, self.settings.stats_seconds)  # jobs due
        save_in = self.outbox.wait_in(now)
        if save_in is not None:
            until = min(until, save_in)
        if self.claims_open and self.stop_seen is None and not self.ahead.busy and self.wanted(self.saturated()):
            until = min(until, self.next_claim - now)  # networks may come due while others run
        return max(until, 0.0)

    def gather(self) -> float:
        """Seconds to let more runs end after the first before taking them in: GATHER_S in normal mode (its polls
        on the lane) with GATHER_FROM or more in flight of which fewer than GATHER_BELOW ended at the last look;
        else none (a history's pages end on workers, each worth taking in at once)."""
        if self.mode != Mode.NORMAL or len(self.inflight) < GATHER_FROM or self.last_batch >= GATHER_BELOW:
            return 0.0
        return GATHER_S

    def wanted(self, saturated: set[str]) -> int:
        return claim_size(self.pending, len(self.inflight), self.capacity.concurrency, saturated)

    def saturated(self) -> set[str]:
        capacity = self.capacity
        return saturated_services(self.per_service, self.pending, capacity.concurrency, capacity.service_cap)

    def stopping(self) -> None:
        if self.pending:
            log.info("stop requested: %d claimed networks given back unrun", len(self.pending))
            self.report.released += self.give_back(True)
        if self.stop_seen is None:
            self.stop_seen = time.monotonic()

    def dispatch(self) -> list[RunResult]:
        """Start what capacity allows; returns the results of networks settled without running (bad input,
        spent quota)."""
        if self.should_stop():  # a stop requested while runs were finishing: start nothing more
            self.stopping()
            return []
        settled: list[RunResult] = []
        waiting: deque[Claimed] = deque()
        blocked = Blocked(self.pending)  # services at their cap, or whose polls found no request slot free
        seats = self.capacity.seats
        while self.pending and len(self.inflight) < seats:
            claimed = self.pending.popleft()
            if (
                claimed.service in blocked.services
                or self.per_service[claimed.service] >= self.capacity.service_seats(claimed.service)
                or self.no_slot(claimed)
            ):
                waiting.append(claimed)
                if blocked.add(claimed.service):  # every service still waiting is blocked: nothing more starts
                    break
                continue
            now, jitter = self.clock(), self.rng.random()
            try:
                run = prepare(claimed, self.settings, self.http, now, jitter, self.quotas)
            except Exception as exc:  # bad input, a spent token, or our bug: shown on that network only
                attempt = Attempt(claimed.network, claimed.mode, now, jitter, claimed.held)
                settled.append(failure(attempt, exc, self.settings))
                continue
            ticket = sent(run, self.http, self.completions.put)  # its poll on the event loop (polls.py), or a worker
            if ticket == WAIT and self.inflight:  # its service's slots taken: it waits for a run to end, others go on
                waiting.append(claimed)
                if blocked.add(claimed.service):
                    break
                continue
            if ticket is None or ticket == WAIT:  # (nothing in flight to end: it waits for a slot on a worker)
                ticket = self.capacity.pool.submit(execute, (run,), self.completions.put)
            self.inflight[ticket] = run
            network = claimed.network
            self.running[id(network)] = (network.get("_id"), network.get("service"), network.get("user"), now)
            self.per_service[claimed.service] += 1
        self.pending.extendleft(reversed(waiting))
        return settled

    def no_slot(self, claimed: Claimed) -> bool:
        """A normal-mode network while every request slot of its service (or of the whole) is taken by runs in
        flight: it waits for one of them to end rather than be prepared for a poll that could not go out (at 64
        in flight on the lane, one such attempt for each of the loop's looks: 2.3 prepares per poll)."""
        slots = self.http.slots
        if claimed.mode != Mode.NORMAL or not self.inflight or slots is None:
            return False
        return not slots.free(claimed.service)

    def finish(self, finished: Finished) -> RunResult | None:
        """The result of a run that ended; None for a poll that landed and goes on on a worker (polls.py), or for
        a claim made ahead (taken in: `leased`)."""
        if isinstance(finished.result, Leased):
            self.leased(finished)
            return None
        run = self.inflight.pop(finished.ticket)
        returned = returned_by(run, finished, self.http, self.capacity.pool, self.completions.put)
        if isinstance(returned, int):  # a poll that landed goes on on a worker, with its answer or without
            self.inflight[returned] = run
            return None
        self.running.pop(id(run.network), None)
        self.per_service[service_key(run.network)] -= 1
        result = decide(run.attempt, returned, self.settings)
        learn(self.quotas, result, self.settings)
        if isinstance(result.error, OutOfDescriptors):
            self.exhausted_at = out_of_descriptors(self.throttle)
            self.next_claim = max(self.next_claim, time.monotonic() + DESCRIPTOR_PAUSE)
        return result

    def save(self, results: list[RunResult]) -> bool:
        """Save finished runs in batches (outbox.py). True when a saved state made its network due already."""
        alone = not self.inflight or self.stop_seen is not None
        batch = max(self.capacity.concurrency // 8, 1)
        return self.outbox.save(results, batch, alone, self.report, self.clock())

    def held_networks(self) -> list[Mapping[str, Any]]:
        return [
            *(r.network for r in self.inflight.values()),
            *(c.network for c in self.pending),
            *self.outbox.networks(),
        ]

    @property
    def concurrency(self) -> int:
        return self.capacity.concurrency

    def apply_settings(self, settings: Settings) -> None:
        """New settings, between two steps (a reload)."""
        self.settings = settings
        self.capacity.resize(settings)

    def close(self) -> None:
        """Wait for the runs in flight to end and let the worker threads go."""
        self.capacity.pool.shutdown(wait=True)
        self.ahead.close()


def out_of_descriptors(throttle: Throttle) -> float:
    """A run met EMFILE/ENFILE: the collector's own trouble (the network was left as it was), logged; returns
    the Unix time it happened."""
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = -1
    throttle.trouble(
        "descriptors",
        "out of file descriptors (%d open, limit %d): the runs are put back, no network is charged; claims wait %gs",
        open_now,
        resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        DESCRIPTOR_PAUSE,
        level=logging.ERROR,
    )
    return time.time()


def learn(quotas: QuotaMemory, result: RunResult, settings: Settings) -> None:
    """What a run learnt about its token's quota, remembered the moment it finishes, before the next run of the
    same token can start."""
    network = result.network
    if result.called and result.quota_scope and isinstance(network.get("accessToken"), str):
        until = result.wait_until
        scheduled = result.update.values.get("scheduledTo")
        if str(result.status) == "rateLimit" and isinstance(scheduled, datetime):
            # the wait this network got (a reset already past waits RATE_LIMIT_MIN_WAIT): the token's other
            # networks wait as long, instead of calling again at once
            until = scheduled if until is None else max(until, scheduled)
        latest = latest_wait(settings, result.at)
        quotas.remember(result.quota_scope, network["accessToken"], result.quota, until, latest)


def run_here(
    claimed: Claimed, settings: Settings, http: Http, now: datetime, jitter: float, quotas: QuotaMemory
) -> RunResult:
    """One network run in this thread (`collector networks run`), with the same steps as the loop's."""
    try:
        run = prepare(claimed, settings, http, now, jitter, quotas)
    except Exception as exc:
        return failure(Attempt(claimed.network, claimed.mode, now, jitter, claimed.held), exc, settings)
    return decide(run.attempt, execute(run), settings)
