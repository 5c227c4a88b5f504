"""The pure scheduling rules, with time and jitter passed in."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collector.engine import rules as schedule
from collector.sdk.connector import Result
from collector.sdk.errors import BadResponse, Quota, RateLimited, Transient, Unauthorized

from helpers import T0


@pytest.mark.parametrize(
    "errors, jitter, seconds", [(1, 0.0, 30), (1, 0.999999, 60), (2, 0.0, 60), (3, 0.5, 180), (30, 0.0, 10800)]
)
def test_backoff_doubles_with_equal_jitter_and_a_cap(settings, errors, jitter, seconds):
    assert schedule.backoff(errors, settings, jitter).total_seconds() == pytest.approx(seconds, abs=1e-3)


def test_effective_mode():
    assert schedule.effective_mode({}) == "initial"
    assert schedule.effective_mode({"mode": "rateLimit", "prevMode": "normal"}) == "normal"
    assert schedule.effective_mode({"mode": "rateLimit"}) == "initial"
    with pytest.raises(ValueError):
        schedule.effective_mode({"mode": 3})


@pytest.mark.parametrize("jitter, seconds", [(0.0, 60), (0.999, 89.97)])
def test_reset_in_the_past_waits_the_minimum_with_jitter_never_now(settings, jitter, seconds):
    update = schedule.rate_limited("normal", T0 - timedelta(hours=1), settings, T0, jitter)
    waited = (update.values["scheduledTo"] - T0).total_seconds()
    assert waited == pytest.approx(seconds, abs=0.01)


def test_reset_absurdly_far_is_clamped_to_the_maximum(settings):
    from collector.sdk.timeutil import FAR_FUTURE

    update = schedule.on_failure({}, "normal", RateLimited("429", FAR_FUTURE), settings, T0, 0.0)
    assert update.values["scheduledTo"] == T0 + timedelta(seconds=settings.rate_limit_max_wait)
    assert settings.rate_limit_max_wait == 86400


def test_rate_limit_without_reset_uses_the_interval(settings):
    update = schedule.on_failure({}, "initial", RateLimited("429"), settings, T0, 0.0)
    assert update.values["scheduledTo"] == T0 + timedelta(seconds=settings.rate_limit_interval)
    assert "errors" not in update.values


def test_success_with_exhausted_quota_remembers_the_next_mode(settings):
    result = Result([], done=True, quota=Quota(remaining=0, reset=T0 + timedelta(minutes=5)))
    update = schedule.on_success({"service": "github"}, "initial", result, settings, T0)
    assert update.values["mode"] == "rateLimit" and update.values["prevMode"] == "normal"


def test_unauthorized_does_not_count_an_error(settings):
    update = schedule.on_failure({"errors": 2}, "normal", Unauthorized("401", 401), settings, T0, 0.0)
    assert update.values["unauthorized"] is True and "errors" not in update.values


def test_garbage_error_count_restarts_from_one(settings):
    update = schedule.on_failure({"errors": "many"}, "normal", BadResponse("x"), settings, T0, 0.0)
    assert update.values["errors"] == 1


def test_transient_at_max_errors_disables(settings):
    update = schedule.on_failure({"errors": 4}, "normal", Transient("503", 503), settings, T0, 0.0)
    assert update.values["disabled"] is True and update.values["errors"] == 5


def test_a_requested_pause_longer_than_the_reset_wins(settings):
    result = Result([], quota=Quota(remaining=0, reset=T0 + timedelta(minutes=5)), wait_until=T0 + timedelta(minutes=9))
    update = schedule.on_success({"service": "stackoverflow"}, "normal", result, settings, T0)
    assert update.values["scheduledTo"] == T0 + timedelta(minutes=9)


def test_a_requested_pause_delays_a_successful_run(settings):
    result = Result([], wait_until=T0 + timedelta(hours=2))
    update = schedule.on_success({"service": "stackoverflow"}, "normal", result, settings, T0)
    assert update.values["scheduledTo"] == T0 + timedelta(hours=2) and update.values["mode"] == "normal"
