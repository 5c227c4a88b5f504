"""The way of one item from its store to a webhook receiver (docs/ARCHITECTURE.md, "The way of one item"): the
collector/ files it crosses, and who calls whom on it, watched with sys.setprofile over a real delivery (mongomock,
a real local receiver) — the measurement that keeps issue 43's promise: fewer files than before (20 traced), each
step one call chain (a file asks another once for what it needs; nothing calls back into a file it was called
from)."""

from __future__ import annotations

import http.client
import random
import sys
import threading
from collections import Counter
from pathlib import Path

import mongomock

import collector
from collector.sdk import headers as sdk_headers
from collector.settings import load_settings
from collector.sinks.service import SinkService
from collector.sinks.store import QUEUE

from helpers.fakesink import Clock, add_items, settle
from helpers.sinkservers import WEBHOOK_SECRET, WebhookReceiver

PKG = str(Path(collector.__file__).resolve().parent) + "/"
# the parts of a round that carry the item (the round's housekeeping — the lease, indexes, registration, the
# walks, figures — is not the item's way): the function of the service, or the mover, each step hangs from
STEPS = ("move", "_deliver", "_collect", "_write_outcomes")
Edge = tuple[str, str, str]  # (step, caller's file, callee's file)


def collector_file(frame) -> str | None:
    """The collector/ file of the innermost collector frame from `frame` outwards."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(PKG):
            return frame.f_code.co_filename.removeprefix(PKG)
        frame = frame.f_back
    return None


def step_of(frame) -> str | None:
    """The item-carrying step a call belongs to: on the service's thread the outermost of STEPS on its chain; on
    a sink's worker thread a delivery (not the sink's making and prepare), and the deadline watch, the request."""
    if threading.current_thread().name.startswith("http-deadlines"):
        return "request"
    found = None
    while frame is not None:
        if frame.f_code.co_filename.startswith(PKG) and frame.f_code.co_name in (*STEPS, "deliver_batch"):
            found = "request" if frame.f_code.co_name == "deliver_batch" else frame.f_code.co_name
        frame = frame.f_back
    return found


def trace_one_item() -> tuple[bool, list[Edge]]:
    """Deliver one marked item to a real receiver, round after round (as `collector sink` does), recording each
    call from one collector file into another on the item's steps; whether it arrived and was unqueued."""
    db = mongomock.MongoClient(tz_aware=True)["likeastore_test"]
    edges: list[Edge] = []
    lock = threading.Lock()

    def profile(frame, event, _arg):
        if event != "call" or not frame.f_code.co_filename.startswith(PKG):
            return
        callee, caller = frame.f_code.co_filename.removeprefix(PKG), collector_file(frame.f_back)
        if caller is not None and caller != callee and (step := step_of(frame)) is not None:
            with lock:
                edges.append((step, caller, callee))

    with WebhookReceiver() as receiver:
        environ = {
            "SINKS": "hooks",
            "SINK_HOOKS_KIND": "webhook",
            "SINK_HOOKS_URL": receiver.url,
            "SINK_HOOKS_SECRET": WEBHOOK_SECRET,
            "ALLOW_PRIVATE_HOSTS": "true",
        }
        settings = load_settings(environ=environ, env="test", read_dotenv=False)
        clock = Clock()
        service = SinkService(db, settings, owner="one", clock=clock, rng=random.Random(3))
        ids = add_items(db, 1)

        def done() -> bool:
            unqueued = db[QUEUE].count_documents({}) == 0 and db.items.count_documents({"sinkPending": True}) == 0
            return receiver.ids() == set(ids) and unqueued

        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            for _ in range(30):
                service.step()
                settle(service)
                if done():
                    break
                clock.advance(1)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
        service.stop(5)
        return done(), edges


def test_one_item_crosses_at_most_18_files_each_step_one_call_chain(monkeypatch):
    # as in `collector sink`: http.client's own header parser (the collectors' Http puts sdk/headers.py's in its
    # place for its process; a test before this one may have made one)
    monkeypatch.setattr(http.client, "parse_headers", sdk_headers._STDLIB)
    delivered, edges = trace_one_item()
    assert delivered
    files = {f for _, caller, callee in edges for f in (caller, callee)}
    assert "sinks/builtin/webhook.py" in files and "sinks/mover.py" in files and "net/connections.py" in files
    assert len(files) <= 18, sorted(files)
    for step in {s for s, _, _ in edges}:
        calls = {(a, b) for s, a, b in edges if s == step}
        assert not cycles(calls), f"{step}: a file called back from one it called: {cycles(calls)}"
    counts = Counter(edges)
    # the service asks a lane once for its turn and hands it the batches once; the batcher never asks it
    assert counts["_deliver", "sinks/service.py", "sinks/lane.py"] <= 2 * rounds_with(edges, "_deliver")
    assert not [e for e in edges if e[1] == "sinks/batches.py" and e[2] == "sinks/lane.py"]
    # a lane's finished batches taken by the outcomes once, the outcomes written in one pass, the streaks theirs
    taken = counts["_collect", "sinks/service.py", "sinks/outcomes.py"]
    assert taken and counts["_collect", "sinks/service.py", "sinks/lane.py"] == taken
    assert not [e for e in edges if e[1] == "sinks/service.py" and e[2] == "sinks/health.py"]
    assert not [e for e in edges if e[2] in ("sinks/builtin/_common.py", "net/body.py")]


def rounds_with(edges: list[Edge], step: str) -> int:
    """How many times the service started `step` (each start is a call from guard.py or the round into it)."""
    return sum(1 for s, caller, callee in edges if s == step and callee == "sinks/service.py")


def cycles(calls: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The calls that close a cycle: B calls into A while A (directly or through others) calls B."""
    reach: dict[str, set[str]] = {}
    for a, b in calls:
        reach.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(reach.get(node, ()))
        return False

    return sorted((a, b) for a, b in calls if reaches(b, a))


def test_the_callback_check_bites():
    assert cycles({("a.py", "b.py"), ("b.py", "a.py")}) == [("a.py", "b.py"), ("b.py", "a.py")]
    assert cycles({("a.py", "b.py"), ("b.py", "c.py"), ("c.py", "a.py"), ("c.py", "d.py")}) == [
        ("a.py", "b.py"),
        ("b.py", "c.py"),
        ("c.py", "a.py"),
    ]
    assert cycles({("a.py", "b.py"), ("a.py", "c.py"), ("b.py", "c.py")}) == []
