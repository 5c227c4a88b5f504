"""The one decision: a run's final state — status, error, next schedule, what is saved — from what its worker
returned (`Returned`), or from why it could not run. Every RunResult is made here: a network refused before
running (bad fields, an unknown service, a spent token), a connector's result or error, a crash of our own code,
and the error recorded when the database refused a state (saving.py). Pure but for one log line on a crash;
runs on the dispatch loop's thread.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import replace
from typing import Any

from ..sdk.connector import Result
from ..sdk.errors import BadResponse, NetworkError, OutOfDescriptors, RateLimited, exhausted, redact
from ..sdk.redaction import clip
from ..sdk.redaction import redact as mask_everywhere
from ..sdk.validate import check_state
from ..settings import Settings
from . import rules as schedule
from .rules import Update
from .run import Attempt, Returned, RunResult, Status, secrets_of

log = logging.getLogger("collector.run")


def decide(attempt: Attempt, returned: Returned, settings: Settings) -> RunResult:
    """The run's final state. A Result that cannot be kept (a state the database would refuse) or a rule that
    fails on it becomes that network's error, as an error the connector raised does."""
    error, result = returned.error, returned.result
    if error is None and result is not None:
        try:
            return _succeeded(attempt, returned, result, settings)
        except Exception as exc:
            error = exc
    if error is None:
        error = RuntimeError("the worker returned neither a result nor an error")
    if result is not None and result.tokens and not getattr(error, "refreshed", None):
        # a refresh succeeded before the run failed (items or a state that cannot be kept): the old refresh
        # token may be spent already, so the new tokens are saved with the error
        error.refreshed = dict(result.tokens)  # type: ignore[attr-defined]
    return _with_costs(_failed(attempt, error, settings), returned)


def failure(attempt: Attempt, error: BaseException, settings: Settings) -> RunResult:
    """The final state of a network that did not run (or whose state the database refused): decided the same way."""
    return decide(attempt, Returned(error=error), settings)


def _succeeded(attempt: Attempt, returned: Returned, result: Result, settings: Settings) -> RunResult:
    network, refused = attempt.network, returned.refused
    assert attempt.mode is not None  # a network that ran had its mode read
    check_state(result.state)
    update = schedule.on_success(network, attempt.mode, result, settings, attempt.now, attempt.jitter)
    skipped = returned.skipped + len(refused)
    reason = returned.skip_reason or (refused[0][1] if refused else None)
    update = schedule.with_skips(update, network, skipped, reason, refused, attempt.now)
    return RunResult(
        network,
        attempt.mode,
        update,
        attempt.now,
        items=returned.items,
        quota=result.quota,
        wait_until=result.wait_until,
        tokens=result.tokens,
        skipped=skipped,
        skip_reason=reason,
        refused=refused,
        held=attempt.held,
        **_costs(returned),
    )


def _with_costs(outcome: RunResult, returned: Returned) -> RunResult:
    """What the run cost (requests, answers, time), on the outcome of a run that called its connector; a failed
    run still counts the entries its connector could not map."""
    if not returned.called:
        return outcome
    failed = outcome.error is not None
    return replace(
        outcome,
        **_costs(returned),
        skipped=returned.skipped if failed else outcome.skipped,
        skip_reason=returned.skip_reason if failed else outcome.skip_reason,
    )


def _costs(returned: Returned) -> dict[str, Any]:
    """What a run that called its connector cost (requests, answers, time), as RunResult's fields; nothing for one
    that did not (a success gets them when made, a failure with `_with_costs`)."""
    if not returned.called:
        return {}
    return {
        "called": True,
        "requests": returned.requests,
        "codes": returned.codes,
        "quota_scope": returned.quota_scope,
        "duration": returned.duration,
    }


def _failed(attempt: Attempt, exc: BaseException, settings: Settings) -> RunResult:
    """An error: the network's own (NetworkError), an answer nested too deeply, the collector out of file
    descriptors (the network is left as it was), or a bug of ours shown on that network only (`internal`)."""
    if isinstance(exc, NetworkError):
        return _fail(attempt, exc, settings)
    if isinstance(exc, RecursionError):  # a structure nested too deeply for the mapping: the API's, not our bug
        return _fail(attempt, BadResponse("the API answer is nested too deeply to read"), settings)
    if exhausted(exc):
        return _fail(attempt, OutOfDescriptors(f"collector out of file descriptors ({type(exc).__name__})"), settings)
    return _crashed(attempt, exc, settings)


def _crashed(attempt: Attempt, exc: BaseException, settings: Settings) -> RunResult:
    error = NetworkError(f"internal error: {type(exc).__name__}: {exc}")
    error.kind = Status.INTERNAL
    refreshed = getattr(exc, "refreshed", None)
    error.refreshed = refreshed if isinstance(refreshed, dict) else {}
    outcome = _fail(attempt, error, settings)  # redacts the message
    # the frames only: an exception's text may hold values (tokens) that only the redacted message hides
    log.error(
        "network %s (%s) crashed: %s\n%s",
        attempt.network.get("_id"),
        clip(attempt.network.get("service"), 40),
        error.message,
        "".join(traceback.format_tb(exc.__traceback__)).rstrip(),
    )
    return outcome


def _fail(attempt: Attempt, error: NetworkError, settings: Settings) -> RunResult:
    network, now = attempt.network, attempt.now
    held = list(attempt.held) if attempt.held is not None else secrets_of(network)  # read at its claim, if claimed
    secrets = held + secrets_of(error.refreshed)
    # the network's own credentials, then every secret the process knows (app keys, client secrets) and every
    # value of a credential's shape, wherever a server echoed it
    error.message = mask_everywhere(redact(error.message, secrets))
    update = schedule.on_failure(network, attempt.mode, error, settings, now, attempt.jitter, secrets)
    update = Update({**update.values, **error.refreshed}, update.unset)
    wait_until = error.reset if isinstance(error, RateLimited) else None
    tokens = dict(error.refreshed)
    return RunResult(
        network, attempt.mode, update, now, error=error, wait_until=wait_until, tokens=tokens, held=attempt.held
    )
