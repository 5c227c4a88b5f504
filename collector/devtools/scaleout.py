"""The history walk shared by several collectors, each in a process of its own, under leases on one database: the
scale-out docs/performance.md assumes (one instance per core), measured on the bench's workload.

Each child builds a `Collector` on the database at `uri` (a real MongoDB, or the mongowire stand-in) with its own
instance id and `concurrency` networks in flight and says it is ready; once all are, the parent prepares the
database (the bench drops the index a stand-in enforces by scanning, which each collector creates when it is
built) and lets them go together. They serve initial mode until all of them together have brought every network to
normal mode. The walk's wall time runs from the barrier to the
last network done, in any process; its CPU is the children's, the database's calls counted apart as in the bench.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..engine import Collector
from ..settings import Settings
from .meter import Meter, reached_normal
from .spawned import NoAnswer, answer, spawn

LIMIT_S = 600.0  # a walk that has not ended by then is reported as an error, not waited for
START_S = 60.0  # how long the children and the parent wait for one another at the start


class SharedMeter(Meter):
    """Counts, across processes, runs that brought a network to normal mode; stops every process at the target."""

    def __init__(self, target: int, done: Any, stop: Any):
        super().__init__(target, reached_normal)
        self.shared, self.stop = done, stop
        self.last = 0.0  # monotonic time of this process's last counted run (system-wide clock on Linux)

    def count(self) -> None:
        self.last = time.monotonic()
        with self.shared.get_lock():
            self.shared.value += 1
            if self.shared.value >= self.target:
                self.stop.set()


def child(conn: Any, uri: str, name: str, settings: Settings, timer: Callable, target: int, shared: tuple) -> None:
    """One collector of the walk (run in a spawned process); sends back its figures or why it could not.
    `timer(collector)` wraps its store's calls to add up their CPU (the bench's `time_store`)."""
    from pymongo import MongoClient

    done, stop, ready, go = shared
    client: Any = MongoClient(uri, tz_aware=True)
    try:
        meter = SharedMeter(target, done, stop)
        collector = Collector(client[name], settings, observers=[meter])
        spent = timer(collector)
        ready.wait(timeout=START_S)
        go.wait(timeout=START_S)
        started, cpu = time.monotonic(), time.process_time()
        limit = started + LIMIT_S
        collector.serve("initial", should_stop=lambda: stop.is_set() or time.monotonic() > limit, wait=stop.wait)
        cpu = time.process_time() - cpu
        collector.close()
        figures = {"start": started, "last": meter.last, "cpu_s": cpu, "db_s": spent["db"], "pages": meter.pages}
        conn.send(("ok", {**figures, "errors": meter.errors, "finished": stop.is_set()}))
    except Exception as exc:  # the parent raises it: a bench that cannot measure says why
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        client.close()


def _answer(pipe: Any) -> tuple[str, Any]:
    try:
        return answer(pipe)
    except NoAnswer as exc:
        return ("error", f"a collector process: {exc}")


def walk(
    uri: str,
    name: str,
    settings: Settings,
    processes: int,
    target: int,
    prepare: Callable[[], None],
    timer: Callable[[Collector], dict],
) -> dict:
    """The walk by `processes` collectors of `settings` (each its concurrency) on the database `name` at `uri`,
    seeded with `target` networks in initial mode, `prepare()` called once they are built: wall time, CPU and
    database CPU summed over the processes, pages."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    shared = (context.Value("i", 0), context.Event(), context.Barrier(processes + 1), context.Barrier(processes + 1))
    children = [spawn(child, uri, name, settings, timer, target, shared) for _ in range(processes)]
    pipes = [pipe for _, pipe in children]
    try:
        _start(shared, pipes, prepare)
        answers = [_answer(pipe) for pipe in pipes]
    finally:
        shared[1].set()
        for process, _ in children:
            process.join(timeout=60)
    return totals(answers)


def _start(shared: tuple, pipes: list, prepare: Callable[[], None]) -> None:
    """Once every child is built, `prepare()`, then every child goes. If any of it fails, the children still
    waiting give up at once and say why they stopped; RuntimeError with what they said."""
    try:
        shared[2].wait(timeout=START_S)
        prepare()
        shared[3].wait(timeout=START_S)
    except Exception as exc:
        for barrier in shared[2:]:
            barrier.abort()
        said = [_answer(pipe)[1] for pipe in pipes if pipe.poll(START_S)]
        why = f"{type(exc).__name__}: {exc}"
        raise RuntimeError(f"scale-out walk could not start ({why}); children: {said}") from None


def totals(answers: list[tuple[str, Any]]) -> dict:
    """The walk's figures from the children's answers: wall time from the first start to the last network done,
    CPU and database CPU summed, pages; RuntimeError if a child failed or did not finish."""
    failed = [value for status, value in answers if status != "ok"]
    if failed:
        raise RuntimeError(f"scale-out walk: {failed[0]}")
    results = [value for _, value in answers]
    errors = [error for result in results for error in result["errors"]]
    if errors or not all(result["finished"] for result in results):
        raise RuntimeError(f"scale-out walk did not finish cleanly: {errors[:3] or 'time limit'}")
    return {
        "wall_s": max(result["last"] for result in results) - min(result["start"] for result in results),
        "cpu_s": sum(result["cpu_s"] for result in results),
        "db_s": sum(result["db_s"] for result in results),
        "pages": sum(result["pages"] for result in results),
        "pages_per_process": [result["pages"] for result in results],
    }
