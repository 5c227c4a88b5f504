"""One delivery, on a sink's worker thread: a batch handed to `Sink.deliver`, split first when it would encode
larger than the sink's `max_batch_bytes`, split in halves when the destination says it is too large (one document
too large is rejected), and every document given its Verdict. No database here: the verdicts go back to the
service's thread, which writes them (outcomes.py). Also the back-off the service reschedules with.

A stop (`halt` set) sends nothing more: a batch handed to a thread sends its first request, but no other run or
half starts after it, and a request that failed once it was set (the service cuts the requests still running) is
CUT — its documents' outcomes are not written, their entries stay queued as they were and are delivered again
later."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..sdk.redaction import clip
from .sdk import AuthFailed, BatchRefused, Doc, Done, Reject, Retry, Sink, TooLarge

DONE, RETRY, REJECT, AUTH, GONE, CUT = "done", "retry", "reject", "auth", "gone", "cut"
REASON_LIMIT = 500
BACKOFF_BASE = 1.0  # seconds before the first retry, at most; doubling with each try, up to SINK_RETRY_MAX


@dataclass(frozen=True)
class Verdict:
    """What became of one document: done, retry (refused or a Retry outcome), reject, or auth (the sink's
    credentials were refused: the sink stops). `kind` is the failure kind counted (refused, tooLarge,
    rejected, auth; "" for done)."""

    outcome: str
    reason: str = ""
    kind: str = ""
    retry_after: float | None = None
    whole: bool = False  # the whole batch failed (refused, auth): the rest of a split batch is not sent
    final: bool = False  # a reject tried no more: dead-lettered at once (an item no destination could take)


DELIVERED = Verdict(DONE)
VANISHED = Verdict(GONE)  # the item is no longer in `items`: its entry is dropped
UNSENT = Verdict(CUT, "not sent: the service is stopping", whole=True)  # nothing written: the entry stays queued


def encoded_size(doc: Doc) -> int:
    """About the bytes a document takes in a batch (its JSON and its id)."""
    return len(json.dumps(doc.body, separators=(",", ":"), default=str)) + len(doc.id) + 16


def split_by_bytes(docs: Sequence[Doc], limit: int) -> list[list[int]]:
    """Indexes of `docs` in runs whose estimated size stays within `limit` (a document larger alone is a run of
    its own: the destination says whether it takes it)."""
    runs: list[list[int]] = []
    size = 0
    for index, doc in enumerate(docs):
        cost = encoded_size(doc)
        if not runs or size + cost > limit:
            runs.append([])
            size = 0
        runs[-1].append(index)
        size += cost
    return [run for run in runs if run]


def deliver(
    sink: Sink, docs: Sequence[Doc], scrub: Callable[[str], str], halt: threading.Event | None = None
) -> list[Verdict]:
    """Deliver `docs` to `sink` (on a worker thread): one Verdict per document, in order. `scrub` makes any
    reason safe to store and log (secrets masked, clipped); `halt`, once set, sends nothing more (UNSENT)."""
    halt = halt if halt is not None else threading.Event()
    verdicts: list[Verdict | None] = [None] * len(docs)
    stop: Verdict | None = None
    for number, run in enumerate(split_by_bytes(docs, sink.max_batch_bytes)):
        if stop is None and number and halt.is_set():
            stop = UNSENT
        if stop is not None:  # the destination refused the batch or our credentials: the rest waits the same
            for index in run:
                verdicts[index] = stop
            continue
        for index, verdict in zip(run, _send(sink, [docs[i] for i in run], scrub, halt), strict=True):
            verdicts[index] = verdict
            if verdict.whole:
                stop = verdict
    return [v if v is not None else Verdict(RETRY, "not sent", "refused") for v in verdicts]


def _send(sink: Sink, docs: list[Doc], scrub: Callable[[str], str], halt: threading.Event) -> list[Verdict]:
    try:
        outcomes = sink.deliver(docs)
    except TooLarge as exc:
        if len(docs) == 1:
            return [Verdict(REJECT, scrub(f"too large for the destination: {exc}"), "tooLarge")]
        verdicts: list[Verdict] = []
        for half in (docs[: len(docs) // 2], docs[len(docs) // 2 :]):  # neither sent once the service stops
            verdicts += [UNSENT] * len(half) if halt.is_set() else _send(sink, half, scrub, halt)
        return verdicts
    except AuthFailed as exc:
        return [Verdict(AUTH, scrub(f"authentication refused: {exc}"), "auth", whole=True)] * len(docs)
    except Exception as exc:
        if halt.is_set():  # cut by the stop, most likely: not the destination's verdict
            return [UNSENT] * len(docs)
        return _failed(exc, len(docs), scrub)
    return _verdicts(outcomes, len(docs), scrub)


def _failed(exc: Exception, count: int, scrub: Callable[[str], str]) -> list[Verdict]:
    """The verdicts of a batch whose delivery raised: refused, all of it (with the destination's Retry-After); any
    failure of the sink's own code counts as a refused batch too."""
    if isinstance(exc, BatchRefused):
        wait = _seconds(exc.retry_after)
        return [Verdict(RETRY, scrub(f"refused: {exc}"), "refused", wait, whole=True)] * count
    return [Verdict(RETRY, scrub(f"refused: {type(exc).__name__}: {exc}"), "refused", whole=True)] * count


def _verdicts(outcomes: Any, count: int, scrub: Callable[[str], str]) -> list[Verdict]:
    try:
        outcomes = list(outcomes)
    except TypeError:
        outcomes = None
    if outcomes is None or len(outcomes) != count:
        got = "no list" if outcomes is None else f"{len(outcomes)} outcomes"
        return [Verdict(RETRY, f"refused: the sink gave {got} for {count} documents", "refused", whole=True)] * count
    return [_verdict(outcome, scrub) for outcome in outcomes]


def _verdict(outcome: Any, scrub: Callable[[str], str]) -> Verdict:
    if isinstance(outcome, Done):
        return DELIVERED
    if isinstance(outcome, Retry):
        return Verdict(RETRY, scrub(outcome.reason or "retry"), "refused")
    if isinstance(outcome, Reject):
        return Verdict(REJECT, scrub(outcome.reason or "rejected"), "rejected")
    return Verdict(RETRY, f"refused: the sink gave {type(outcome).__name__[:60]}, not an Outcome", "refused")


def _seconds(value: Any) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds == seconds and seconds >= 0 else None


def backoff(tries: int, cap: float, rng: random.Random, retry_after: float | None = None) -> float:
    """Seconds before try `tries + 1`: full jitter, uniform in [0, min(cap, BACKOFF_BASE * 2**tries)]; a
    Retry-After from the destination is waited at least, up to `cap`."""
    ceiling = min(cap, BACKOFF_BASE * 2 ** min(max(tries, 0), 60))
    delay = rng.uniform(0, ceiling)
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay


def scrubber(secrets: Sequence[str], limit: int = REASON_LIMIT) -> Callable[[str], str]:
    """A reason made safe: the sink's own secret values masked (whatever their names), then the process-wide
    redaction and the clip (collector.sdk.redaction.clip)."""
    values = sorted((s for s in secrets if s), key=len, reverse=True)

    def scrub(text: str) -> str:
        text = str(text)
        for value in values:
            text = text.replace(value, "***")
        return clip(text, limit)

    return scrub
