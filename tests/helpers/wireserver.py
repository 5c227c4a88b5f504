"""A kept-alive HTTP/1.1 server on 127.0.0.1 that answers each request with exactly the bytes a test scripts:
interim answers of any kind, answers nobody asked for, bodies of any size. Requests are read as they come (head,
then a Content-Length body), numbered from 1 across connections, and recorded with the connection they came on.

`WireServer(script)`: for each request, `script(request)` gives a list of pieces, each bytes to send, a number of
seconds to wait, a function to call (once the pieces before it are sent), or CLOSE to hang up; an empty list
answers nothing more on that request. Every loop is bounded in count and time.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

CLOSE = object()
MAX_SECONDS = 20.0
SEND_SECONDS = 20.0  # a client slow to read (a loaded machine) is waited for; cut at 0.2 s, it read a short body


@dataclass
class Request:
    number: int  # 1, 2, ... across every connection
    connection: int  # 1, 2, ... in the order they were accepted
    method: str
    path: str
    head: bytes
    body: bytes


def answer(status: int, body: bytes = b"", headers: dict[str, str] | None = None, reason: str = "X") -> bytes:
    """One answer with a Content-Length (no body for a 1xx, 204 or 304 unless given)."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    if not (100 <= status < 200 or status in (204, 304)) or body:
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(status: int, body: bytes, size: int = 1000) -> bytes:
    parts = [f"HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n".encode()]
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        parts.append(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    return b"".join(parts) + b"0\r\n\r\n"


class WireServer:
    def __init__(self, script: Callable[[Request], list]):
        self.script = script
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[Request] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> WireServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        self.sock.close()
        for thread in self.threads:
            thread.join(timeout=60)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with self.lock:
                self.connections += 1
                number = self.connections
            thread = threading.Thread(target=self._connection, args=(conn, number), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _connection(self, conn: socket.socket, number: int) -> None:
        conn.settimeout(0.2)
        buffer = b""
        started = time.monotonic()
        try:
            while not self.stop.is_set() and time.monotonic() - started < MAX_SECONDS:
                request, buffer = self._read_request(conn, buffer, number, started)
                if request is None:
                    return
                for piece in self.script(request):
                    if piece is CLOSE:
                        return
                    if isinstance(piece, (int, float)):
                        time.sleep(piece)
                    elif callable(piece):  # a test's marker: called once the pieces before it were sent
                        piece()
                    else:
                        conn.settimeout(SEND_SECONDS)
                        conn.sendall(piece)
                        conn.settimeout(0.2)
        except OSError:
            return
        finally:
            conn.close()

    def _read_request(self, conn: socket.socket, buffer: bytes, number: int, started: float):
        while b"\r\n\r\n" not in buffer:
            data = self._recv(conn, started)
            if not data:
                return None, b""
            buffer += data
        head, _, rest = buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(rest) < length:
            data = self._recv(conn, started)
            if not data:
                return None, b""
            rest += data
        method, path = head.split(b"\r\n")[0].decode().split(" ")[:2]
        with self.lock:
            request = Request(len(self.requests) + 1, number, method, path, head, rest[:length])
            self.requests.append(request)
        return request, rest[length:]

    def _recv(self, conn: socket.socket, started: float) -> bytes:
        while not self.stop.is_set() and time.monotonic() - started < MAX_SECONDS:
            try:
                return conn.recv(65536)
            except TimeoutError:
                continue
        return b""
