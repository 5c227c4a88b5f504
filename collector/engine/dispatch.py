"""The dispatcher: one mode's networks from claim to save. It keeps up to `concurrency` networks in flight (and
at most the per-service cap of each service), claims the next batch when few claimed networks still wait, refills
free slots before saving, saves finished runs in batches (saving.py), and holds the leases of everything it has
(leases.py). Two ways drive it: `run_pass()`, one pass over what was claimed (`--once`, `run_once`), and
`serve()`, the daemon's continuous loop.

Nothing in it may end the work because of one network: a network the engine itself cannot handle gets an
`internal` error, and database errors delay saves (kept and retried) rather than drop runs that finished.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..sdk.errors import OutOfDescriptors
from .events import Report, Saved
from .leases import Leases
from .run import Run, RunResult, crashed, execute, prepare
from .saving import Backlog, Saving
from .sizing import claim_size, saturated_services, seats, service_key
from .workers import Finished

if TYPE_CHECKING:  # pragma: no cover
    from .resources import Resources

log = logging.getLogger("collector.engine")
STOP_SAVE_GRACE = 5.0  # seconds a stopping collector keeps retrying saves the database refused
REPORT_EVERY = 60.0  # seconds between the continuous loop's reports to the observers
DESCRIPTOR_PAUSE = 5.0  # seconds without claims after the process ran out of file descriptors
SAVE_WINDOW = 0.02  # seconds a finished run may wait for others to be saved with it


def due_by(values: Mapping[str, Any], now: datetime) -> bool:
    """Whether a saved state schedules its network at or before `now`."""
    at = values.get("scheduledTo")
    return isinstance(at, datetime) and at <= now


class Dispatcher:
    def __init__(
        self,
        collector: Resources,
        pending: deque,
        report: Report,
        clock: Callable[[], datetime],
        should_stop: Callable[[], bool],
    ):
        self.c = collector
        self.pending = pending
        self.users: dict = {}  # users looked up for the runs held (saving.py), kept while their networks are
        self.report = report
        self.clock = clock
        self.should_stop = should_stop
        self.inflight: dict[int, Mapping[str, Any]] = {}  # by the workers' ticket of its run
        self.completions: queue.SimpleQueue[Finished] = queue.SimpleQueue()  # runs as they finish, in order
        self.unsaved: list[RunResult] = []  # finished, gathered for the next save batch
        self.unsaved_since = 0.0
        self.backlog = Backlog(collector.saver, collector.throttle)  # finished runs the database has not taken
        self.per_service: Counter = Counter()
        self.leases = Leases(
            collector.store, collector.instance_id, lambda: collector.lease, clock, self.held_ids, collector.throttle
        )
        self.stop_seen: float | None = None
        self.claims_open = False  # serve() claims as slots free up; a pass runs what it was given
        self.mode = report.mode
        self.next_claim = 0.0
        self.claim_failures = 0

    def run_pass(self) -> None:
        """Drive it as one pass: run what was claimed, until all of it is saved (or dropped)."""
        while self.holding():
            self.step()
        self.leases.release()  # one last try for leases a failed release kept

    def serve(self, mode: str, idle_wait: Callable[[float], object]) -> None:
        """Drive it as the daemon's loop: claim as slots free up, until a stop is requested and everything held
        is saved."""
        self.mode, self.claims_open = mode, True
        report_at = time.monotonic() + REPORT_EVERY
        while True:
            self.step()
            if time.monotonic() >= report_at:
                self.report.duration = REPORT_EVERY
                self.c.observers.notify("on_pass", self.report)
                self.report, report_at = Report(str(mode)), time.monotonic() + REPORT_EVERY
            if self.stop_seen is not None and not self.holding():
                break
            if not self.holding():  # nothing due: wait until the next look
                delay = min(max(self.next_claim - time.monotonic(), 0.0), self.c.settings.heartbeat_seconds)
                if delay:
                    if not self.claim_failures and self.c.database.up:  # it answered "nothing due": progress
                        self.c.observers.notify("on_idle", mode)
                    idle_wait(delay)
        self.leases.release()
        self.report.duration = REPORT_EVERY - max(report_at - time.monotonic(), 0.0)
        self.c.observers.notify("on_pass", self.report)

    def step(self) -> None:
        if self.should_stop():
            self.stopping()
        self.claim()
        self.save(self.dispatch())
        if self.inflight:
            results = [self.finish(finished) for finished in self.completed(self.wait_time())]
            results += self.dispatch()  # refill the free slots from what waits, then claim, then save
            self.claim()
            results += self.dispatch()
            if self.save(results):  # networks due again at once (a history's next page) are claimable now
                self.next_claim = 0.0
                self.claim()
                self.save(self.dispatch())
        elif self.backlog:
            self.backlog.pause()
        self.leases.renew()
        self.expire()
        self.leases.release()
        self.c.observers.notify("on_tick", len(self.inflight))
        self.c.observers.notify(
            "on_leases", len(self.pending) + len(self.inflight) + len(self.unsaved) + len(self.backlog)
        )

    def holding(self) -> bool:
        """Whether anything claimed is not saved yet: waiting to start, running, finished or kept for a retry."""
        return bool(self.pending or self.inflight or self.unsaved or self.backlog)

    def completed(self, timeout: float) -> list[Finished]:
        """The runs that finished: waits up to `timeout` for the first, then takes every other one that finished
        meanwhile (one wake-up for a burst; no lock taken per run in flight, as `concurrent.futures.wait` does)."""
        try:
            done = [self.completions.get(timeout=timeout) if timeout > 0 else self.completions.get_nowait()]
        except queue.Empty:
            return []
        while True:
            try:
                done.append(self.completions.get_nowait())
            except queue.Empty:
                return done

    def claim(self) -> None:
        """Continuous mode: claim the next batch when few claimed networks still wait (`wanted`; and not before
        the next look after an empty claim or a failed one)."""
        if not self.claims_open or self.stop_seen is not None or time.monotonic() < self.next_claim:
            return
        whole, services = self.c.paused(self.mode, self.clock())
        if whole or services:
            self.hold_back(whole, services)
        if whole:  # the operator paused this mode: no claim; runs in flight finish and are saved (a drain)
            self.next_claim = time.monotonic() + min(
                self.c.settings.heartbeat_seconds, self.c.settings.loop_idle_pause or 1
            )
            return
        saturated = self.saturated() | services
        wanted = self.wanted(saturated)
        if not wanted:
            return
        try:
            networks = self.c.claim_batch(self.mode, wanted, self.clock(), saturated)
        except Exception as exc:  # the database is away: try again soon, the held runs go on
            self.claim_failures += 1
            self.next_claim = time.monotonic() + min(2.0**self.claim_failures, self.c.settings.loop_idle_pause)
            self.c.throttle.trouble(
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
            self.leases.restart()
        self.pending.extend(networks)

    def hold_back(self, whole: bool, services: set[str]) -> None:
        """Claimed networks of a paused scope that have not started are given back, not run."""
        held = [n for n in self.pending if whole or service_key(n) in services]
        if not held:
            return
        self.leases.give_back(held)
        for network in held:
            self.pending.remove(network)
            self.c.forget(network, {})

    def wait_time(self) -> float:
        """How long to wait for a run to finish: until the next renewal, save retry, claim or tick is due."""
        now = time.monotonic()
        until = min(self.leases.renew_in(), self.c.settings.heartbeat_seconds)
        if self.backlog:
            until = min(until, self.backlog.retry_in())
        if self.unsaved:
            until = min(until, self.unsaved_since + SAVE_WINDOW - now)
        if self.claims_open and self.stop_seen is None and self.wanted(self.saturated()):
            until = min(until, self.next_claim - now)  # networks may come due while others run
        return max(until, 0.0)

    def wanted(self, saturated: set[str]) -> int:
        return claim_size(self.pending, len(self.inflight), self.c.concurrency, saturated)

    def saturated(self) -> set[str]:
        return saturated_services(self.per_service, self.pending, self.c.concurrency, self.c.service_cap)

    def stopping(self) -> None:
        if self.pending:
            log.info("stop requested: %d claimed networks given back unrun", len(self.pending))
            self.leases.give_back(self.pending)
            self.report.released += len(self.pending)
            for network in self.pending:
                self.c.forget(network, {})
            self.pending.clear()
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
        while self.pending and len(self.inflight) < seats(self.c.concurrency):
            network = self.pending.popleft()
            service = network.get("service")
            key = service_key(network)
            if self.per_service[key] >= seats(self.c.service_cap(service)):
                waiting.append(network)
                continue
            now, jitter = self.clock(), self.c.rng.random()
            try:
                prepared = prepare(network, self.c.registry, self.c.settings, self.c.http, now, jitter, self.c.quotas)
            except Exception as exc:  # our bug, shown on that network only
                prepared = crashed(network, None, exc, self.c.settings, now, jitter)
            if isinstance(prepared, Run):
                ticket = self.c.pool.submit(execute, (prepared, self.c.settings, now), self.completions.put)
                self.inflight[ticket] = network
                self.c.running[id(network)] = (network.get("_id"), network.get("service"), network.get("user"), now)
                self.per_service[key] += 1
            else:
                settled.append(prepared)
        self.pending.extendleft(reversed(waiting))
        return settled

    def finish(self, finished: Finished) -> RunResult:
        network = self.inflight.pop(finished.ticket)
        self.c.running.pop(id(network), None)
        self.per_service[service_key(network)] -= 1
        try:
            result = finished.value()  # execute() never raises, but a bug must not take the pass with it
        except Exception as exc:
            return crashed(network, None, exc, self.c.settings, self.clock(), self.c.rng.random())
        self.c.learn(result)
        if isinstance(result.error, OutOfDescriptors):
            self.c.out_of_descriptors()
            self.next_claim = max(self.next_claim, time.monotonic() + DESCRIPTOR_PAUSE)
        return result

    def save(self, results: list[RunResult]) -> bool:
        """Gather finished runs and save them in one batch once a concurrency's eighth of them waits, the first
        has waited SAVE_WINDOW, nothing runs any more, or a stop was asked: runs that finish one by one share
        the database's round trips instead of paying them each. True when a saved state made its network due
        already (its next run may be claimed now)."""
        if results and not self.unsaved:
            self.unsaved_since = time.monotonic()
        self.unsaved.extend(results)
        if self.unsaved and not (
            len(self.unsaved) >= max(self.c.concurrency // 8, 1)
            or time.monotonic() - self.unsaved_since >= SAVE_WINDOW
            or not self.inflight
            or self.stop_seen is not None
        ):
            return False
        batch, self.unsaved = self.unsaved, []
        due_again, now = False, self.clock()
        for saving in self.backlog.save(batch, self.users, self.report):
            self.settle(saving, saving.outcome())
            due_again = due_again or (saving.accepted and due_by(saving.result.update.values, now))
        return due_again

    def settle(self, saving: Saving, saved: Saved) -> None:
        if not saved.dropped:
            self.report.count(saving.result, saved)
        self.c.observers.notify("on_run", saving.result, saved)
        self.c.forget(saving.network, saving.result.tokens)

    def expire(self) -> None:
        """Saves that waited for the database past their lease (or past a stop's grace) are dropped: the
        networks run again once another pass claims them, and their items are stored once all the same."""
        if not self.backlog:
            return
        lapsed = self.leases.lapsed()
        grace_over = self.stop_seen is not None and time.monotonic() - self.stop_seen > STOP_SAVE_GRACE
        if not (lapsed or grace_over) or (grace_over and not lapsed and self.inflight):
            return
        log.error(
            "dropping %d finished networks whose results could not be saved (%s); they run again "
            "when their leases lapse",
            len(self.backlog),
            "lease lapsed" if lapsed else "stopping",
        )
        for saving in self.backlog.take_all():
            self.report.dropped += 1
            self.settle(saving, saving.outcome(dropped=True))

    def held_networks(self) -> list[Mapping[str, Any]]:
        return [*self.inflight.values(), *self.pending, *(r.network for r in self.unsaved), *self.backlog.networks()]

    def held_ids(self) -> list:
        return [n["_id"] for n in self.held_networks()]
