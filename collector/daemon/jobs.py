"""The collector's own recurring work — heartbeats, the stats beat, housekeeping, the periodic gauges, the inactive
sweep — as APScheduler 3.x jobs in one BackgroundScheduler beside the dispatch loop.

The scheduler's thread decides only *when*. Its executor (`LoopExecutor`) hands each due job to the dispatch
loop, which runs it on its own thread at its next round (`Jobs.on_tick`), the way APScheduler's asyncio executor
hands jobs to an event loop. So the database stays on one thread, and a stuck loop runs no jobs: its heartbeat
goes stale and `collector status` shows it, as it should.

Every job has max_instances=1 (a run still waiting for the loop turns the next one into a skip), coalesce (runs
missed meanwhile become one) and a misfire grace (a run the loop reaches later than that is dropped). The event
listener turns executions, errors, misses and skips into log lines and counts (and metrics, through `sinks`); a
job that raises is logged and counted, and the daemon goes on.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
)
from apscheduler.executors.base import BaseExecutor, run_job
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ..engine.events import Observer
from ..engine.loglimit import Throttle, held_note, reason_of
from ..engine.store import unavailable
from ..sdk.timeutil import utcnow
from ..settings import Settings

log = logging.getLogger("collector.jobs")
# APScheduler's run_job logs every failure with its traceback; our listener writes that line (rate-limited).
# So a job's exception never reaches run_job: `Jobs.call` catches it and hands it on as a `Failed` result, and
# no copy exists for any handler to find, however logging is configured (pytest 9.2 attaches its capture to
# every logger that does not propagate). What run_job still logs (its INFO lines, a miss) goes to a logger that
# makes no record while it stays disabled.
QUIET = logging.getLogger("collector.jobs.apscheduler")
QUIET.disabled = True
QUIET.propagate = False
OUTCOMES = {EVENT_JOB_EXECUTED: "ok", EVENT_JOB_ERROR: "error", EVENT_JOB_MISSED: "missed"}
OUTCOMES[EVENT_JOB_MAX_INSTANCES] = "skipped"


class LoopExecutor(BaseExecutor):
    """Queues due jobs for the dispatch loop; `drain()`, called on the loop's thread, runs them there."""

    def __init__(self, wake: Callable[[], object] = lambda: None):
        super().__init__()
        self.queue: queue.SimpleQueue[tuple[Any, list[datetime]]] = queue.SimpleQueue()
        self.wake = wake

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        self.queue.put((job, run_times))
        self.wake()  # an idle loop looks at once

    def waiting(self) -> Iterator[tuple[Any, list[datetime]]]:
        """Take the runs handed over so far, one by one."""
        while True:
            try:
                yield self.queue.get_nowait()
            except queue.Empty:
                return

    def drain(self) -> int:
        """Run every job waiting; returns how many were taken."""
        taken = 0
        for job, run_times in self.waiting():
            taken += 1
            try:  # run_job catches what the job raises and makes it an error event
                events = run_job(job, job._jobstore_alias, run_times, QUIET.name)
            except Exception as exc:  # pragma: no cover - run_job itself failing
                self._run_job_error(job.id, exc, exc.__traceback__)
            else:
                self._run_job_success(job.id, events)
        return taken

    def discard(self) -> int:
        """Forget the jobs waiting (a stop): they will not run."""
        dropped = 0
        for job, _ in self.waiting():
            dropped += 1
            with self._lock:
                self._instances[job.id] = max(self._instances[job.id] - 1, 0)
        return dropped


class Jobs(Observer):
    """One scheduler for the collector's own jobs. Job functions take `now` (from `clock`, injectable in tests)
    and run on the dispatch loop's thread. `grace` is the misfire grace in seconds."""

    def __init__(
        self,
        grace: float,
        clock: Callable[[], datetime] = utcnow,
        wake: Callable[[], object] = lambda: None,
        should_stop: Callable[[], bool] = lambda: False,
    ):
        self.clock, self.should_stop = clock, should_stop
        self.executor = LoopExecutor(wake)
        self.scheduler = BackgroundScheduler(
            executors={"default": self.executor},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": max(int(grace), 1)},
            timezone=UTC,
        )
        self.scheduler.add_listener(self.on_event, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)
        self.scheduler.add_listener(self.on_event, EVENT_JOB_MAX_INSTANCES)
        self.counts: Counter[tuple[str, str]] = Counter()  # (job, outcome)
        self.sinks: list[Callable[[str, str], None]] = []  # e.g. the Prometheus counters
        self.skipping: set[str] = set()  # jobs whose previous run still waits for the loop (logged once)
        self.throttle = Throttle()  # a job failing again and again: one line a minute, one traceback per error
        self.lock = threading.Lock()
        self.stopped = False
        self.plans: dict[str, str] = {}  # job id -> its schedule in words, for the start line
        self.last: dict[tuple[str, str], datetime] = {}  # (job, "ok" | "error") -> when it last ended so
        self.quiet: set[str] = set()  # jobs whose skips and database outages are logged at DEBUG (`every`)

    # --- adding and changing jobs --------------------------------------------------------------------------
    def every(
        self,
        job_id: str,
        seconds: float,
        func: Callable[[datetime], object],
        first: datetime | None = None,
        quiet: bool = False,
    ):
        """Run `func(now)` every `seconds`, first at `first` (default: one interval from now). A `quiet` job (one
        that runs often, best effort: the stats beat) logs its skips, misses and failures while the database cannot
        be reached at DEBUG only: the heartbeat job and the database's own line tell of those already. They are
        counted all the same."""
        if quiet:
            self.quiet.add(job_id)
        options: dict[str, Any] = {} if first is None else {"next_run_time": first}
        self.plans[job_id] = f"every {seconds:g}s"
        trigger = IntervalTrigger(seconds=seconds, timezone=UTC)
        return self.scheduler.add_job(self.call, trigger, args=[func], id=job_id, name=job_id, **options)

    def cron(self, job_id: str, crontab: str, func: Callable[[datetime], object]):
        """Run `func(now)` at the times of a crontab expression, in UTC."""
        trigger = CronTrigger.from_crontab(crontab, timezone=UTC)
        self.plans[job_id] = f"at {crontab!r} UTC"
        return self.scheduler.add_job(self.call, trigger, args=[func], id=job_id, name=job_id)

    def once(self, job_id: str, at: datetime, func: Callable[[datetime], object]):
        """Run `func(now)` once at `at` (replacing a pending one of the same id)."""
        return self.scheduler.add_job(
            self.call, "date", run_date=at, args=[func], id=job_id, name=job_id, replace_existing=True
        )

    def reschedule_every(self, job_id: str, seconds: float) -> None:
        if self.scheduler.get_job(job_id) is not None:
            self.scheduler.reschedule_job(job_id, trigger=IntervalTrigger(seconds=seconds, timezone=UTC))
            self.plans[job_id] = f"every {seconds:g}s"
            log.info("job %s: now every %gs", job_id, seconds)

    def reschedule_cron(self, job_id: str, crontab: str) -> None:
        if self.scheduler.get_job(job_id) is not None:
            self.scheduler.reschedule_job(job_id, trigger=CronTrigger.from_crontab(crontab, timezone=UTC))
            self.plans[job_id] = f"at {crontab!r} UTC"
            log.info("job %s: now %s, next at %s", job_id, self.plans[job_id], self.next_run(job_id))

    def set_grace(self, grace: float) -> None:
        for job in self.scheduler.get_jobs():
            job.modify(misfire_grace_time=max(int(grace), 1))

    def next_run(self, job_id: str) -> datetime | None:
        job = self.scheduler.get_job(job_id)
        return None if job is None else job.next_run_time

    def describe(self) -> list[dict[str, Any]]:
        """Each recurring job: its trigger, next run, last success and last failure (for the heartbeat)."""
        return [
            {
                "name": name,
                "trigger": plan,
                "nextRun": None if self.stopped else self.next_run(name),
                "lastSuccess": self.last.get((name, "ok")),
                "lastFailure": self.last.get((name, "error")),
            }
            for name, plan in self.plans.items()
        ]

    def call(self, func: Callable[[datetime], object]) -> object:
        try:
            return func(self.clock())
        except Exception as exc:  # logged and counted by on_event, once: run_job never sees it
            return Failed(exc)

    # --- running ---------------------------------------------------------------------------------------------
    def start(self, paused: bool = False) -> None:
        """Start deciding when jobs are due (paused: not yet, though runs can be handed over by hand)."""
        self.scheduler.start(paused=paused)
        log.info("jobs: %s", "; ".join(f"{job} {plan}" for job, plan in self.plans.items()) or "none")

    def stop(self) -> None:
        """No more jobs: the scheduler stops and what waits for the loop is dropped. Safe to call twice."""
        if self.stopped:
            return
        self.stopped = True
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        dropped = self.executor.discard() if self.executor._lock is not None else 0
        log.info("jobs stopped%s", f" ({dropped} waiting runs dropped)" if dropped else "")

    def on_settings(self, old: Settings, new: Settings) -> None:
        """A reload: the heartbeat and stats intervals, the sweep's time and the misfire grace follow the new
        settings."""
        from .metrics import progress_bound

        if self.stopped:
            return
        if new.heartbeat_seconds != old.heartbeat_seconds:
            self.reschedule_every("heartbeat", new.heartbeat_seconds)
        if new.stats_seconds != old.stats_seconds:
            self.reschedule_every("stats", new.stats_seconds)
        if new.inactive_sweep_cron != old.inactive_sweep_cron:
            self.reschedule_cron("inactive-sweep", new.inactive_sweep_cron)
        if progress_bound(new) != progress_bound(old):
            self.set_grace(progress_bound(new))

    def on_tick(self, inflight: int) -> None:
        if self.should_stop():
            self.stop()
        elif not self.stopped:
            self.executor.drain()

    # --- events (on the scheduler's thread for skips, on the loop's for the rest) -----------------------------
    def on_event(self, event: JobEvent) -> None:
        job, outcome = event.job_id, OUTCOMES[event.code]
        error = getattr(event, "exception", None)
        if isinstance(getattr(event, "retval", None), Failed):
            outcome, error = "error", event.retval.error
        with self.lock:
            self.counts[job, outcome] += 1
            first_skip = outcome == "skipped" and job not in self.skipping
            if outcome == "skipped":
                self.skipping.add(job)
            elif outcome in ("ok", "error"):
                self.skipping.discard(job)
        if outcome in ("ok", "error"):
            self.last[job, outcome] = self.clock()
        outage = outcome == "error" and error is not None and unavailable(error)  # the database cannot be reached
        if job in self.quiet and (outcome in ("skipped", "missed") or outage):
            log.debug("job %s: %s%s", job, outcome, f" ({reason_of(error)})" if error else "")
        elif outcome == "error":
            self.log_failure(job, error)
        elif outcome == "ok":
            self.throttle.forget(job)
        elif outcome == "missed":
            log.warning("job %s: the run due at %s was dropped (the loop reached it too late)", job, event_time(event))
        elif first_skip and (held := self.throttle.allow("skip:" + job)) is not None:
            log.warning(
                "job %s: its last run still waits for the dispatch loop; skipping until it runs%s", job, held_note(held)
            )
        else:
            log.debug("job %s: %s", job, outcome)
        for sink in self.sinks:
            sink(job, outcome)

    def log_failure(self, job: str, exc: BaseException | None) -> None:
        with self.lock:
            held = self.throttle.allow(job)
            first = held is not None and self.throttle.new_error(exc)
        if held is None:
            return
        reason = reason_of(exc) if exc is not None else "?"
        log.error(
            "job %s failed (%s); it runs again at its next time%s",
            job,
            reason,
            held_note(held),
            exc_info=exc if first else None,
        )


class Failed:
    """What a job that raised returns to APScheduler: the error, for the listener to log and count."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


def event_time(event: JobEvent) -> str:
    when = getattr(event, "scheduled_run_time", None)
    return when.isoformat(timespec="seconds") if isinstance(when, datetime) else "?"
