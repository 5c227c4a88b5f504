"""The secret values the process hides from its logs, and where they occur in a text, at a cost per text that does
not grow with how many values are held.

Every value, in each form it may take in a text (itself, percent-encoded both ways), is a word of an Aho–Corasick
automaton (pyahocorasick): one pass over a text finds every occurrence of every word, overlapping ones included,
whatever their number. Building an automaton costs a few microseconds a word, so a value is not rebuilt into one
big automaton whenever the set changes (at ten million networks a process claims ~900 networks a second, each
bringing tokens not held before): the values added since the last look are built into an automaton of their own,
and FANIN automata of one size class are merged into one of the next (the logarithmic method), dropping the values
no longer held or kept on the way. A text is scanned by each automaton: at most FANIN - 1 per size class (classes
four times apart from BASE words), a handful for thousands of values, each scan a fraction of a microsecond for a
log line; a value is rebuilt about once per size class it climbs (measured: 13–16 µs a new value at 4,096 held,
against 32–36 µs merging two by two).

A value let go of stays masked for a while (it is a secret all the same: RELEASED_KEPT values past those held),
and the set is counted: a value shared by two holders stays until both let go. An automaton whose values are mostly
let go of is rebuilt from those still held or kept when the released ones are pruned; until then the others in it
stay masked a little longer, never shorter than the grace period.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import quote, quote_plus

import ahocorasick

MIN_LENGTH = 4
RELEASED_KEPT = 4096  # values let go of, still masked, before the set is pruned
BASE = 128  # words of the smallest size class of automata (about a claim's new tokens)
FANIN = 4  # automata of one size class merged into one


class Level(NamedTuple):
    """One automaton and the words it was built from."""

    automaton: Any
    words: frozenset[str]


def build(words: Iterable[str]) -> Level:
    """An automaton over `words` (each found with its length: STORE_LENGTH)."""
    kept = frozenset(words)
    automaton = ahocorasick.Automaton(ahocorasick.STORE_LENGTH)
    for word in kept:
        automaton.add_word(word)
    automaton.make_automaton()
    return Level(automaton, kept)


def finder(words: Iterable[str]) -> Callable[[str], bool]:
    """Whether a text holds any of `words` (fixed), in one pass."""
    automaton = build(words).automaton
    return lambda text: next(automaton.iter(text), None) is not None


_UNQUOTED = re.compile(r"[A-Za-z0-9_.~-]*")  # what percent-encoding leaves as it is


@functools.lru_cache(maxsize=16384)
def forms(value: str) -> frozenset[str]:
    """A secret as it may appear: itself, and URL-encoded both ways (remembered: the same tokens come back with
    every claim of their networks; most tokens have no character to encode, and only one form)."""
    if _UNQUOTED.fullmatch(value):
        return frozenset((value,))
    # a lone surrogate (text from a server) is encoded as its UTF-8 bytes would be, never an error
    return frozenset({value, quote(value, safe="", errors="surrogatepass"), quote_plus(value, errors="surrogatepass")})


def variants(values: Iterable[object]) -> set[str]:
    """Every form of every string of at least MIN_LENGTH characters in `values`."""
    out: set[str] = set()
    for value in values:
        if isinstance(value, str) and len(value) >= MIN_LENGTH:
            out.update(forms(value))
    return out


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans joined (spans that only touch stay apart: two secrets side by side, two masks)."""
    spans.sort()
    out = [spans[0]]
    for start, end in spans[1:]:
        last_start, last_end = out[-1]
        if start < last_end:
            out[-1] = (last_start, max(last_end, end))
        else:
            out.append((start, end))
    return out


def tier(size: int) -> int:
    """The size class of an automaton: 0 below 4 x BASE words, then one more for each four times as many."""
    return ((size // BASE).bit_length() + 1) // 2


def crowded(levels: list[Level]) -> list[Level] | None:
    """FANIN automata of one size class, the smallest such class (to be merged into one), or None."""
    by_tier: dict[int, list[Level]] = {}
    for level in levels:
        by_tier.setdefault(tier(len(level.words)), []).append(level)
    full = [group for _, group in sorted(by_tier.items()) if len(group) >= FANIN]
    return full[0] if full else None


class SecretSet:
    """The counted set of secret values (in all their forms) and the automata that find them in a text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._released: set[str] = set()
        self._pending: set[str] = set()  # words not in an automaton yet
        self._pruned = False  # released values were let go of: the automata may be mostly stale
        self._levels: tuple[Level, ...] = ()  # the automata a text goes through (in no order that matters)

    def add(self, values: Iterable[object]) -> None:
        with self._lock:
            for word in variants(values):
                if not self._counts[word] and word not in self._released:
                    self._pending.add(word)  # a value not masked yet
                self._released.discard(word)
                self._counts[word] += 1

    def remove(self, values: Iterable[object]) -> None:
        with self._lock:
            for word in variants(values):
                if self._counts[word] <= 1:
                    del self._counts[word]
                    self._released.add(word)
                else:
                    self._counts[word] -= 1
            if len(self._released) > RELEASED_KEPT + len(self._counts):
                self._released.clear()
                self._pending &= self._counts.keys()
                self._pruned = True

    def __len__(self) -> int:
        return len(self._counts)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets are in `text`: (start, end) of each run of characters that belong to one, in order."""
        if self._pending or self._pruned:
            self._settle()
        found = [(end - length + 1, end + 1) for level in self._levels for end, length in level.automaton.iter(text)]
        return merged(found) if found else found

    def _live(self, word: str) -> bool:
        return word in self._counts or word in self._released

    def _settle(self) -> None:
        """Rebuild the automata a prune left mostly stale, build the words added since the last look into one,
        and merge FANIN of a size class into one until no class holds FANIN."""
        with self._lock:
            levels = list(self._levels)
            if self._pruned:
                levels = self._refreshed(levels)
            if self._pending:
                levels.append(build(self._pending))
            while (full := crowded(levels)) is not None:
                merged_words = frozenset().union(*(level.words for level in full))
                taken = {id(level) for level in full}
                levels = [level for level in levels if id(level) not in taken]
                levels.append(build(word for word in merged_words if self._live(word)))
            # the new automata first, then the words they hold leave `_pending`: a text scanned meanwhile, without
            # the lock, that finds nothing pending goes through automata that hold them (the other order left a
            # window in which a value just added was in neither)
            self._levels = tuple(level for level in levels if level.words)
            self._pending = set()
            self._pruned = False

    def _refreshed(self, levels: list[Level]) -> list[Level]:
        """Each automaton whose live words are fewer than half of its own rebuilt from those (none: dropped)."""
        out = []
        for level in levels:
            live = [word for word in level.words if self._live(word)]
            if 2 * len(live) >= len(level.words):
                out.append(level)
            elif live:
                out.append(build(live))
        return out

    def automata(self) -> list[int]:
        """How many words each automaton a text goes through holds (once the set has settled)."""
        self._settle()
        return [len(level.words) for level in self._levels]

    def snapshot(self) -> tuple[Counter[str], set[str]]:
        """What is held and kept now (for `restore`)."""
        with self._lock:
            return self._counts.copy(), set(self._released)

    def restore(self, state: tuple[Counter[str], set[str]]) -> None:
        """Back to a `snapshot`, exactly: nothing else masked (one automaton rebuilt from it)."""
        counts, released = state
        with self._lock:
            self._counts, self._released = counts.copy(), set(released)
            self._pending, self._pruned = set(), False
            words = [*counts, *released]
            self._levels = (build(words),) if words else ()
