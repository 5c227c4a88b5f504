"""The errors the wire raises. Each room maps them to its own: the collectors' SDK to `Transient`, `Interrupted`
or `BadResponse` (sdk/http.py), the sinks to their batch failures (sinks/http.py)."""

from __future__ import annotations

from http.client import HTTPException


class AddressRefused(Exception):
    """A connection to a non-public address from a host the collector does not trust."""


class Stopping(Exception):
    """The owner's stop cutoff has passed: the request was not started (deadline.py)."""


class WireError(Exception):
    """An exchange that did not end cleanly: its connection is closed, never reused, and the answer not trusted."""


class InterimRefused(WireError, HTTPException):
    """Interim (1xx) answers past their bound, or a `101 Switching Protocols` nobody asked for (answers.py). An
    `HTTPException`, so urllib3 drops the connection as for any protocol error."""


class AnswerUnclear(WireError):
    """Bytes came after the end of an answer as its framing says (answers.py): the server said more than it was
    asked, and which answer belongs to which request is no longer known."""


class BodyTooLarge(WireError):
    """A body over a cap (answers.py): `length` is the size the answer declared (None when it came without one)."""

    def __init__(self, cap: int, length: int | None):
        self.cap, self.length = cap, length
        told = f" of {length} bytes" if length is not None else ""
        super().__init__(f"body{told} over the {cap}-byte cap")


def wire_error(exc: BaseException | None) -> WireError | None:
    """The WireError behind `exc` (itself, its cause or context, or the error urllib3 and requests wrap: a
    ProtocolError's second argument, a MaxRetryError's `reason`, a ConnectionError's first argument); at most 32
    errors looked at."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo and len(seen) < 32:
        current = todo.pop(0)
        if current is None or any(current is s for s in seen):
            continue
        if isinstance(current, WireError):
            return current
        seen.append(current)
        inner = [getattr(current, "reason", None), current.__cause__, current.__context__, *current.args]
        todo += [error for error in inner if isinstance(error, BaseException)]  # an SSLError's reason is text
    return None
