"""A raw socket server on 127.0.0.1 that writes exactly the bytes a test scripts: trickles, bombs, bad headers.

`RawServer(script)`: for each connection, `script(conn, request, server)` is called with the socket and the
request head (bytes up to the blank line) and writes what it likes. The server counts what it managed to send
and whether the client hung up early, so tests assert behaviour (was the connection cut?) rather than timing.
Every loop here is bounded in count and time.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable

MAX_SECONDS = 20.0  # no script runs longer than this, whatever the client does


class RawServer:
    def __init__(self, script: Callable[[socket.socket, bytes, RawServer], None]):
        self.script = script
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[bytes] = []
        self.sent = 0
        self.client_gone = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() now rather than at its next 0.2 s timeout
        except OSError:
            pass
        self.thread.join(timeout=60)
        self.sock.close()

    def _serve(self) -> None:
        deadline = time.monotonic() + MAX_SECONDS
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            self.requests.append(head)
            self.script(conn, head, self)
        except OSError:
            self.client_gone.set()
        finally:
            conn.close()

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def trickle(self, conn: socket.socket, data: bytes, every: float = 0.3) -> None:
        """One byte every `every` seconds, until done, the client hangs up or the server stops."""
        for i in range(len(data)):
            if self.stop.is_set():
                return
            try:
                self.send(conn, data[i : i + 1])
            except OSError:
                self.client_gone.set()
                return
            time.sleep(every)


def response(status: str = "200 OK", headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def gzip_bomb(inflated_mb: int) -> bytes:
    """`inflated_mb` MiB of zeros, gzip-compressed (about 1/1000 of that), built without holding it inflated."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1024 * 1024)
    return b"".join(compressor.compress(block) for _ in range(inflated_mb)) + compressor.flush()


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data)
