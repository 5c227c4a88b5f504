"""Reading one answer, from its status line to the connection's return to its pool: the response class of every
checked connection (connections.py) and the one capped body read of the collectors' `Http` and the sinks' client.

An answer belongs to its own request. http.client skips only `100 Continue`: any other interim answer (`102
Processing`, `103 Early Hints`, a 1xx no RFC defines) was taken for the final one, with an empty body, and the
connection went back to the pool with the real answer still to come — read, then, as the answer to the next request
on it. `Response` reads past every interim answer (1xx but 101: their heads are dropped), at most `MAX_INTERIM` of
them and `MAX_INTERIM_BYTES` in all; past that, or on a `101 Switching Protocols` nobody asked for, `InterimRefused`
(urllib3 then drops the connection). Once a body ends where its framing says (Content-Length, the last chunk), any
byte that came with it past its end marks the answer unclear (`unclear`): the socket is shut, so the pool never hands
the connection out again, and the exchange is refused by its caller (`check_clean`: `AnswerUnclear`). Bytes that
arrive later find the connection idle in the pool, where urllib3 drops a connection with anything to read before
reusing it.

Its body is read as it came (every Content-Encoding layer still on), bounded in bytes. A connection goes back to its
pool only after a clean exchange: the final status read (interim ones skipped), the body read to its end as its
framing says, nothing after it. Any other ending closes it instead: a body over the cap, cut short, unclear
(`AnswerUnclear`), or left unread.

- `read_capped`: the whole body, at most `cap` bytes; `BodyTooLarge` past it (a declared length over the cap is
  refused before any byte is read).
- `read_prefix`: at most `limit` bytes kept, the rest neither read nor kept (an error answer's reason); with
  `keep=False` every byte is dropped as it comes (a 2xx whose body no one needs).
- `finish`: the connection back to the pool when the body was read whole and cleanly, else closed.
- `read_end`: `read_prefix`, then `finish`, in one call (an error answer's reason; a 2xx dropped).

Each takes urllib3's HTTPResponse, read with `preload_content=False`.
"""

from __future__ import annotations

import http.client
import socket
from typing import Any

from .errors import AnswerUnclear, BodyTooLarge, InterimRefused

MAX_INTERIM = 16  # interim answers skipped before one request's final answer, at most
MAX_INTERIM_BYTES = 64 * 1024  # and their status lines and heads together
READ_CHUNK = 64 * 1024
NO_CONTENT = frozenset({204, 304})  # statuses that have no body (RFC 9110)


class Response(http.client.HTTPResponse):
    """http.client's response, with interim answers skipped (bounded) and bytes after the body noticed."""

    def __init__(self, sock: Any, *args: Any, **kwargs: Any):
        super().__init__(sock, *args, **kwargs)
        self.wire_sock = sock
        self.interim = 0  # interim answers skipped
        self.unclear = ""  # why the connection must not be reused ("": it may)

    def _read_status(self) -> tuple[str, int, str]:
        budget = MAX_INTERIM_BYTES
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not 100 <= status < 200:
                return version, status, reason
            if status == 101:
                raise InterimRefused("101 Switching Protocols, which no request asked for")
            self.interim += 1
            budget -= len(version) + len(reason) + 5
            if self.interim > MAX_INTERIM:
                raise InterimRefused(f"more than {MAX_INTERIM} interim (1xx) answers")
            budget = self._skip_head(budget)

    def _skip_head(self, budget: int) -> int:
        """Read past an interim answer's header lines, up to its blank line; what is left of `budget`."""
        assert self.fp is not None
        while True:
            line = self.fp.readline(max(budget, 0) + 1)
            budget -= len(line)
            if budget < 0:
                raise InterimRefused(f"interim (1xx) answers over {MAX_INTERIM_BYTES} bytes")
            if line in (b"\r\n", b"\n", b""):  # the end of its head (or of the stream: the next status line says)
                return budget

    def _close_conn(self) -> None:
        """The body ended as its framing says (http.client's reader), or the response is closed (urllib3's
        chunked reader closes it at the last chunk; a caller closes one read halfway, whose connection is dropped
        anyway): on a connection kept alive, nothing may follow the answer until the next request is sent."""
        if self.will_close is False and not self.unclear and self.fp is not None:
            if waiting(self.fp):
                self.unclear = "bytes after the end of the answer"
                shut(self.wire_sock)
        super()._close_conn()  # type: ignore[misc]


def waiting(fp: Any) -> bool:
    """Whether bytes wait in the reader's buffer after the answer, found without a system call (a socket timeout
    set is one, handing the interpreter lock over): while it is asked, the raw reader under the buffer reads
    nothing, so only what the read that ended the answer brought along is seen. Bytes still on their way find
    the connection idle in its pool, where urllib3 drops a connection with anything to read before reusing it."""
    raw = getattr(fp, "raw", None)
    if raw is None:
        return False
    raw.readinto = _nothing
    try:
        return bool(fp.peek(1))
    except (OSError, ValueError):
        return False
    finally:
        del raw.readinto


def _nothing(_buffer: Any) -> None:
    return None  # as a non-blocking reader with nothing to read


def shut(sock: Any) -> None:
    """Shut a socket both ways (the plain socket's call: safe under a TLS one): the pool finds it dropped."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, TypeError, ValueError):
        pass


def declared_length(response: Any) -> int | None:
    """The Content-Length an answer declares, when it is a plain number."""
    length = str(response.headers.get("content-length", "")).strip()
    return int(length) if length.isdigit() else None


def read_capped(response: Any, cap: int) -> list[bytes]:
    """The whole body as it came, at most `cap` bytes (checked clean); BodyTooLarge past it. The caller closes the
    response on any error."""
    length = declared_length(response)
    if length is not None and length > cap:
        raise BodyTooLarge(cap, length)
    if response.status in NO_CONTENT:  # no body by definition: nothing to gather
        response.read(decode_content=False)  # read to its end: the connection is free for the next
        check_clean(response)
        return []
    chunks: list[bytes] = []
    received = 0
    for chunk in response.stream(READ_CHUNK, decode_content=False):
        received += len(chunk)
        if received > cap:
            raise BodyTooLarge(cap, None)
        chunks.append(chunk)
    check_clean(response)
    return chunks


def read_prefix(response: Any, limit: int, keep: bool = True) -> tuple[bytes, bool]:
    """(the first `limit` bytes of the body, or b"" without `keep`; whether it was read whole and cleanly). Past
    `limit` nothing more is read: the caller closes the response (`finish`)."""
    length = declared_length(response)
    if not keep and length is not None and length > limit:  # nothing to keep, and more than may be dropped
        return b"", False
    chunks: list[bytes] = []
    received = 0
    for chunk in response.stream(READ_CHUNK, decode_content=False):
        received += len(chunk)
        if keep:
            chunks.append(chunk)
        if received > limit:
            return b"".join(chunks)[:limit], False
    check_clean(response)
    return b"".join(chunks), True


def check_clean(response: Any) -> None:
    """AnswerUnclear when bytes followed the body (`Response` saw them; its socket is shut)."""
    why = getattr(getattr(response, "_original_response", None), "unclear", "")
    if why:
        response.close()
        raise AnswerUnclear(why)


def read_end(response: Any, limit: int, keep: bool = True) -> bytes:
    """The first `limit` bytes of the body (b"" without `keep`), the rest neither read nor kept; the connection
    back to its pool when the body was read whole and cleanly, else closed."""
    kept, whole = read_prefix(response, limit, keep)
    finish(response, whole)
    return kept


def finish(response: Any, whole: bool) -> None:
    """The connection back to the pool after a body read whole and cleanly; closed otherwise."""
    if whole:
        response.release_conn()
    else:
        response.close()
