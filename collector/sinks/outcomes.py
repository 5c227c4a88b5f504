"""The verdicts of finished deliveries, written on the service's thread: done -> the entry deleted; retry ->
tries + 1 and due again after a back-off (full jitter, capped; forever); reject -> rejects + 1, due again no sooner
than 30 s, 60 s, 120 s ... (capped) after each reject, and after SINK_MAX_TRIES rejects the entry moves to
sinkDeadLetters with its reason; gone -> the entry deleted; auth -> the sink stopped (the entries stay due for
when it is resumed).

A batch refused as a whole is tried again as a unit: its entries due again together, after one back-off, in the
same batch (or the part of a split it was sent in: `Finished.batches`), so the next try sends the same documents
under the same id. A batch whose documents had outcomes of their own (some done, some retried or rejected) is over:
the rest are rescheduled one by one, out of any batch, and form new batches when due.

Finished batches wait here until their writes succeeded: a database that is away keeps them in memory and the next
round writes them (every write may be done twice without harm). The counters are added to the sinks' documents
(`$inc`) once a batch is written, and kept for this process's own figures (`totals`)."""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..engine.store import unavailable
from ..sdk.redaction import clip
from ..textout import printable
from .delivery import Delivered, Fate, Verdict, backoff
from .health import Health
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
    batches: list[str] = field(default_factory=list)  # per entry: the id of the batch (or part) it was sent in
    splits: int = 0  # times the batch was split because the destination said it was too large


def counts_of(verdicts: Sequence[Verdict], dead: int, splits: int = 0) -> Counter[str]:
    """The counters a batch adds: delivered, retried, gone, deadLettered, and failed.<kind> — one per document,
    one per whole-batch failure (a refused batch counts once, however many documents it held), one tooLarge per
    split."""
    counts: Counter[str] = Counter()
    seen: set[int] = set()
    for verdict in verdicts:
        if verdict.outcome == Fate.DONE:
            counts["delivered"] += 1
        elif verdict.outcome == Fate.GONE:
            counts["gone"] += 1
        if verdict.outcome == Fate.RETRY:
            counts["retried"] += 1
        if verdict.kind and (not verdict.whole or id(verdict) not in seen):
            counts[f"failed.{verdict.kind}"] += 1
            seen.add(id(verdict))
    if dead:
        counts["deadLettered"] += dead
    if splits:
        counts["failed.tooLarge"] += splits
    return counts


class Outcomes:
    def __init__(self, store: SinkStore, rng: random.Random):
        self.store = store
        self.rng = rng
        self.pending: list[Finished] = []
        self.unsaved: dict[str, Counter[str]] = {}  # counters not yet added to the sinks' documents
        self.totals: dict[str, Counter[str]] = {}  # this process's, for its metrics
        self.said: set[tuple[str, str]] = set()  # (sink, error) already logged: a write that keeps failing, once
        self.health = Health()  # each sink's failing streak, fed by its verdicts: logged once, written with them
        self.refused: dict[str, str] = {}  # sinks whose credentials were refused, until `write` hands them over

    def take(self, sink: str, finished: list[tuple[list[dict], Delivered]], current: bool, now: datetime) -> None:
        """A lane's finished batches (`Lane.finished`), to be written, and seen by the sink's failing streak.
        Those of a lane whose settings were since replaced (not `current`) are `superseded`, and no streak's."""
        for entries, done in finished:
            verdicts = done.verdicts if current else superseded(done.verdicts)
            self.add(sink, entries, verdicts, done.batches, done.splits)
            if current:
                self.health.note(sink, done.verdicts, now)

    def write(self, now: datetime, max_tries: int, cap: float) -> dict[str, str]:
        """The round's writes, in one pass: every pending batch (`apply`), the counters (`flush`), the failing
        streaks. Returns the sinks whose credentials were refused, with the reason (kept until returned: a database
        away after the batches were written loses none); the caller stops them."""
        self.refused.update(self.apply(now, max_tries, cap))
        self.flush()
        self.health.flush(self.store.sinks, now)
        refused, self.refused = self.refused, {}
        return refused

    def add(
        self, sink: str, entries: list[dict], verdicts: list[Verdict], batches: list[str] | None = None, splits: int = 0
    ) -> None:
        self.pending.append(Finished(sink, entries, verdicts, batches or [""] * len(entries), splits))

    def apply(self, now: datetime, max_tries: int, cap: float) -> dict[str, str]:
        """Write every pending batch, oldest first (a database error stops and keeps the rest). Returns the sinks
        whose credentials were refused, with the reason: the caller stops them."""
        refused: dict[str, str] = {}
        while self.pending:
            batch = self.pending[0]
            dead = self._write_or_drop(batch, now, max_tries, cap)
            self.pending.pop(0)
            counts = counts_of(batch.verdicts, dead, batch.splits)
            self.unsaved.setdefault(batch.sink, Counter()).update(counts)
            self.totals.setdefault(batch.sink, Counter()).update(counts)
            auth = next((v.reason for v in batch.verdicts if v.outcome == Fate.AUTH), None)
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
        gone = (Fate.DONE, Fate.GONE)
        self.store.delete([e["_id"] for e, v in zip(batch.entries, batch.verdicts, strict=True) if v.outcome in gone])
        units = refused_whole(batch)
        for part, indexes in units.items():
            self._retry_unit(part, [batch.entries[i] for i in indexes], batch.verdicts[indexes[0]], now, cap)
        in_units = {i for indexes in units.values() for i in indexes}
        dead = 0
        for index, (entry, verdict) in enumerate(zip(batch.entries, batch.verdicts, strict=True)):
            if index in in_units:
                continue
            if verdict.outcome == Fate.RETRY:
                self._retry(entry, verdict, now, cap, reject=False)
            elif verdict.outcome == Fate.REJECT:
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
        self.store.reschedule(entry, now + timedelta(seconds=wait), last_error(verdict, now), reject)

    def _retry_unit(self, part: str, entries: list[dict], verdict: Verdict, now: datetime, cap: float) -> None:
        """A batch (or a part of one) refused as a whole: due again together, after one back-off, as the batch
        `part` (its formation time kept: the same message at the next try)."""
        tries = max(whole(entry.get("tries")) for entry in entries)
        next_at = now + timedelta(seconds=backoff(tries, cap, self.rng, verdict.retry_after))
        stored = entries[0].get("batch")
        formed = stored.get("at") if isinstance(stored, dict) and isinstance(stored.get("at"), datetime) else now
        unit = {"id": part, "n": len(entries), "at": formed}
        for entry in entries:
            self.store.reschedule(entry, next_at, last_error(verdict, now), False, unit)


def superseded(verdicts: list[Verdict]) -> list[Verdict]:
    """The verdicts of a delivery made with settings since replaced (a reload): a refused authentication is about
    the old credentials, so its entries are tried again (with the new ones) and the sink is not stopped. One new
    verdict per old one (a whole-batch failure stays one object: counted once)."""
    new: dict[int, Verdict] = {}
    for verdict in verdicts:
        if verdict.outcome == Fate.AUTH and id(verdict) not in new:
            reason = f"{verdict.reason} (with the settings replaced since: tried again with the new ones)"
            new[id(verdict)] = Verdict(Fate.RETRY, reason, verdict.kind, whole=verdict.whole)
    return [new.get(id(v), v) for v in verdicts]


def refused_whole(batch: Finished) -> dict[str, list[int]]:
    """The entries (indexes) of each batch, or part of one, the destination refused as a whole, by its id."""
    units: dict[str, list[int]] = {}
    for index, (verdict, part) in enumerate(
        zip(batch.verdicts, batch.batches or [""] * len(batch.verdicts), strict=True)
    ):
        if verdict.outcome == Fate.RETRY and verdict.whole and part:
            units.setdefault(part, []).append(index)
    return units


def last_error(verdict: Verdict, now: datetime) -> dict[str, Any]:
    return {"kind": verdict.kind or str(verdict.outcome.value), "message": verdict.reason, "at": now}


def reject_floor(rejects: int, cap: float) -> float:
    """The least wait before the try after reject number `rejects + 1`: REJECT_SPACING doubling with each reject,
    up to SINK_RETRY_MAX (`cap`). With the defaults (3 tries, 600 s) the last reject comes 90 s or more after the
    first, so a per-item refusal that lasts less than that does not dead-letter."""
    return min(cap, REJECT_SPACING * 2 ** min(max(rejects, 0), 30))


def _status(verdict: Verdict) -> int | None:
    """An HTTP status a reason starts with ("400 ..."), for the dead letter's `status`."""
    found = STATUS.match(verdict.reason)
    return int(found.group(1)) if found else None
