"""One connection of the polls' lane (pollloop.py) and one exchange on it at a time: llhttp's callbacks (httptools)
fill the `Answer`, within the head's and the body's caps; what it refuses stops the parser and says why."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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


Ended = Callable[["Answer | None", "BaseException | None"], None]


class Exchange(asyncio.Protocol):
    """One connection, one exchange at a time: llhttp's callbacks fill the answer, and `ended(answer, error)` (given
    to `begin`) hears how it ended, once, after the read that ended it was parsed whole."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.generation = 0  # the lane's address policy it was opened under
        self.parser = httptools.HttpResponseParser(self)
        self.ended: Ended | None = None  # None: idle, or the exchange has ended
        self.max_bytes = 0
        self.answer = Answer(0, "", [])
        self.head_bytes = self.body_bytes = self.messages = 0
        self.complete = False  # llhttp saw the answer's end
        self.headed = False  # llhttp saw the head's end (what comes after is body, or trailers)
        self.fed = 0  # bytes fed to the parser for this exchange
        self.reusable = False  # and it may be kept alive
        self.broken = False  # closed, or bytes came that nobody asked for: never reused
        self.problem: BaseException | None = None  # what a callback refused (llhttp wraps what they raise)
        self.outcome: tuple[Answer | None, BaseException | None] | None = None  # settled at the cap

    def begin(self, ended: Ended, max_bytes: int) -> None:
        self.ended, self.max_bytes = ended, max_bytes
        self.answer, self.head_bytes, self.body_bytes, self.messages = Answer(0, "", []), 0, 0, 0
        self.complete = self.reusable = self.headed = False
        self.problem = self.outcome = None
        self.fed = 0

    def end(self, answer: Answer | None, error: BaseException | None) -> None:
        ended, self.ended = self.ended, None
        if ended is not None:
            ended(answer, error)

    # --- the transport's callbacks ----------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.ended is None:  # bytes nobody asked for, the connection idle: it is not reused
            self.close()
            return
        if not self.headed:
            self.fed += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.fail(Unsent("an upgrade nobody asked for"))
        except httptools.HttpParserError as exc:
            if self.outcome is not None:  # settled at the cap: the rest is not read
                self.close()
                self.end(*self.outcome)
            elif self.complete:  # the answer was whole, and bytes followed it in the same read
                self.fail(Unsent("bytes after the answer"))
            else:
                self.fail(self.problem or Unsent(f"unreadable answer ({type(exc).__name__})"))
            return
        if self.complete:
            self.end(self.answer, None)
        elif not self.headed and self.fed > MAX_HEAD_BYTES:  # bounded as it comes, whatever the parser keeps of a
            self.fail(Unsent(f"a head of more than {MAX_HEAD_BYTES} bytes"))  # line not ended yet

    def eof_received(self) -> bool:
        self.fail(Unsent("connection closed before the answer was whole"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        self.end(None, Unsent("connection lost before the answer was whole"))

    # --- llhttp's callbacks (what they raise stops the parser: `problem` says why) ----------------------------
    def on_message_begin(self) -> None:
        self.messages += 1
        if self.messages > 1:  # a second answer to one request
            self.refuse(Unsent("bytes after the answer"))

    def on_status(self, status: bytes) -> None:
        self._head(len(status))
        self.answer.reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.headed:  # a chunked body's trailers: dropped, as http.client drops them
            return
        self._head(len(name) + len(value) + 4)
        headers = self.answer.headers
        if len(headers) >= MAX_HEADERS:
            self.refuse(Unsent(f"more than {MAX_HEADERS} headers"))
        headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self.headed = True
        status = self.parser.get_status_code()
        if status < 200:  # interim answers, 101 too, are the session's path's to judge (net/answers.py)
            self.refuse(Unsent(f"interim answer {status}"))
        self.answer.status = status
        declared = declared_length(self.answer.headers)
        if declared is not None and declared > self.max_bytes:
            self.over_cap(declared)

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        if self.body_bytes > self.max_bytes:
            self.over_cap(None)
        self.answer.chunks.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.reusable = self.parser.should_keep_alive()

    # --- the exchange's ends ---------------------------------------------------------------------------------
    def _head(self, size: int) -> None:
        self.head_bytes += size
        if self.head_bytes > MAX_HEAD_BYTES:
            self.refuse(Unsent(f"a head of more than {MAX_HEAD_BYTES} bytes"))

    def refuse(self, problem: BaseException) -> None:
        self.problem = problem
        raise problem

    def over_cap(self, declared: int | None) -> None:
        """Past the cap: an error answer keeps its head with an empty body; a 2xx is refused. The connection is
        dropped either way (the rest of the body is not read)."""
        status = self.answer.status
        if status >= 400:
            self.answer.chunks = []
            self.outcome = (self.answer, None)
        elif 300 <= status < 400 and status != 304:  # a redirect: followed on the session's path, as any other
            self.outcome = (None, Unsent(f"redirect {status}"))
        else:
            self.outcome = (None, TooLarge(self.max_bytes, declared))
        self.refuse(Unsent("over the cap"))  # stops the parser

    def fail(self, error: BaseException) -> None:
        self.close()
        self.end(None, error)

    def close(self) -> None:
        self.broken = True
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
