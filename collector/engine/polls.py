"""Polls on the event loop (net/pollloop.py): the dispatcher sends a normal-mode run's declared poll (sdk/poll.py)
there instead of handing the run to a worker thread, when it holds a request slot of the run's service and of the
whole at once (the concurrency bounds requests out at once, on the lane too). What the landing means (`settle`):

- an answer of one of the poll's `unchanged` statuses (GitHub's 304) ends the run on the dispatcher's thread
  (`Connector.unchanged`): no worker is woken;
- any other answer goes to a worker with the answer read (`Http.priming`): the connector runs as usual, and its
  first GET of that URL gets the answer instead of sending the request again;
- the deadline or the stop's cutoff ends the run as the same error of the session's path would (`Transient`,
  `Interrupted`), and a 2xx body over the cap as `BadResponse`;
- anything the lane does not judge itself (`Unsent`: a refused address, a failed connection, a redirect, an interim
  or unreadable answer) sends the run to a worker as if the lane had not been tried: the session's path sends the
  request and says what went wrong, in its own words.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..modes import Mode
from ..sdk.connector import Result
from ..sdk.errors import BadResponse, Interrupted, Transient
from ..sdk.http import Answer, Asked, Expired, Http, TooLarge, Unsent, as_response, where
from ..sdk.poll import Poll
from .run import Returned, Run, execute
from .sizing import service_key
from .workers import Finished, Workers

TICKETS = itertools.count(-1, -1)  # the lane's tickets: negative, never one of the worker pool's
WAIT = 0  # `sent`: no request slot free now (no ticket is 0)


@dataclass(frozen=True)
class Landed:
    """A poll back from the lane: its answer, or why there is none; its URL; the seconds it took."""

    poll: Poll
    answer: Answer | None
    error: BaseException | None
    asked: Asked
    duration: float

    @property
    def url(self) -> str:
        return self.asked.url


def sent(run: Run, http: Http, done: Callable[[Finished], object]) -> int | None:
    """Send the run's declared poll on the lane; its ticket (its landing comes to `done` as a `Finished` holding a
    `Landed`); WAIT when every request slot it needs is taken (the run waits for one among the claimed, as a
    worker would wait in `Slots.take`); None when the run takes a worker: not normal mode, no poll declared, or a
    request the lane does not speak."""
    if run.job.mode != Mode.NORMAL or http.slots is None:
        return None
    connector = run.connector
    try:
        poll = connector.poll(run.job)
    except Exception:  # the connector's poll failed: the run, on a worker, says why
        return None
    if poll is None:
        return None
    held = http.slots.try_take(service_key(run.network))
    if held is None:
        return WAIT
    try:
        request = http.outgoing(poll, connector.headers, connector.authentication(connector, run.job))
        lane = http.lane_started(request[0].scheme) if request is not None else None
    except Exception:  # its authentication failed, or the lane cannot start (its TLS authorities unreadable)
        request = lane = None
    if request is None or lane is None:
        held.release()
        return None
    outgoing, asked = request
    ticket = next(TICKETS)
    started = time.perf_counter()

    def landed(answer: Answer | None, error: BaseException | None) -> None:
        done(Finished(ticket, Landed(poll, answer, error, asked, time.perf_counter() - started), None))

    lane.send(outgoing, landed, held.release)
    return ticket


def returned_by(
    run: Run, finished: Finished, http: Http, pool: Workers, done: Callable[[Finished], object]
) -> Returned | int:
    """What a run that came back `Returned`; for a poll that landed and goes on on a worker, the worker's ticket."""
    try:
        if isinstance(finished.result, Landed):
            return after_landing(run, finished.result, http, pool, done)
        return finished.value()  # execute() never raises, but a bug must not take the pass with it
    except Exception as exc:  # ends the run (`internal`), whatever raised: it never stays in flight
        return Returned(error=exc)


def after_landing(
    run: Run, landed: Landed, http: Http, pool: Workers, done: Callable[[Finished], object]
) -> Returned | int:
    """The run's `Returned` when it ended on the lane; else the ticket of the worker it goes on on (`settle`)."""
    settled = settle(run, landed, http)
    if isinstance(settled, Returned):
        return settled
    primed = (landed.asked, settled) if settled is not None else None
    return pool.submit(execute, (run, primed), done)


def settle(run: Run, landed: Landed, http: Http) -> Returned | Answer | None:
    """What a landing means for its run: its `Returned` when the run ends here; the `Answer` to hand a worker with;
    None when the run takes a worker as if the lane had not been tried."""
    error = landed.error
    if isinstance(error, Unsent):
        return None
    what = f"GET {where(landed.url)}" if error is not None else ""  # named in the errors only
    if isinstance(error, Expired):
        failed = Interrupted(f"collector stopping: {what} cut short") if error.cutoff else None
        return ended(run, landed, failed or Transient(f"deadline of {http.timeout:g}s exceeded: {what}"))
    if isinstance(error, TooLarge):
        told = f" of {error.length} bytes" if error.length is not None else ""
        return ended(run, landed, BadResponse(f"body{told} exceeds the {error.cap}-byte cap: {what}"))
    if error is not None or landed.answer is None:  # a bug of the lane's: the run is judged as `internal`
        return ended(run, landed, error or RuntimeError("poll landed without an answer"))
    answer = landed.answer
    if answer.status not in landed.poll.unchanged:
        return answer
    try:
        result = run.connector.unchanged(run.job, http.decoded(as_response(answer, landed.url)))
    except Exception as exc:  # the connector's own code: judged as if `normal` had raised it
        return ended(run, landed, exc, str(answer.status))
    return ended(run, landed, None, str(answer.status), result)


def ended(
    run: Run, landed: Landed, error: BaseException | None, code: str = "error", result: Result | None = None
) -> Returned:
    """A run that ended on the lane: one request, its status (or "error"), no item."""
    return Returned(
        result=result,
        error=error,
        called=True,
        quota_scope=run.connector.quota_scope,
        requests=1,
        codes=((code, 1),),
        duration=landed.duration,
    )
