"""A fake of GitHub's starred API (GET /user/starred) on 127.0.0.1: for the demo, the benchmark and tests.

A real HTTP/1.1 server: page/per_page pagination with Link headers, star+json entries newest first,
x-ratelimit-* headers from a per-token quota window (403 or 429 with remaining 0 once it is used up),
ETag/If-None-Match (a 304 costs no quota, as on GitHub), 401 for an unknown token, and a configurable latency:
an answer leaves `latency` seconds after its request came in, the fake's own work (finding the stars, gzip)
done within that time, as a real server's work is part of the latency its clients see. Done after the wait,
the work of 64 answers due together queued in the fake's one interpreter and added its own spread to the
latency the bench names. Setting `released` lets every answer still waiting leave at once (a test's slow host
that must not hold up the collector's graceful stop).
Histories can be explicit lists or generated on the fly (any number of users and stars, no memory per star; the
stars themselves are stars.py's); `prerender_per_page` has every page of that size rendered and gzipped before
serving (`collector bench`: the server's CPU is then not spent on the cores the collector is measured on, as a
remote server's never is). Each response is written in one piece (see the design notes on delayed ACKs).
`GET /_fake/stats` returns the counters as JSON. `FakeServer` serves in a thread (a thread per connection; a test
can set `released`); `FakeProcess` in a separate process, so that a benchmark's fake does not compete with the
collector for the interpreter, from one event loop (fakeloop.py: the same answers at a fraction of the CPU).
"""

from __future__ import annotations

import gzip
import json
import math
import multiprocessing
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .spawned import NoAnswer, answer, spawn
from .stars import GENERATED_NEWEST, generated_star, generated_star_json, make_star, make_stars

__all__ = [  # the stars are stars.py's, importable from here as well
    "GENERATED_NEWEST",
    "FakeGitHub",
    "FakeProcess",
    "FakeServer",
    "fetch_stats",
    "generated_star",
    "make_star",
    "make_stars",
]


class Raw(bytes):
    """A response body already encoded as JSON."""


class Gzipped(bytes):
    """A response body already encoded as JSON and gzip-compressed (a page rendered before serving)."""


GZIP_OVER = 1024  # bodies longer than this are gzip-encoded for a client that accepts it


@dataclass
class Account:
    stars: list[dict]  # explicit stars, newest first (new ones are added here)
    generated: int = 0  # then this many generated stars
    seed: int = 0
    quota: int | None = None  # this token's own limit (None: the fake's)
    version: int = 0  # changes with every new star: part of the ETag
    window_start: float = -1.0
    used: int = 0

    def __len__(self) -> int:
        return len(self.stars) + self.generated

    def page(self, start: int, stop: int) -> Raw:
        explicit = [json.dumps(star) for star in self.stars[start:stop]]
        first = max(start - len(self.stars), 0)
        last = min(max(stop - len(self.stars), 0), self.generated)
        generated = [generated_star_json(self.seed, k) for k in range(first, last)]
        return Raw(("[" + ", ".join(explicit + generated) + "]").encode())


@dataclass
class FakeGitHub:
    """The fake's state. `quota` requests per `window` seconds per token, windows aligned to the clock."""

    quota: int = 5000
    window: int = 3600
    latency: float = 0.0
    latency_sigma: float = 0.0  # > 0: latency drawn lognormal around `latency`, and 1% of requests 10x slower
    change_share: float = 0.0  # share of conditional polls that find a new star (a changed page, not a 304)
    seed: int = 0
    over_status: int = 403
    accounts: dict[str, Account] = field(default_factory=dict)
    requests: int = 0
    accepted: int = 0
    over_quota: int = 0
    not_modified: int = 0
    accepted_by_window: dict[int, int] = field(default_factory=dict)
    busy_s: float = 0.0  # time past the answers' latencies: writing them, and any lateness (the bench's server time)
    prerender_per_page: int = 0  # > 0: every account's pages of this size rendered and gzipped before serving
    rendered: dict[tuple, Gzipped] = field(default_factory=dict)  # (token, version, page, per_page): body
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=random.Random)
    released: threading.Event = field(default_factory=threading.Event)  # set: every answer leaves now, not later

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["lock"] = state["released"] = None  # locks and events do not pickle; a copy gets its own
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.rng = random.Random(self.seed)

    def delay(self) -> float:
        """This request's latency: fixed, or lognormal with a 1% tail ten times slower."""
        if not self.latency_sigma:
            return self.latency
        with self.lock:
            value = self.latency * self.rng.lognormvariate(0.0, self.latency_sigma)
            return value * 10 if self.rng.random() < 0.01 else value

    def prerender(self) -> None:
        """Render and gzip every account's pages of `prerender_per_page` now, before serving: the server's work for
        them is then done before a client's clock starts, as a remote server's is never on the client's machine
        (`collector bench` walks histories against a fake on the same cores)."""
        per_page = self.prerender_per_page
        with self.lock:
            for token, account in self.accounts.items():
                for page in range(1, max(math.ceil(len(account) / per_page), 1) + 1):
                    body = account.page((page - 1) * per_page, page * per_page)
                    if len(body) > GZIP_OVER:
                        self.rendered[(token, account.version, page, per_page)] = Gzipped(gzip.compress(body, 1))

    def add_user(
        self, token: str, stars: list[dict] | None = None, quota: int | None = None, generated: int = 0, seed: int = 0
    ) -> None:
        with self.lock:
            self.accounts[token] = Account(list(stars or []), generated, seed, quota)

    def star(self, token: str, entry: dict) -> None:
        """The user stars one more repository (it becomes the newest)."""
        with self.lock:
            account = self.accounts[token]
            account.stars.insert(0, entry)
            account.version += 1

    def total_stars(self) -> int:
        with self.lock:
            return sum(len(a) for a in self.accounts.values())

    def stats(self) -> dict:
        with self.lock:
            return {
                "requests": self.requests,
                "accepted": self.accepted,
                "over_quota": self.over_quota,
                "not_modified": self.not_modified,
                "stars": sum(len(a) for a in self.accounts.values()),
                "accepted_by_window": {str(k): v for k, v in self.accepted_by_window.items()},
                "busy_s": self.busy_s,
            }

    def handle(
        self,
        token: str | None,
        query: dict[str, list[str]],
        base_url: str,
        now: float,
        if_none_match: str | None = None,
    ) -> tuple[int, dict[str, str], object]:
        with self.lock:
            self.requests += 1
            account = self.accounts.get(token or "")
            if account is None:
                return 401, {}, {"message": "Bad credentials"}
            start = math.floor(now / self.window) * self.window
            if start != account.window_start:
                account.window_start, account.used = start, 0
            reset = int(start + self.window)
            limit = account.quota or self.quota
            per_page = min(max(_int(query, "per_page", 30), 1), 100)
            page = max(_int(query, "page", 1), 1)
            if if_none_match and page == 1 and self.change_share and self.rng.random() < self.change_share:
                account.stars.insert(
                    0, make_star(1_000_003 + self.requests, GENERATED_NEWEST + timedelta(seconds=self.requests))
                )  # the user starred something since the last poll
                account.version += 1
            etag = f'W/"{account.version}-{page}-{per_page}"'
            if if_none_match == etag:  # conditional requests answered 304 do not count against the quota
                self.not_modified += 1
                return 304, {**_quota_headers(limit, limit - account.used, reset), "ETag": etag}, None
            if account.used >= limit:
                self.over_quota += 1
                return self.over_status, _quota_headers(limit, 0, reset), {"message": "API rate limit exceeded"}
            account.used += 1
            self.accepted += 1
            self.accepted_by_window[int(start)] = self.accepted_by_window.get(int(start), 0) + 1
            headers = {**_quota_headers(limit, limit - account.used, reset), "ETag": etag}
            body = self.rendered.get((token, account.version, page, per_page)) or account.page(
                (page - 1) * per_page, page * per_page
            )
            last = max(math.ceil(len(account) / per_page), 1)
        headers["Link"] = _links(base_url, page, last, per_page)
        return 200, headers, body


def _int(query: dict[str, list[str]], name: str, default: int) -> int:
    try:
        return int(query.get(name, [default])[0])
    except ValueError:
        return default


def _quota_headers(limit: int, remaining: int, reset: int) -> dict[str, str]:
    return {
        "x-ratelimit-limit": str(limit),
        "x-ratelimit-remaining": str(remaining),
        "x-ratelimit-used": str(limit - remaining),
        "x-ratelimit-reset": str(reset),
        "x-ratelimit-resource": "core",
    }


def _links(base_url: str, page: int, last: int, per_page: int) -> str:
    def link(n: int, rel: str) -> str:
        return f'<{base_url}/user/starred?per_page={per_page}&page={n}>; rel="{rel}"'

    rels = []
    if page < last:
        rels += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        rels += [link(1, "first"), link(min(page - 1, last), "prev")]
    return ", ".join(rels)


def answer_request(fake: FakeGitHub, base_url: str, target: str, header: Callable[[str], str | None]) -> Answer:
    """The answer to `GET target` (`header(name)` reads the request's headers), and when it leaves: the fake's
    one place that turns a request into bytes, for both servers (the thread's and the event loop's)."""
    parts = urlsplit(target)
    if parts.path == "/_fake/stats":
        return Answer(render(200, {}, fake.stats()), None)
    if parts.path != "/user/starred":
        return Answer(render(404, {}, {"message": "Not Found"}), None)
    delay = fake.delay()  # the answer leaves `latency` after the request came, the server's work inside it
    auth = header("Authorization") or ""
    token = auth.split(" ", 1)[1] if " " in auth else None
    status, headers, body = fake.handle(token, parse_qs(parts.query), base_url, time.time(), header("If-None-Match"))
    return Answer(render(status, headers, body, gzip_ok="gzip" in (header("Accept-Encoding") or "")), delay)


@dataclass(frozen=True)
class Answer:
    data: bytes
    delay: float | None  # seconds after its request came that it leaves; None: at once, and not counted in busy_s


def render(status: int, headers: dict[str, str], body: object, gzip_ok: bool = False) -> bytes:
    """A whole HTTP/1.1 response, head and body, in one piece."""
    encoding = []
    if isinstance(body, Gzipped):
        payload = bytes(body) if gzip_ok else gzip.decompress(body)
        encoding = ["Content-Encoding: gzip"] if gzip_ok else []
    else:
        payload = b"" if body is None else body if isinstance(body, Raw) else json.dumps(body).encode()
    if gzip_ok and not encoding and len(payload) > GZIP_OVER:  # as GitHub does when asked
        payload = gzip.compress(payload, compresslevel=1)
        encoding = ["Content-Encoding: gzip"]
    lines = [
        f"HTTP/1.1 {status} {reason(status)}",
        f"Date: {formatdate(usegmt=True)}",
        "Content-Type: application/json; charset=utf-8",
        f"Content-Length: {len(payload)}",
        *encoding,
    ]
    lines += [f"{k}: {v}" for k, v in headers.items() if v]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:  # a status of the test's own choosing (`over_status`)
        return ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        fake = self.server.fake
        arrived = time.perf_counter()
        answer = answer_request(fake, self.server.base_url, self.path, self.headers.get)
        if answer.delay is None:
            self.wfile.write(answer.data)
            return
        due = arrived + answer.delay
        wait = due - time.perf_counter()
        if wait > 0 and not fake.released.is_set():
            fake.released.wait(wait)
        self.wfile.write(answer.data)
        with fake.lock:
            fake.busy_s += time.perf_counter() - due  # the answer's writing, and how late past its latency it left

    def log_message(self, format: str, *args) -> None:  # keep the demo's output clean
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    fake: FakeGitHub
    base_url: str


class FakeServer:
    """Serve a FakeGitHub on 127.0.0.1 (a free port) in a background thread: `with FakeServer(fake) as url:`."""

    def __init__(self, fake: FakeGitHub, host: str = "127.0.0.1", port: int = 0):
        self.fake = fake
        if fake.prerender_per_page:
            fake.prerender()
        self.httpd = _Server((host, port), _Handler)
        self.httpd.fake = fake
        self.httpd.base_url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fake-github", daemon=True)

    @property
    def url(self) -> str:
        return self.httpd.base_url

    def __enter__(self) -> str:
        self.thread.start()
        return self.url

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def fetch_stats(url: str) -> dict:
    """The counters of a running fake, read over HTTP."""
    import requests

    return requests.get(f"{url}/_fake/stats", timeout=10).json()


def _serve_in_child(conn, fake: FakeGitHub) -> None:
    from .fakeloop import serve

    if fake.prerender_per_page:
        fake.prerender()

    def respond(base_url: str, target: str, header: Callable[[str], str | None]) -> tuple[bytes, float | None]:
        answer = answer_request(fake, base_url, target, header)
        return answer.data, answer.delay

    def late(seconds: float) -> None:
        fake.busy_s += seconds

    serve(respond, late, conn.send)


class FakeProcess:
    """Serve a FakeGitHub from a separate process: `with FakeProcess(fake) as url:`; `stats()` reads its
    counters over HTTP. The fake is copied into the child: later changes in this process do not reach it."""

    def __init__(self, fake: FakeGitHub):
        self.fake = fake
        self.process: multiprocessing.process.BaseProcess | None = None
        self.url = ""

    def __enter__(self) -> str:
        self.process, pipe = spawn(_serve_in_child, self.fake, daemon=True)
        try:
            self.url = answer(pipe)
        except NoAnswer:
            self.process.join(timeout=10)
            code = self.process.exitcode
            raise RuntimeError(f"fake API: its process ended before serving (exit code {code})") from None
        return self.url

    def stats(self) -> dict:
        return fetch_stats(self.url)

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.join(timeout=10)
