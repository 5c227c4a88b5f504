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
