"""One delivery, on a sink's worker thread: a batch handed to `Sink.deliver`, split first when it would encode
larger than the sink's `max_batch_bytes`, split in halves when the destination says it is too large (one document
too large is rejected), and every document given its Verdict. No database here: the verdicts go back to the
service's thread, which writes them (outcomes.py). Also the back-off the service reschedules with.

A stop (`halt` set) sends nothing more: a batch handed to a thread sends its first request, but no other run or
half starts after it, and a request that failed once it was set (the service cuts the requests still running) is
CUT — its documents' outcomes are not written, their entries stay queued as they were and are delivered again
later.

A batch keeps its identity (`Batch.id`, kept in MongoDB by the service) from one try to the next: the parts a split
makes get ids derived from it (`<id>-a`, `<id>-b` for the halves of a 413, `<id>-1`, `<id>-2` ... for the runs of
the size pre-split), the same at every try, so a part refused as a whole is tried again under its own id
(`Delivered.batches`), and every split counts once as `tooLarge`."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..sdk.redaction import clip
from .sdk import AuthFailed, Batch, BatchRefused, Doc, Done, Reject, Retry, Sink, TooLarge


class Fate(StrEnum):
    """What a Verdict does with a document's queue entry (the SDK's `Outcome`s are what a sink reports; this is
    what the service makes of them): DONE deleted; RETRY due again after a back-off; REJECT tried a bounded number
    of times, then dead-lettered; AUTH the sink stops, the entry stays due; GONE (the item was deleted) dropped;
    CUT (not sent: the service is stopping) left as it was. The values are what `lastError.kind` may store."""

    DONE = "done"
    RETRY = "retry"
    REJECT = "reject"
    AUTH = "auth"
    GONE = "gone"
    CUT = "cut"


REASON_LIMIT = 500
BACKOFF_BASE = 1.0  # seconds before the first retry, at most; doubling with each try, up to SINK_RETRY_MAX


@dataclass(frozen=True)
class Verdict:
    """What became of one document: done, retry (refused or a Retry outcome), reject, or auth (the sink's
    credentials were refused: the sink stops). `kind` is the failure kind counted (refused, tooLarge,
    rejected, auth; "" for done)."""

    outcome: Fate
    reason: str = ""
    kind: str = ""
    retry_after: float | None = None
    whole: bool = False  # the whole batch failed (refused, auth): the rest of a split batch is not sent
    final: bool = False  # a reject tried no more: dead-lettered at once (an item no destination could take)


DELIVERED = Verdict(Fate.DONE)
VANISHED = Verdict(Fate.GONE)  # the item is no longer in `items`: its entry is dropped
UNSENT = Verdict(Fate.CUT, "not sent: the service is stopping", whole=True)  # nothing written: the entry stays queued


@dataclass
class Delivered:
    """What became of a batch: a Verdict per document, in order; per document the id of the (part of the) batch
    it was last sent in, or would have been (a part left unsent after a refusal); how often it was split (413)."""

    verdicts: list[Verdict]
    batches: list[str] = field(default_factory=list)
    splits: int = 0


def part(batch: Batch, docs: Sequence[Doc], mark: str) -> Batch:
    """A part of `batch` made by a split: its id derived from the batch's (none when the batch has none)."""
    return Batch(docs, f"{batch.id}-{mark}" if batch.id else "", batch.formed)


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
    """Deliver `docs` to `sink`: one Verdict per document, in order (deliver_batch's verdicts)."""
    return deliver_batch(sink, docs if isinstance(docs, Batch) else Batch(docs), scrub, halt).verdicts


def deliver_batch(
    sink: Sink, batch: Batch, scrub: Callable[[str], str], halt: threading.Event | None = None
) -> Delivered:
    """Deliver `batch` to `sink` (on a worker thread). `scrub` makes any reason safe to store and log (secrets
    masked, clipped); `halt`, once set, sends nothing more (UNSENT)."""
    sender = _Sender(sink, scrub, halt if halt is not None else threading.Event())
    sent: list[tuple[Verdict, str] | None] = [None] * len(batch)
    stop: Verdict | None = None
    runs = split_by_bytes(batch, sink.max_batch_bytes)
    for number, run in enumerate(runs):
        docs = [batch[i] for i in run]
        piece = part(batch, docs, str(number + 1)) if len(runs) > 1 else batch
        if stop is None and number and sender.halt.is_set():
            stop = UNSENT
        if stop is not None:  # the destination refused the batch or our credentials: the rest waits the same
            for index in run:
                sent[index] = (stop, piece.id)
            continue
        for index, pair in zip(run, sender.send(piece), strict=True):
            sent[index] = pair
            if pair[0].whole:
                stop = pair[0]
    pairs = [p if p is not None else (Verdict(Fate.RETRY, "not sent", "refused"), batch.id) for p in sent]
    return Delivered([v for v, _ in pairs], [b for _, b in pairs], sender.splits)


class _Sender:
    """Sends a batch (halves when the destination says it is too large), counting the splits."""

    def __init__(self, sink: Sink, scrub: Callable[[str], str], halt: threading.Event):
        self.sink, self.scrub, self.halt = sink, scrub, halt
        self.splits = 0

    def send(self, batch: Batch) -> list[tuple[Verdict, str]]:
        scrub = self.scrub
        try:
            outcomes = self.sink.deliver(batch)
        except TooLarge as exc:
            if len(batch) == 1:
                return [(Verdict(Fate.REJECT, scrub(f"too large for the destination: {exc}"), "tooLarge"), batch.id)]
            self.splits += 1
            sent: list[tuple[Verdict, str]] = []
            middle = len(batch) // 2
            for half in (part(batch, batch[:middle], "a"), part(batch, batch[middle:], "b")):
                sent += [(UNSENT, half.id)] * len(half) if self.halt.is_set() else self.send(half)
            return sent  # neither half sent once the service stops
        except AuthFailed as exc:
            verdicts = [Verdict(Fate.AUTH, scrub(f"authentication refused: {exc}"), "auth", whole=True)] * len(batch)
        except Exception as exc:
            # cut by the stop, most likely: not the destination's verdict
            verdicts = [UNSENT] * len(batch) if self.halt.is_set() else _failed(exc, len(batch), scrub)
        else:
            verdicts = _verdicts(outcomes, len(batch), scrub)
        return [(verdict, batch.id) for verdict in verdicts]


def _failed(exc: Exception, count: int, scrub: Callable[[str], str]) -> list[Verdict]:
    """The verdicts of a batch whose delivery raised: refused, all of it (with the destination's Retry-After); any
    failure of the sink's own code counts as a refused batch too."""
    if isinstance(exc, BatchRefused):
        wait = _seconds(exc.retry_after)
        return [Verdict(Fate.RETRY, scrub(f"refused: {exc}"), "refused", wait, whole=True)] * count
    return [Verdict(Fate.RETRY, scrub(f"refused: {type(exc).__name__}: {exc}"), "refused", whole=True)] * count


def _verdicts(outcomes: Any, count: int, scrub: Callable[[str], str]) -> list[Verdict]:
    try:
        outcomes = list(outcomes)
    except TypeError:
        outcomes = None
    if outcomes is None or len(outcomes) != count:
        got = "no list" if outcomes is None else f"{len(outcomes)} outcomes"
        reason = f"refused: the sink gave {got} for {count} documents"
        return [Verdict(Fate.RETRY, reason, "refused", whole=True)] * count
    return [_verdict(outcome, scrub) for outcome in outcomes]


def _verdict(outcome: Any, scrub: Callable[[str], str]) -> Verdict:
    if isinstance(outcome, Done):
        return DELIVERED
    if isinstance(outcome, Retry):
        return Verdict(Fate.RETRY, scrub(outcome.reason or "retry"), "refused")
    if isinstance(outcome, Reject):
        return Verdict(Fate.REJECT, scrub(outcome.reason or "rejected"), "rejected")
    return Verdict(Fate.RETRY, f"refused: the sink gave {type(outcome).__name__[:60]}, not an Outcome", "refused")


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
