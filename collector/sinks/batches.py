"""Batches: the queue entries a sink sends together, formed once and kept for every try of the batch.

A batch is formed from due entries that belong to none: up to SINK_<NAME>_BATCH of them, in a fixed order (by item
id), given a new id (an ObjectId's hex) and written to each entry as `batch: {id, n, at}` in one update, before
anything is sent. A batch refused as a whole is rescheduled as a unit (outcomes.py): when due again its entries are
found by `batch.id` (an indexed field), in the same order, and sent under the same id — by this service, after a
restart, or by another that took the lease over. Only these change a batch:

- a split: the parts a 413 (or the size pre-split) makes get ids derived from the batch's (delivery.py), kept in
  the entries of a part refused as a whole;
- outcomes of its own for some documents (some done, some retried or rejected: `_bulk`, Typesense): the rest are
  rescheduled out of any batch and form a new one;
- a document that leaves it before it is sent again: its item deleted (`gone`), dead-lettered because it cannot
  be sent, or an entry gone from the queue (delivered by a service whose lease lapsed): the rest form a new batch,
  with a new id, at once (the `gone` and dead-letter counters count what left).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from bson import ObjectId

from .delivery import VANISHED, Fate, Verdict
from .docs import DocRefused, as_doc
from .lane import Turn
from .outcomes import Outcomes
from .sdk import Batch, Doc
from .store import SinkStore

Pairs = list[tuple[dict, Doc]]


def stored(entry: Mapping[str, Any]) -> tuple[str, int, datetime] | None:
    """The batch an entry belongs to, (id, size, formed), or None: in none, or one a shell mangled (formed anew)."""
    batch = entry.get("batch")
    if not isinstance(batch, dict):
        return None
    ident, size, formed = batch.get("id"), batch.get("n"), batch.get("at")
    if not isinstance(ident, str) or not ident or type(size) is not int or not isinstance(formed, datetime):
        return None
    return ident, size, formed


def in_order(entries: Iterable[dict]) -> list[dict]:
    """The entries in a batch's fixed order: by their item's id (of any type, compared as text within its type)."""
    return sorted(entries, key=lambda e: (type(e.get("item")).__name__, str(e.get("item"))))


class Batcher:
    """Forms a lane's batches each round, on the service's thread: those kept from an earlier try first, then new."""

    def __init__(self, store: SinkStore, outcomes: Outcomes):
        self.store, self.outcomes = store, outcomes

    def plan(self, turn: Turn, now: datetime) -> list[tuple[list[dict], Batch]]:
        """At most `turn.slots` batches to send now: (their entries, the Batch), entries in the batch's order."""
        slots, size = turn.slots, turn.size
        groups, fresh = self._due(turn, now)
        if not groups and not fresh:  # nothing due: no items to load
            return []
        fresh = fresh[: max(0, slots - len(groups)) * size]
        docs = self._docs(turn, [entry for group in groups.values() for entry in group] + fresh)
        planned: list[tuple[list[dict], Batch]] = []
        loose: Pairs = []
        for ident, group in groups.items():
            pairs = [(e, docs[id(e)]) for e in in_order(group) if id(e) in docs]
            formed = unchanged(ident, group, pairs)
            if formed is not None:
                planned.append(([e for e, _ in pairs], Batch([d for _, d in pairs], ident, formed)))
            else:  # the batch lost a document (or an entry): what is left forms a new batch
                loose += pairs
        loose += [(e, docs[id(e)]) for e in fresh if id(e) in docs]
        while loose and len(planned) < slots:
            chunk, loose = in_order_pairs(loose[:size]), loose[size:]
            planned.append(self._form([e for e, _ in chunk], [d for _, d in chunk], now))
        return planned

    def _due(self, turn: Turn, now: datetime) -> tuple[dict[str, list[dict]], list[dict]]:
        """The due entries: those of kept batches (every entry of each, due or not, at most one batch per free slot,
        none in flight) by batch id, and those in no batch."""
        slots = turn.slots
        kept: dict[str, list[dict]] = {}
        fresh: list[dict] = []
        for entry in self.store.due(turn.name, now, slots * turn.size, turn.busy):
            batch = stored(entry)
            if batch is None:
                fresh.append(entry)
            elif batch[0] not in turn.busy_batches and len(kept) < slots:
                kept.setdefault(batch[0], [])
        for entry in self.store.members(turn.name, list(kept), turn.busy) if kept else ():
            batch = stored(entry)
            if batch is not None and batch[0] in kept:
                kept[batch[0]].append(entry)
        return kept, fresh

    def _form(self, entries: list[dict], docs: list[Doc], now: datetime) -> tuple[list[dict], Batch]:
        """A new batch of `entries`, written to them (one update) before it is sent."""
        ident = str(ObjectId())
        batch = {"id": ident, "n": len(entries), "at": now}
        self.store.set_batch([e["_id"] for e in entries], batch)
        for entry in entries:
            entry["batch"] = batch
        return entries, Batch(docs, ident, now)

    def _docs(self, turn: Turn, entries: list[dict]) -> dict[int, Doc]:
        """The Doc of each entry whose item can be sent (by the entry's `id()`); the others get their verdict at
        once: an item deleted meanwhile is gone; an entry a shell wrote without an item, or naming one by a list or
        a document, and an item that cannot be made a document, are dead-lettered."""
        named = [e for e in entries if _names_item(e)]
        for entry in (e for e in entries if not _names_item(e)):
            why = "the queue entry names no item (no `item`, or not an id)"
            self.outcomes.add(turn.name, [entry], [Verdict(Fate.REJECT, why, "rejected", final=True)])
        items = self.store.load_items([e["item"] for e in named])
        docs: dict[int, Doc] = {}
        for entry in named:
            item = items.get(entry["item"])
            if item is None:
                self.outcomes.add(turn.name, [entry], [VANISHED])
                continue
            try:
                docs[id(entry)] = as_doc(item)
            except Exception as exc:  # DocRefused, or a value no one foresaw: that item only, never the sink's round
                why = str(exc) if isinstance(exc, DocRefused) else f"{type(exc).__name__}: {exc}"
                verdict = Verdict(Fate.REJECT, turn.scrub(f"the item cannot be sent: {why}"), "rejected", final=True)
                self.outcomes.add(turn.name, [entry], [verdict])
        return docs


def unchanged(ident: str, group: list[dict], pairs: Pairs) -> datetime | None:
    """When a kept batch is as it was formed (every entry there, each with its document, all saying the same):
    when it was formed; else None."""
    first = stored(group[0]) if group else None
    if first is None or first[0] != ident or not first[1] == len(group) == len(pairs):
        return None
    return first[2] if all(stored(entry) == first for entry in group) else None


def in_order_pairs(pairs: Pairs) -> Pairs:
    order = {id(entry): index for index, entry in enumerate(in_order(e for e, _ in pairs))}
    return sorted(pairs, key=lambda pair: order[id(pair[0])])


def _names_item(entry: dict) -> bool:
    """Whether a queue entry names an item one can look up by: present, not null, hashable."""
    item = entry.get("item")
    try:
        hash(item)
    except TypeError:
        return False
    return item is not None
