"""The verdicts of finished deliveries, written on the service's thread: done -> the entry deleted; retry ->
tries + 1 and due again after a back-off (full jitter, capped; forever); reject -> rejects + 1, due again no sooner
than 30 s, 60 s, 120 s ... (capped) after each reject, and after SINK_MAX_TRIES rejects the entry moves to
sinkDeadLetters with its reason; gone -> the entry deleted; auth -> the sink stopped (the entries stay due for
when it is resumed).

Finished batches wait here until their writes succeeded: a database that is away keeps them in memory and the next
round writes them (every write may be done twice without harm). The counters are added to the sinks' documents
(`$inc`) once a batch is written, and kept for this process's own figures (`totals`)."""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..engine.store import unavailable
from ..sdk.redaction import clip
from ..textout import printable
from .delivery import AUTH, DONE, GONE, REJECT, RETRY, Verdict, backoff
from .store import SinkStore, whole

log = logging.getLogger("collector.sinks")
STATUS = re.compile(r"([1-9][0-9]{2})(?=[\s:]|$)")  # ASCII digits only: "²³⁴".isdigit() is true, int() refuses it

REJECT_SPACING = 30.0  # seconds at least between the first reject of an entry and its next try; doubling after


@dataclass
class Finished:
    """One batch's entries (as read from sinkQueue) and the verdict of each."""

    sink: str
    entries: list[dict]
    verdicts: list[Verdict]


def counts_of(verdicts: Sequence[Verdict], dead: int) -> Counter[str]:
    """The counters a batch adds: delivered, retried, gone, deadLettered, and failed.<kind> — one per document,
    one per whole-batch failure (a refused batch counts once, however many documents it held)."""
    counts: Counter[str] = Counter()
    seen: set[int] = set()
    for verdict in verdicts:
        if verdict.outcome == DONE:
            counts["delivered"] += 1
        elif verdict.outcome == GONE:
            counts["gone"] += 1
        if verdict.outcome == RETRY:
            counts["retried"] += 1
        if verdict.kind and (not verdict.whole or id(verdict) not in seen):
            counts[f"failed.{verdict.kind}"] += 1
            seen.add(id(verdict))
    if dead:
        counts["deadLettered"] += dead
    return counts


class Outcomes:
    def __init__(self, store: SinkStore, rng: random.Random):
        self.store = store
        self.rng = rng
        self.pending: list[Finished] = []
        self.unsaved: dict[str, Counter[str]] = {}  # counters not yet added to the sinks' documents
        self.totals: dict[str, Counter[str]] = {}  # this process's, for its metrics
        self.said: set[tuple[str, str]] = set()  # (sink, error) already logged: a write that keeps failing, once

    def add(self, sink: str, entries: list[dict], verdicts: list[Verdict]) -> None:
        self.pending.append(Finished(sink, entries, verdicts))

    def apply(self, now: datetime, max_tries: int, cap: float) -> dict[str, str]:
        """Write every pending batch, oldest first (a database error stops and keeps the rest). Returns the sinks
        whose credentials were refused, with the reason: the caller stops them."""
        refused: dict[str, str] = {}
        while self.pending:
            batch = self.pending[0]
            dead = self._write_or_drop(batch, now, max_tries, cap)
            self.pending.pop(0)
            counts = counts_of(batch.verdicts, dead)
            self.unsaved.setdefault(batch.sink, Counter()).update(counts)
            self.totals.setdefault(batch.sink, Counter()).update(counts)
            auth = next((v.reason for v in batch.verdicts if v.outcome == AUTH), None)
            if auth is not None:
                refused[batch.sink] = auth
        return refused

    def count(self, sink: str, counter: str) -> None:
        """One more of a counter outside any batch (an authentication refused at the prepare)."""
        for counts in (self.unsaved, self.totals):
            counts.setdefault(sink, Counter())[counter] += 1

    def flush(self) -> None:
        """Add the counters written so far to the sinks' documents."""
        for sink in list(self.unsaved):
            try:
                self.store.add_counts(sink, self.unsaved[sink])
            except Exception as exc:  # that sink's document only: its counters wait, the others are written
                if unavailable(exc):
                    raise
                self._say(sink, "its counters cannot be written", exc)
                continue
            del self.unsaved[sink]

    def _say(self, sink: str, what: str, exc: Exception) -> None:
        """One ERROR line per sink and kind of error: a write that keeps failing is not logged every round."""
        if (sink, type(exc).__name__) in self.said:
            return
        self.said.add((sink, type(exc).__name__))
        error = printable(clip(f"{type(exc).__name__}: {exc}", 300))
        log.error("sink %s: %s (%s); the entries stay queued, the other sinks go on", sink, what, error)

    def _write_or_drop(self, batch: Finished, now: datetime, max_tries: int, cap: float) -> int:
        """The batch's writes; one that fails for another reason than the database being away is dropped with one
        ERROR line (its entries stay queued as they were: delivered again), never kept at the head for ever."""
        try:
            return self._write(batch, now, max_tries, cap)
        except Exception as exc:
            if unavailable(exc):
                raise
            self._say(batch.sink, f"the outcomes of a batch of {len(batch.entries)} cannot be written", exc)
            return 0

    def _write(self, batch: Finished, now: datetime, max_tries: int, cap: float) -> int:
        """The batch's writes; the number of entries dead-lettered."""
        done = [e["_id"] for e, v in zip(batch.entries, batch.verdicts, strict=True) if v.outcome in (DONE, GONE)]
        self.store.delete(done)
        dead = 0
        for entry, verdict in zip(batch.entries, batch.verdicts, strict=True):
            if verdict.outcome == RETRY:
                self._retry(entry, verdict, now, cap, reject=False)
            elif verdict.outcome == REJECT:
                if verdict.final or whole(entry.get("rejects")) + 1 >= max_tries:
                    self.store.dead_letter(entry, verdict.reason, _status(verdict), now)
                    dead += 1
                else:
                    self._retry(entry, verdict, now, cap, reject=True)
        return dead

    def _retry(self, entry: Mapping[str, Any], verdict: Verdict, now: datetime, cap: float, reject: bool) -> None:
        wait = backoff(whole(entry.get("tries")), cap, self.rng, verdict.retry_after)
        if reject:  # a destination-wide hiccup reported per item (an index made again) must outlast the tries
            wait = max(wait, reject_floor(whole(entry.get("rejects")), cap))
        error = {"kind": verdict.kind or verdict.outcome, "message": verdict.reason, "at": now}
        self.store.reschedule(entry, now + timedelta(seconds=wait), error, reject)


def reject_floor(rejects: int, cap: float) -> float:
    """The least wait before the try after reject number `rejects + 1`: REJECT_SPACING doubling with each reject,
    up to SINK_RETRY_MAX (`cap`). With the defaults (3 tries, 600 s) the last reject comes 90 s or more after the
    first, so a per-item refusal that lasts less than that does not dead-letter."""
    return min(cap, REJECT_SPACING * 2 ** min(max(rejects, 0), 30))


def _status(verdict: Verdict) -> int | None:
    """An HTTP status a reason starts with ("400 ..."), for the dead letter's `status`."""
    found = STATUS.match(verdict.reason)
    return int(found.group(1)) if found else None
