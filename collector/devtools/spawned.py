"""Processes the bench's tools start in fresh interpreters (spawned): each gets one end of a pipe and sends its
answer on it. The parent closes the child's end at once, so a child that dies before answering ends the wait
(end of file) instead of leaving the parent waiting for ever (bench.py, goal.py,
fakeapi.py, mongowire.py, scaleout.py); `in_child` runs one measure so."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


class NoAnswer(Exception):
    """The child ended, or the time allowed passed, before it answered."""


def spawn(target: Callable[..., None], *args: Any, daemon: bool = False) -> tuple[Any, Any]:
    """`target(pipe, *args)` started in a fresh interpreter: the process and this side's end of its pipe."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=target, args=(child, *args), daemon=daemon)
    process.start()
    child.close()  # the child's alone: if it dies, recv() ends instead of waiting for ever
    return process, parent


def answer(pipe: Any, timeout: float | None = None) -> Any:
    """The child's answer on `pipe`; NoAnswer if it ended first or `timeout` seconds passed."""
    if timeout is not None and not pipe.poll(timeout):
        raise NoAnswer(f"no answer within {timeout:g} s")
    try:
        return pipe.recv()
    except EOFError:
        raise NoAnswer("it ended without an answer") from None


def _child(conn: Any, call: Callable[..., dict], args: tuple) -> None:
    from ..lifecycle import gc_spaced

    try:
        with gc_spaced():  # the daemon's (daemon/process.py), the floors' measures too (not mongomock's process)
            conn.send(("ok", call(*args)))
    except Exception as exc:  # the parent raises it: a bench that cannot measure says why
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def in_child(call: Callable[..., dict], *args: Any) -> dict:
    """`call(*args)` in a fresh interpreter (spawned), its result sent back."""
    process, pipe = spawn(_child, call, args)
    try:
        status, value = answer(pipe)
    except NoAnswer as exc:
        status, value = "error", f"the measuring process: {exc}"
    finally:
        process.join(timeout=60)
    if status != "ok":
        raise RuntimeError(f"bench: {value}")
    return value
