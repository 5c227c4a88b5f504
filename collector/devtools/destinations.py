"""Local destinations for the sinks of `collector demo` and `collector bench`, on 127.0.0.1 only.

`Receiver`: a webhook receiver in a thread of this process that checks each request's Standard Webhooks signature
(webhook-id, webhook-timestamp, webhook-signature: `v1,` base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed
with the secret's bytes; a timestamp more than five minutes away is refused too) with the standard library's hmac,
and counts the documents it took by id. A request whose signature does not hold is answered 401 and counted.

`Search`: osmem-server, the in-memory OpenSearch-compatible server whose binary ships in the `osmem-server` wheel
(the test extra), started as a process of its own (its quiet and its URL read here: the package's own starter
lets it write to our standard error); `None` from `Search.start()` when it is not installed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOLERANCE_S = 300  # a signed request older or newer than this is refused (Standard Webhooks' own default)


def new_secret() -> str:
    """A signing secret as Standard Webhooks gives one: `whsec_` and the key's bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def verified(secret: str, headers: Any, body: bytes, now: float) -> bool:
    """Whether the request's signature holds for `secret`, and its timestamp is within the tolerance."""
    msg_id, timestamp = headers.get("webhook-id") or "", headers.get("webhook-timestamp") or ""
    given = (headers.get("webhook-signature") or "").split()
    if not msg_id or not timestamp.isdigit() or abs(now - int(timestamp)) > TOLERANCE_S:
        return False
    expected = signature(secret, msg_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in given)


def document_ids(payload: Any) -> list[str]:
    """The ids of the documents a webhook batch carries: a list of documents, or an object holding one (under
    `data`, `items` or `documents`); a document's id is its `id` (else `_id`)."""
    if isinstance(payload, dict):
        payload = next((payload[k] for k in ("data", "items", "documents") if isinstance(payload.get(k), list)), [])
    if not isinstance(payload, list):
        return []
    return [str(doc.get("id", doc.get("_id"))) for doc in payload if isinstance(doc, dict)]


class Receiver:
    """`with Receiver(secret) as url:` — POST a signed batch to `url` (or to any path under it: each path counts
    apart, `stats(path)`); `ids` are the documents taken (a set: a redelivery counts once), `requests` the batches
    answered 2xx, `bad` the requests refused for their signature. A GET on a path answers its stats."""

    def __init__(self, secret: str):
        self.secret = secret
        self.by_path: dict[str, set[str]] = {}
        self.requests = 0
        self.bad = 0
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def ids(self) -> set[str]:
        with self.lock:
            return set().union(*self.by_path.values())

    def take(self, headers: Any, body: bytes, path: str = "/hook") -> int:
        """The answer's status for one request, what it carried recorded."""
        if not verified(self.secret, headers, body, time.time()):
            with self.lock:
                self.bad += 1
            return 401
        try:
            ids = document_ids(json.loads(body))
        except ValueError:
            return 400
        with self.lock:
            self.by_path.setdefault(path, set()).update(ids)
            self.requests += 1
        return 200

    def stats(self, path: str = "/") -> dict[str, int]:
        """Documents taken at `path` or under it, and (of every path) the batches taken and the requests refused."""
        with self.lock:
            taken = set().union(*(ids for p, ids in self.by_path.items() if p.startswith(path)))
            return {"received": len(taken), "requests": self.requests, "bad_signatures": self.bad}

    def __enter__(self) -> str:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.answer(receiver.take(self.headers, body, self.path), b"{}")

            def do_GET(self) -> None:  # noqa: N802
                self.answer(200, json.dumps(receiver.stats(self.path)).encode())

            def answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # quiet: the demo prints its own lines
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="receiver", daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def receive_in_child(conn: Any, secret: str) -> None:
    """A Receiver in a process of its own (spawned.py): sends its URL, serves until the parent's end closes."""
    with Receiver(secret) as url:
        conn.send(url)
        try:
            conn.recv()
        except EOFError:
            pass


def stall_in_child(conn: Any) -> None:
    """A destination that takes every connection and never answers (spawned.py): sends its URL, holds the
    connections until the parent's end closes. Each delivery to it runs into its sink's timeout."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    held: list[socket.socket] = []

    def hold() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=hold, daemon=True).start()
    conn.send(f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        conn.recv()
    except EOFError:
        pass
    listener.close()


def receiver_stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return dict(json.loads(answer.read()))


def osmem_binary() -> str | None:
    """osmem-server's binary: OSMEM_SERVER_BIN, else the one in the `osmem-server` wheel (found, not imported: an
    optional tool, not a dependency), else None."""
    import importlib.util
    from pathlib import Path

    if os.environ.get("OSMEM_SERVER_BIN"):
        return os.environ["OSMEM_SERVER_BIN"]
    spec = importlib.util.find_spec("osmem_server")
    if spec is None or spec.origin is None:
        return None
    bundled = Path(spec.origin).parent / "bin" / "osmem-server"
    return str(bundled) if bundled.is_file() else None


class Search:
    """osmem-server in a process of its own (its stdin a pipe: it ends when that closes, or when this process
    does): `url`, `pid`, `version`; `count(index)` and `search(index, text)`."""

    def __init__(self, process: subprocess.Popen, ready: dict):
        self.process = process
        self.url: str = ready["url"]
        self.pid: int = process.pid
        self.version: str = str(ready.get("version", ""))

    @classmethod
    def start(cls, limit_s: float = 30.0) -> Search | None:
        """The server on a free port, once it said where; None when osmem-server is not installed."""
        found = osmem_binary()
        if found is None:
            return None
        command = [found, "--parent-pid", str(os.getpid()), "--no-ja"]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        ready: dict = {}

        def read() -> None:  # its first JSON line with a `url` says it listens
            for line in process.stdout or ():
                try:
                    said = json.loads(line)
                except ValueError:
                    continue
                if isinstance(said, dict) and "url" in said:
                    ready.update(said)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(limit_s)
        if not ready:
            process.kill()
            process.wait()
            raise RuntimeError(f"osmem-server did not start within {limit_s:g} s")
        return cls(process, ready)

    @staticmethod
    def installed() -> bool:
        return osmem_binary() is not None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def count(self, index: str) -> int:
        """Documents in `index` once refreshed (0 when there is no such index: nothing made it)."""
        self.request("POST", f"/{index}/_refresh")
        status, answer = self.request("GET", f"/{index}/_count")
        return int(answer["count"]) if status == 200 else 0

    def search(self, index: str, text: str, field: str = "title") -> list[dict]:
        status, answer = self.request("POST", f"/{index}/_search", {"query": {"match": {field: text}}, "size": 3})
        return list(answer["hits"]["hits"]) if status == 200 else []

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Search:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def words(titles: Iterable[str]) -> str:
    """A word to search for: the most common word of the titles (owner/repo names split on / - _ .)."""
    import re
    from collections import Counter

    counted = Counter(w for t in titles for w in re.split(r"[/\-_.\s]+", t.lower()) if len(w) > 2)
    return counted.most_common(1)[0][0] if counted else ""
