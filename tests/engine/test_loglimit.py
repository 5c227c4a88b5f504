"""Rate-limited failure lines: one a minute per key, saying how many were held back; one traceback per error."""

from __future__ import annotations

import logging

from collector.daemon.jobs import Jobs
from collector.engine.loglimit import Throttle
from collector.sdk.timeutil import utcnow

from helpers import T0


def raise_from(where: int) -> BaseException:
    try:
        if where:
            raise ConnectionError("refused")
        raise ConnectionError("refused")
    except ConnectionError as exc:
        return exc


def test_one_line_a_minute_per_key_and_a_traceback_per_distinct_error():
    now = {"t": 0.0}
    throttle = Throttle(every=60, clock=lambda: now["t"])
    assert throttle.allow("claim") == 0 and throttle.allow("save") == 0
    for _ in range(5):
        now["t"] += 10
        assert throttle.allow("claim") is None
    now["t"] += 11
    assert throttle.allow("claim") == 5  # the next line says five were held back
    throttle.forget("claim")
    assert throttle.allow("claim") == 0  # the trouble ended: the next one is news again
    first, again, elsewhere = raise_from(0), raise_from(0), raise_from(1)
    assert throttle.new_error(first) and not throttle.new_error(again) and throttle.new_error(elsewhere)


def test_a_job_failing_every_round_logs_once_a_minute_with_one_traceback(caplog):
    jobs = Jobs(grace=60, clock=lambda: T0)
    calls = []

    def broken(now):
        calls.append(now)
        raise ConnectionError("db:27017 refused")

    jobs.every("heartbeat", 3600, broken)
    jobs.start(paused=True)
    try:
        with caplog.at_level(logging.ERROR, logger="collector.jobs"):
            for _ in range(40):
                jobs.executor.submit_job(jobs.scheduler.get_job("heartbeat"), [utcnow()])
                jobs.executor.drain()
    finally:
        jobs.stop()
    lines = [r for r in caplog.records if r.name == "collector.jobs" and r.levelno >= logging.ERROR]
    assert len(calls) == 40 and jobs.counts["heartbeat", "error"] == 40
    assert len(lines) == 1 and caplog.text.count("Traceback (most recent call last)") == 1
    assert not [r for r in caplog.records if r.name.startswith("apscheduler")]  # its own copy is silenced


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_no_copy_of_a_jobs_traceback_exists_for_any_handler_however_logging_is_set_up():
    """Whatever a host program or test tool does to logging — a handler on every logger, the quiet logger
    enabled and propagating again (as logging.config.dictConfig(disable_existing_loggers=False) leaves it) —
    a job failing 25 times gives one error line with one traceback, from collector.jobs alone."""
    from collector.daemon.jobs import QUIET

    keep = Keep()
    names = ["", "apscheduler", "apscheduler.executors", QUIET.name, "collector", "collector.jobs"]
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in names]
    state = (QUIET.disabled, QUIET.propagate)
    for logger, _ in saved:
        logger.addHandler(keep)
        logger.setLevel(logging.DEBUG)
    QUIET.disabled, QUIET.propagate = False, True
    jobs = Jobs(grace=60, clock=lambda: T0)

    def broken(now):
        raise KeyError("gone")

    jobs.every("housekeeping", 3600, broken)
    jobs.start(paused=True)
    try:
        for _ in range(25):
            jobs.executor.submit_job(jobs.scheduler.get_job("housekeeping"), [utcnow()])
            jobs.executor.drain()
    finally:
        jobs.stop()
        QUIET.disabled, QUIET.propagate = state
        for logger, level in saved:
            logger.removeHandler(keep)
            logger.setLevel(level)
    errors = {id(r): r for r in keep.records if r.levelno >= logging.ERROR}.values()  # one record, many loggers
    assert jobs.counts["housekeeping", "error"] == 25 and jobs.counts["housekeeping", "ok"] == 0
    assert [r.name for r in errors] == ["collector.jobs"]
    assert [r.exc_text or r.exc_info for r in errors][0]  # its traceback, the first time
    assert not [r for r in keep.records if r.levelno >= logging.WARNING and r.name != "collector.jobs"]
