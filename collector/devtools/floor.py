"""The floor `collector bench` compares the engine with: the least CPU that fetching the same bytes can cost in
this interpreter, measured in the same run, against the same fake (in its own process, no latency), in series.

- a page (a changed page of 100 stars, ~560 KB, gzip): urllib3's pool on a kept-alive connection, gzip undone
  by urllib3, `orjson.loads`, and one plain dict per star with the fields the GitHub connector stores (dates
  parsed) — no checks, no limits, no scheduling, no database; and the same with gzip undone by zlib-ng in one
  call (`floor_ms_per_page_zlib_ng`: the engine inflates with zlib-ng, urllib3 with the standard library);
- a poll (a conditional request answered 304 Not Modified): urllib3's pool, and a raw socket exchange (one
  prebuilt request written, the reply read until the end of its headers) as the bottom line; and urllib3's pool
  polled by as many threads as the bench's concurrency at once (`floor_ms_per_poll_threads`): what threads sharing
  one interpreter lock cost by themselves, each system call a hand-over of it (the engine's threads pay it too).

Each figure is process CPU per request (`time.process_time`), the median of three rounds.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

import orjson
import urllib3
from zlib_ng import zlib_ng

from .fakeapi import FakeGitHub, FakeProcess

TOKEN = "floor-token"
ETAG = 'W/"0-1-10"'  # the fake's ETag of the newest 10 stars of an account with no new stars (version 0)
ACCEPT = "application/vnd.github.star+json"


def cpu_ms(call: Callable[[int], object], count: int, rounds: int = 3) -> float:
    """Median process CPU per call (ms) over `rounds` rounds of `count` calls, after a warm-up."""
    for i in range(min(count, 20)):
        call(i)
    spent = []
    for _ in range(rounds):
        started = time.process_time()
        for i in range(count):
            call(i)
        spent.append((time.process_time() - started) / count * 1000)
    return statistics.median(spent)


def items_of(body: bytes) -> list[dict]:
    """The page's stars as plain dicts: what the connector keeps of each, and nothing else."""
    items = []
    for entry in orjson.loads(body):
        repo = entry["repo"]
        owner = repo["owner"]
        items.append(
            {
                "itemId": str(repo["id"]),
                "source": repo["html_url"],
                "title": repo["full_name"],
                "name": repo["full_name"],
                "repo": repo["name"],
                "description": repo["description"],
                "authorName": owner["login"],
                "authorUrl": owner["html_url"],
                "avatarUrl": owner["avatar_url"],
                "created": datetime.fromisoformat(repo["created_at"]),
                "likedAt": datetime.fromisoformat(entry["starred_at"]),
                "type": "github",
            }
        )
    return items


def cpu_ms_threads(call: Callable[[int], object], count: int, threads: int, rounds: int = 3) -> float:
    """Median process CPU per call (ms) over `rounds` rounds of `count` calls shared by `threads` threads."""
    each = max(count // threads, 1)

    def share() -> None:
        for i in range(each):
            call(i)

    spent = []
    for _ in range(rounds):
        workers = [threading.Thread(target=share) for _ in range(threads)]
        started = time.process_time()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        spent.append((time.process_time() - started) / (each * threads) * 1000)
    return statistics.median(spent)


def raw_exchange(url: str) -> Callable[[int], bytes]:
    """One 304 exchange on a raw kept-alive socket: a prebuilt request written, the reply read to its headers'
    end (a 304 has no body)."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port))
    request = (
        f"GET /user/starred?per_page=10&page=1 HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nAccept: {ACCEPT}\r\nIf-None-Match: {ETAG}\r\n\r\n"
    ).encode()

    def exchange(_: int) -> bytes:
        sock.sendall(request)
        reply = sock.recv(65536)
        while b"\r\n\r\n" not in reply:
            reply += sock.recv(65536)
        return reply

    return exchange


def measure(pages: int = 150, polls: int = 1500, threads: int = 64) -> dict[str, float]:
    """The floor per page and per 304 poll (ms of CPU), against a fake account of 400 generated stars; a poll by
    `threads` threads at once too."""
    with FakeProcess(floor_account()) as url:
        pool = urllib3.PoolManager(maxsize=threads)  # one kept-alive connection per thread
        auth = {"Authorization": f"Bearer {TOKEN}", "Accept": ACCEPT}
        page_headers = {**auth, "Accept-Encoding": "gzip"}

        def body(i: int, by_urllib3: bool) -> bytes:
            """A page's JSON, gzip undone by urllib3 or (`by_urllib3` False) by zlib-ng in one call."""
            response = pool.request(
                "GET",
                f"{url}/user/starred?per_page=100&page={1 + i % 4}",
                headers=page_headers,
                decode_content=by_urllib3,
            )
            if response.status != 200 or response.headers.get("Content-Encoding") != "gzip":
                raise RuntimeError(f"floor: the fake answered {response.status} to a page")
            return response.data if by_urllib3 else zlib_ng.decompress(response.data, 16 + zlib_ng.MAX_WBITS)

        def page(i: int) -> list[dict]:
            return items_of(body(i, True))

        def page_zlib_ng(i: int) -> list[dict]:
            return items_of(body(i, False))

        poll = poller(pool, url)
        exchange = raw_exchange(url)
        if b" 304 " not in exchange(0).split(b"\r\n", 1)[0]:
            raise RuntimeError("floor: the raw exchange was not answered 304")
        result = {
            "floor_ms_per_page": cpu_ms(page, pages),
            "floor_ms_per_page_zlib_ng": cpu_ms(page_zlib_ng, pages),
            "floor_ms_per_poll": cpu_ms(poll, polls),
            "floor_ms_per_poll_socket": cpu_ms(exchange, polls),
            "floor_ms_per_poll_threads": cpu_ms_threads(poll, 2 * polls, threads),
        }
        pool.clear()
    return {name: round(value, 3) for name, value in result.items()}


def poller(pool: urllib3.PoolManager, url: str) -> Callable[[int], None]:
    """One conditional poll of the floor's account through `pool`, which must be answered 304."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": ACCEPT, "If-None-Match": ETAG}

    def poll(_: int) -> None:
        response = pool.request("GET", f"{url}/user/starred?per_page=10&page=1", headers=headers)
        if response.status != 304:
            raise RuntimeError(f"floor: the fake answered {response.status} to a conditional poll")

    return poll


def poll_floor(polls: int = 1500) -> dict[str, float]:
    """`floor_ms_per_poll` alone: urllib3's pool in series, the median of three rounds of `polls` 304s (goal.py
    measures it beside each run it compares with it)."""
    with FakeProcess(floor_account()) as url:
        pool = urllib3.PoolManager(maxsize=1)
        spent = cpu_ms(poller(pool, url), polls)
        pool.clear()
    return {"floor_ms_per_poll": round(spent, 3)}


def floor_account() -> FakeGitHub:
    """The fake the floor polls and pages: one account of 400 generated stars."""
    fake = FakeGitHub()
    fake.add_user(TOKEN, generated=400, seed=1)
    return fake
