"""One connection of the polls' lane (pollloop.py) and one exchange on it at a time: llhttp's callbacks (httptools)
fill the `Answer`, within the head's and the body's caps; what it refuses stops the parser and says why."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httptools

MAX_HEADERS = 100  # as http.client
MAX_HEAD_BYTES = 64 * 1024  # the status line and headers together


class Unsent(Exception):
    """The lane could not get an answer it trusts: the request takes the session's path instead."""


class Expired(Exception):
    """The exchange passed its deadline (`cutoff`: the stop's) and was cut."""

    def __init__(self, cutoff: bool):
        super().__init__("cut at the stop's cutoff" if cutoff else "deadline exceeded")
        self.cutoff = cutoff


class TooLarge(Exception):
    """A 2xx answer's body over the cap (`length`: what it declared, if it did)."""

    def __init__(self, cap: int, length: int | None):
        super().__init__(cap, length)
        self.cap, self.length = cap, length


@dataclass
class Answer:
    """A whole answer: status, reason, headers as sent (names and values decoded as Latin-1, as http.client does)
    and the body as received (every Content-Encoding layer still on)."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    chunks: list[bytes] = field(default_factory=list)


class Exchange(asyncio.Protocol):
    """One connection, one exchange at a time: llhttp's callbacks fill the answer."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future | None = None
        self.answer: Answer | None = None
        self.head_bytes = 0
        self.body_bytes = 0
        self.reusable = False
        self.broken = False  # closed, or bytes came when no exchange was under way
        self.unclear = False  # bytes came after the answer's end: which answer is whose is no longer known
        self.problem: Exception | None = None  # what a callback refused (llhttp wraps what they raise)
        self.messages = 0
        self.capped = False  # the answer was settled at the cap: the rest of its body is not read

    def begin(self, waiter: asyncio.Future, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.waiter, self.answer, self.head_bytes, self.body_bytes = waiter, Answer(0, "", []), 0, 0
        self.reusable, self.problem, self.messages, self.capped = False, None, 0, False

    # --- the transport's callbacks ----------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # bytes nobody asked for, the connection idle: it is not reused
            self.broken = True
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.fail(Unsent("an upgrade nobody asked for"))
        except httptools.HttpParserError as exc:
            if self.waiter.done():  # the answer was whole (or settled at the cap), and bytes followed it
                self.unclear = self.unclear or not self.capped
                self.broken = True
                self.close()
            else:
                self.fail(self.problem or Unsent(f"unreadable answer ({type(exc).__name__})"))

    def eof_received(self) -> bool:
        self.broken = True
        if self.waiter is not None and not self.waiter.done():
            self.fail(Unsent("connection closed before the answer was whole"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        if self.waiter is not None and not self.waiter.done():
            self.fail(Unsent("connection lost before the answer was whole"))

    # --- llhttp's callbacks (what they raise stops the parser: `problem` says why) ----------------------------
    def on_message_begin(self) -> None:
        self.messages += 1
        if self.messages > 1:  # a second answer to one request
            self.refuse(Unsent("bytes after the answer"))

    def on_status(self, status: bytes) -> None:
        self._head(len(status))
        assert self.answer is not None
        self.answer.reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head(len(name) + len(value) + 4)
        assert self.answer is not None
        headers = self.answer.headers
        if len(headers) >= MAX_HEADERS:
            self.refuse(Unsent(f"more than {MAX_HEADERS} headers"))
        headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        assert self.answer is not None
        status = self.parser.get_status_code()
        if status < 200:  # interim answers, 101 too, are the session's path's to judge (net/answers.py)
            self.refuse(Unsent(f"interim answer {status}"))
        self.answer.status = status
        declared = declared_length(self.answer.headers)
        if declared is not None and declared > self.max_bytes:
            self.over_cap(declared)

    def on_body(self, body: bytes) -> None:
        assert self.answer is not None
        self.body_bytes += len(body)
        if self.body_bytes > self.max_bytes:
            self.over_cap(None)
            return
        self.answer.chunks.append(body)

    def on_message_complete(self) -> None:
        self.reusable = self.parser.should_keep_alive()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(self.answer)

    # --- the exchange's ends ---------------------------------------------------------------------------------
    def _head(self, size: int) -> None:
        self.head_bytes += size
        if self.head_bytes > MAX_HEAD_BYTES:
            self.refuse(Unsent(f"a head of more than {MAX_HEAD_BYTES} bytes"))

    def refuse(self, problem: Exception) -> None:
        self.problem = problem
        raise problem

    def over_cap(self, declared: int | None) -> None:
        """Past the cap: an error answer keeps its head with an empty body; a 2xx is refused. The connection is
        dropped either way (the rest of the body is not read)."""
        assert self.answer is not None and self.waiter is not None
        self.capped = True
        if self.answer.status >= 400:
            self.answer.chunks = []
            self.waiter.set_result(self.answer)
        else:
            self.waiter.set_exception(TooLarge(self.max_bytes, declared))
        self.broken = True
        self.close()
        self.refuse(Unsent("over the cap"))  # stops the parser; the waiter is settled already

    def fail(self, error: Exception) -> None:
        self.broken = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)
        self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def declared_length(headers: list[tuple[str, str]]) -> int | None:
    for name, value in headers:
        if name.lower() == "content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
