"""The secret values the logs never show, by the thousand: every one masked wherever it sits in a text (overlapping
another, a prefix of another, percent-encoded), with case as it was (a value is matched exactly), while other
threads claim and let go of values and log; and the automata a text goes through stay few and their words bounded
however many values pass through."""

from __future__ import annotations

import logging
import random
import string
import threading
from urllib.parse import quote, quote_plus

import pytest

from collector.sdk.redaction import MASK, RELEASED_KEPT, SECRETS, Secrets, install
from collector.sdk.secretset import FANIN, tier

ALPHABET = string.ascii_letters + string.digits


def tokens(count: int, seed: int, extra: str = "") -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(ALPHABET + extra) for _ in range(rnd.randint(8, 60))) for _ in range(count)]


@pytest.mark.parametrize(("count", "batch"), [(3000, 3000), (5000, 37), (12_000, 500)])
def test_thousands_of_secrets_are_each_masked_wherever_they_sit(count, batch):
    secrets, values = Secrets(), tokens(count, seed=count)
    for start in range(0, count, batch):
        secrets.add(values[start : start + batch])
        secrets.redact("a line between two claims")  # the set settles between batches, as in a collector
    rnd = random.Random(batch)
    for value in rnd.sample(values, 200):
        line = f"GET /x?token={value}&y=1 failed: {value}"
        out = secrets.redact(line)
        assert value not in out and out.count(MASK) >= 2
    plain = "run service=github user=someone@example.test mode=normal new_items=0 status=ok"
    assert secrets.redact(plain) == plain


@pytest.mark.parametrize(
    ("held", "text", "expected"),
    [
        (["abcd1234", "1234wxyz"], "x abcd1234wxyz y", f"x {MASK} y"),  # overlapping: one mask, no piece left
        (["1234wxyz", "abcd1234"], "abcd1234wxyz", MASK),
        (["qqqq-rrrr-ssss", "rrrr"], "qqqq-rrrr-ssssX rrrr", f"{MASK}X {MASK}"),  # one inside another
        (["aaaaZ", "Zbbbb", "bbbbQ"], "aaaaZbbbbQ!", f"{MASK}!"),  # a chain of overlaps
        (["secret-1", "secret-2"], "secret-1secret-2", MASK + MASK),  # side by side: two masks, as before
        (["token-abc", "token-abcdef"], "token-abcdef token-abcXYZ", f"{MASK} {MASK}XYZ"),  # a prefix of another
        (["token-abcdef", "token-abc"], "token-abcde", f"{MASK}de"),
        (["hunter2hunter2"], "hunter2hunter2hunter2hunter2", MASK),  # occurrences overlapping one another
    ],
)
def test_overlapping_and_prefix_secrets_leave_no_piece(held, text, expected):
    secrets = Secrets()
    secrets.add(held)
    assert secrets.redact(text) == expected


def test_prefixes_among_thousands_each_mask_their_own_occurrence():
    secrets, base = Secrets(), tokens(2000, seed=3)
    longer = [value + "-and-more" for value in base]
    secrets.add(base + longer)
    for short, long in zip(base[:300], longer[:300], strict=True):
        assert secrets.redact(f"<{long}>") == f"<{MASK}>"
        assert secrets.redact(f"<{short}-and-less>") == f"<{MASK}-and-less>"


@pytest.mark.parametrize("value", ["CaseSensitiveToken1", "MiXeDcAsE-Value-42", "ÄÖÜ-ünïcode-Secret"])
def test_a_value_is_matched_exactly_as_before_case_included(value):
    """As the substring test before: a value is masked as it is held; another casing is another value."""
    secrets = Secrets()
    secrets.add([value])
    assert secrets.redact(f"x {value} y") == f"x {MASK} y"
    assert secrets.redact(f"x {value.swapcase()} y") == f"x {value.swapcase()} y"
    secrets.add([value.swapcase(), value.lower()])
    assert secrets.redact(f"{value} {value.swapcase()} {value.lower()}") == f"{MASK} {MASK} {MASK}"


@pytest.mark.parametrize("held", [["sec\ud800ret-value"], ["plain-secret-9876"], ["\udfff\udfff\udfff\udfff"]])
def test_a_text_with_lone_surrogates_is_searched_like_any_other(held):
    """Text from a server may hold lone surrogates: the search never fails on it, and masks what it holds."""
    secrets = Secrets()
    secrets.add(held + tokens(2000, seed=4))
    text = f"\udfff😀 {held[0]} \ud800 and again {held[0]}"
    assert secrets.redact(text) == f"\udfff😀 {MASK} \ud800 and again {MASK}"


def test_thousands_of_secrets_are_masked_in_their_percent_encoded_forms_too():
    secrets, values = Secrets(), tokens(4000, seed=5, extra="/+= &?%:@")
    secrets.add(values)
    for value in values[::40]:
        for form in {value, quote(value, safe=""), quote_plus(value)}:
            out = secrets.redact(f"oauth_signature_base=GET&{form}&end")
            assert value not in out and form not in out


def test_a_released_value_stays_masked_until_the_set_is_pruned_and_a_held_one_always():
    secrets, held, released = Secrets(), tokens(500, seed=7), tokens(1000, seed=8)
    secrets.add(held + released)
    secrets.remove(released)
    assert all(MASK == secrets.redact(value) for value in released + held)
    shared = "shared-by-two-holders"
    secrets.add([shared])
    secrets.add([shared])
    secrets.remove([shared])
    churn = tokens(RELEASED_KEPT + 2000, seed=9)
    for start in range(0, len(churn), 100):  # claimed and let go of until the released ones are pruned
        secrets.add(churn[start : start + 100])
        secrets.redact("a line")
        secrets.remove(churn[start : start + 100])
    assert all(MASK == secrets.redact(value) for value in held + [shared])


@pytest.mark.parametrize("batch", [1, 16, 256])
def test_the_automata_a_text_goes_through_stay_few_and_their_words_bounded(batch):
    """However many values are claimed and let go of, a text goes through at most FANIN - 1 automata per size class
    (a few for thousands of values), and the automata hold at most twice what is held or kept, plus what came since
    the last prune."""
    secrets, held = Secrets(), tokens(3000, seed=batch)
    secrets.add(held)
    churn = tokens(3 * RELEASED_KEPT, seed=batch + 1)
    for start in range(0, len(churn), batch):
        secrets.add(churn[start : start + batch])
        sizes = secrets.automata()
        secrets.remove(churn[start : start + batch])
        assert len(sizes) <= (FANIN - 1) * (tier(len(held) + len(churn)) + 1)
    assert sum(secrets.automata()) <= 2 * (RELEASED_KEPT + 2 * len(held)) + batch


def test_a_restored_snapshot_masks_exactly_what_it_held():
    secrets = Secrets()
    secrets.add(["kept-value-1234"])
    state = secrets.snapshot()
    secrets.add(["initial", "later-value-5678"])
    secrets.restore(state)
    assert secrets.redact("initial later-value-5678 kept-value-1234") == f"initial later-value-5678 {MASK}"


def test_values_claimed_and_let_go_of_by_many_threads_never_reach_a_log_line():
    """Eight threads claim values, log them through a logger of their own and let them go, while another churns
    thousands of values through the set (settling, merging and pruning the automata): no line shows a value that
    its thread held when it logged."""
    install()
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(f"test.secretset.{id(lines)}")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    stop = threading.Event()
    held_values: list[str] = []

    def worker(seed: int) -> None:
        for value in tokens(300, seed=seed):
            SECRETS.add([value])
            held_values.append(value)
            logger.info("run token=%s also %s", value, quote(value + "/x", safe=""))
            SECRETS.remove([value])

    def churner() -> None:
        values = tokens(2 * RELEASED_KEPT, seed=99)
        while not stop.is_set():
            for start in range(0, len(values), 64):
                SECRETS.add(values[start : start + 64])
                SECRETS.remove(values[start : start + 64])

    background = threading.Thread(target=churner)
    background.start()
    workers = [threading.Thread(target=worker, args=(seed,)) for seed in range(100, 108)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    stop.set()
    background.join()
    assert len(lines) == 8 * 300
    text = "\n".join(lines)
    assert not [value for value in held_values if value in text]


def test_a_value_added_is_found_by_a_text_scanned_while_another_thread_merges_the_automata(monkeypatch):
    """A thread settles the set (the value just added built into an automaton, then FANIN merged into one) while
    another scans a text holding that value: the scan finds it, however the two interleave. Held here at the worst
    moment: the merge under way, the new automaton not yet published."""
    from collector.sdk import secretset

    values = secretset.SecretSet()
    for n in range(FANIN - 1):  # FANIN - 1 automata of the smallest class: the next settle merges
        values.add([f"earlier-value-{n}"])
        values.spans("settled")
    inside, go, builds = threading.Event(), threading.Event(), []
    real_build = secretset.build

    def build(words):
        builds.append(1)
        if len(builds) == 2:  # the merge, after the new value's own automaton was built
            inside.set()
            go.wait(10)
        return real_build(words)

    monkeypatch.setattr(secretset, "build", build)
    values.add(["value-just-added"])
    settling = threading.Thread(target=values.spans, args=("a text",))
    settling.start()
    assert inside.wait(10)
    found: list = []
    scanning = threading.Thread(target=lambda: found.extend(values.spans("token=value-just-added")))
    scanning.start()
    scanning.join(0.5)  # (it waits for the settle to end, or has scanned already)
    go.set()
    settling.join(10)
    scanning.join(10)
    assert found == [(6, 22)]
