"""`collector monitor`: the live web view of the fleet, a process of its own reading MongoDB.

One refresh a second reads the database once (reading.py) on the one database thread, whatever the number of
pages open; the figures are shaped (view.py, rates.py) and serialised once on the event loop, and the same bytes
go to every open page as a server-sent event (httpd.py). A drill-down or an action is one more request on the same
database thread, at most QUEUED waiting at once.

The collectors write their counters every STATS_SECONDS (1 s by default, the heartbeat's stats beat) and the
monitor reads them every second, so what the page shows is at most about two seconds old. While MongoDB cannot be
reached the page says so and keeps the last figures; the next successful read brings it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from importlib import resources
from typing import Any

import orjson
from pymongo.errors import ConnectionFailure

from ..connect.apps import DEFAULT_TIMEOUT
from ..lifecycle import health_answer
from ..ops.ids import NotAnId
from ..sdk.redaction import clip
from ..sdk.timeutil import utcnow
from ..settings import Settings
from ..textout import printable
from . import actions, connecting, reading, view
from .httpd import Answer, Request, Server, event
from .rates import Rates, slim

log = logging.getLogger("collector.monitor")

REFRESH = 1.0  # seconds between two reads of the fleet
QUEUED = 8  # drill-downs and actions waiting for the database thread at most
HEALTH_BOUND = 30.0  # seconds without a refresh after which /healthz answers 503 (a read waits 5-10 s at most)
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/monitor.js": ("monitor.js", "text/javascript; charset=utf-8"),
    "/static/monitor.css": ("monitor.css", "text/css; charset=utf-8"),
}


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=str)


def static_files() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("collector.monitor") / "static"
    return {path: ((folder / name).read_bytes(), kind) for path, (name, kind) in STATIC.items()}


HOST = re.compile(r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<name>[^:\[\]]+))(?::[0-9]{1,5})?")


def own_names(host: str) -> frozenset[str]:
    """The names this machine answers to besides its addresses: the address or name it listens on (--host), its
    host name and fully qualified name, localhost (lower case, without a trailing dot)."""
    names = {host.strip().strip("[]"), socket.gethostname(), socket.getfqdn(), "localhost"}
    return frozenset(name.lower().rstrip(".") for name in names if name.strip())


def local_host(header: str, allowed: frozenset[str]) -> bool:
    """Whether a request's Host names this machine by address, as `localhost`, or as a name in `allowed` (its own
    names, `own_names`): a page of another site whose name was made to resolve here (DNS rebinding) is refused."""
    found = HOST.fullmatch(header.strip(" \t"))
    if found is None:
        return False
    if found["ip6"]:  # brackets hold an IPv6 address, nothing else
        return is_address(found["ip6"], 6)
    name = found["name"].lower().rstrip(".")
    return name in allowed or name == "localhost" or is_address(name, 4)


def is_address(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False


class Database:
    """Whether the last read reached MongoDB, and since when it has not."""

    def __init__(self) -> None:
        self.ok = True
        self.error: str | None = None
        self.since: datetime | None = None

    def failed(self, reason: str, now: datetime) -> None:
        if self.ok:
            log.warning("monitor: %s; retrying every second", reason)
        self.ok, self.since = False, self.since or now
        self.error = printable(clip(reason, 300))

    def reached(self) -> None:
        if not self.ok:
            log.warning("monitor: MongoDB reachable again")
        self.ok, self.error, self.since = True, None, None

    def view(self) -> dict[str, Any]:
        return {"ok": self.ok, "error": self.error, "since": self.since}


def type_of(exc: Exception) -> str:
    return type(exc).__name__


class Monitor:
    def __init__(
        self,
        db: Any,
        *,
        token: str = "",
        heartbeat_seconds: float = 15.0,
        lease_seconds: float = reading.LEASE_DEFAULT,
        version: str = "",
        describe: Callable[[Exception], str] = type_of,
        allowed_hosts: frozenset[str] = frozenset(),
        commands: Callable[[], int] | None = None,
        clock: Callable[[], datetime] = utcnow,
        settings: Settings | None = None,
        connect_timeout: float = DEFAULT_TIMEOUT,
    ):
        self.db, self.token, self.heartbeat_seconds, self.version = db, token, heartbeat_seconds, version
        self.lease_seconds = lease_seconds  # LEASE_SECONDS: a lease further ahead is stale
        self.describe = describe  # a database error in one line, the URI's password masked
        self.allowed_hosts, self.clock = allowed_hosts, clock
        self.commands = commands  # the database commands sent since the start, when counted
        # the refresh has a database thread of its own: no search or action, however many, delays it
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="monitor-refresh")
        self.requests = ThreadPoolExecutor(1, thread_name_prefix="monitor-requests")
        self.queued = 0
        self.server = Server(self.handle)
        self.rates = Rates()
        self.cadence = reading.Cadence(REFRESH)
        self.database = Database()
        self.refusals = actions.Refusals()
        self.files = static_files()
        self.fleet: list[dict[str, Any]] = []
        self.work: dict[str, Any] | None = None
        self.snapshot: bytes = b"{}"
        self.history: bytes | None = None
        self.reads = 0  # refreshes that read the database (the cost a test and the docs measure)
        self.refreshed = time.monotonic()  # when the refresh last went round, read or not (liveness)
        self.settings = settings  # the application credentials of the connect flows, TOKEN_KEY, the HTTP client's
        self.connections = (
            connecting.Connections(db, settings, self.on_db_thread, timeout=connect_timeout, now=clock)
            if settings is not None
            else None
        )

    # -- the refresh: one set of reads, one serialisation, every page --

    async def refresh_forever(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            started = loop.time()
            await self.refresh()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, REFRESH - (loop.time() - started)))

    async def refresh(self) -> None:
        self.refreshed = time.monotonic()
        now = self.clock()
        loop = asyncio.get_running_loop()
        try:
            docs, work = await loop.run_in_executor(self.pool, self.read, now)
        except ConnectionFailure as exc:  # unreachable, or not answering in time
            self.database.failed(f"cannot reach MongoDB ({self.describe(exc)})", now)
            self.publish(now, None)
            return
        except Exception as exc:  # a command refused, a document no code expected: said as what it is
            log.warning("monitor: reading MongoDB failed", exc_info=True)
            self.database.failed(f"cannot read MongoDB ({type(exc).__name__}: {self.describe(exc)})", now)
            self.publish(now, None)
            return
        self.database.reached()
        point = self.rates.update(docs, now.timestamp())
        self.fleet = view.fleet(docs, now, self.heartbeat_seconds, point)
        if work is not None:
            self.work = view.work(work, now)
        self.history = None
        self.publish(now, point)

    def read(self, now: datetime) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """On the database thread: the fleet every time, the work when its cadence says so."""
        self.reads += 1
        docs = reading.read_fleet(self.db, now)
        if not self.cadence.due(time.monotonic()):
            return docs, None
        started = time.monotonic()
        work = reading.read_work(self.db, now, self.lease_seconds)
        self.cadence.took(time.monotonic() - started, time.monotonic())
        return docs, work

    def publish(self, now: datetime, point: dict[str, Any] | None) -> None:
        last = point or {"t": now.timestamp(), "total": {}, "by": {}, "kinds": {}, "cpu": {}}
        snapshot = {
            "at": now,
            "database": self.database.view(),
            "monitor": {
                "version": self.version,
                "actions": bool(self.token),
                "viewers": len(self.server.streams),
                "connections": self.server.connections,
                "accepted": self.server.accepted,
                "heldBytes": sum(self.server.held().values()),  # written for clients, not yet taken by them
                "cut": dict(self.server.closed),  # connections closed to make room or for reading too slowly
                "refreshes": self.reads,
                "commands": self.commands() if self.commands else None,
            },
            "fleet": self.fleet[: view.MAX_ROWS],
            "fleetCount": len(self.fleet),
            "rates": {**last["total"], "errorsByKind": last["kinds"]},
            "point": slim(point) if point is not None else None,
            "work": self.work,
        }
        self.snapshot = dumps(snapshot)
        self.server.broadcast(event("snapshot", self.snapshot))

    def history_event(self) -> bytes:
        if self.history is None:
            self.history = event("history", dumps({"points": self.rates.history()}))
        return self.history

    # -- requests --

    async def handle(self, request: Request) -> Answer:
        if not local_host(request.headers.get("host", ""), self.allowed_hosts):
            return Answer.json(421, {"ok": False, "message": "this monitor answers to its own address only"})
        if request.method == "POST":
            return await self.act(request)
        if request.method != "GET":
            return Answer.json(405, {"ok": False, "message": "GET or POST"})
        if request.path in self.files:
            body, kind = self.files[request.path]
            return Answer(200, body, kind)
        if request.path == "/events":
            return Answer(
                200,
                b"",
                "text/event-stream",
                stream=b"retry: 2000\n\n" + self.history_event() + event("snapshot", self.snapshot),
            )
        if request.path == "/api/snapshot":
            return Answer(200, self.snapshot)
        if request.path == "/api/networks":
            return await self.search(request.query.get("q", [""])[0])
        if request.path == connecting.CALLBACK:
            return connecting.came_back(request, self.connections)
        if request.path == "/api/services":
            return Answer(200, dumps({"services": connecting.services()}))
        health = health_answer(self, request.path)
        if health is not None:
            return Answer(health[0], health[1], "text/plain; charset=utf-8")
        return Answer.json(404, {"ok": False, "message": "no such page"})

    async def on_db(self, work: Callable[[], Any]) -> Any:
        if self.queued >= QUEUED:
            raise actions.Busy()
        self.queued += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.requests, work)
        finally:
            self.queued -= 1

    def on_db_thread(self, work: Callable[[], Any]) -> Any:
        """`work` on the database thread, from another thread (a connect flow's), waited for."""
        return self.requests.submit(work).result()

    async def search(self, query: str) -> Answer:
        def find() -> dict[str, Any]:
            now, found = self.clock(), reading.search(self.db, query)
            shown = [view.network(n, now, reading.items_of(self.db, n)) for n in found.networks]
            return {"networks": shown, "more": found.more, "slow": found.slow, "bound": reading.FOUND}

        try:
            found = await self.on_db(find)
        except actions.Busy:
            return Answer.json(503, {"networks": [], "query": view.text(query, 200), "error": "busy, try again"})
        except NotAnId as refused:  # an id is an id: a query typed as one is refused, never run
            return Answer.json(400, {"networks": [], "query": view.text(query, 200), "error": str(refused)})
        except Exception as exc:
            error = f"cannot search ({type(exc).__name__})"
            return Answer.json(503, {"networks": [], "query": view.text(query, 200), "error": error})
        return Answer(200, dumps({**found, "query": view.text(query, 200), "error": None}))

    async def act(self, request: Request) -> Answer:
        refused = actions.refusal(request, self.token)
        if refused is None and request.path in actions.CONNECT:
            return await self.connect(request)
        if refused is None:
            try:
                action = actions.parse(request, self.settings, self.lease_seconds)
            except actions.Invalid as bad:
                refused = Answer.json(400, {"ok": False, "message": str(bad)})
        if refused is not None:
            self.refusals.note(request, refused, time.monotonic())
            return refused
        try:
            ok, message = await self.on_db(lambda: action.run(self.db, self.clock()))
        except actions.Busy:
            return Answer.json(503, {"ok": False, "message": "busy, try again"})
        except Exception as exc:
            ok, message = False, f"not done: {type(exc).__name__}"
        log.warning("monitor: %s by %s: %s", action.name, action.by, message)
        return Answer.json(200 if ok else 409, {"ok": ok, "message": message})

    async def connect(self, request: Request) -> Answer:
        if self.connections is None:
            return Answer.json(
                409, {"ok": False, "message": "this monitor runs no connect flow (started without settings)"}
            )
        if request.path == "/api/connect":
            return await connecting.started(request, self.connections, self.on_db)
        return connecting.state_of(request, self.connections)

    # -- health (lifecycle.HealthStatus): /healthz and /readyz --

    def health(self) -> tuple[bool, str]:
        """Liveness: the refresh went round within HEALTH_BOUND (it does every second, MongoDB answering or not)."""
        silent = time.monotonic() - self.refreshed
        if silent > HEALTH_BOUND:
            return False, f"refresh silent for {silent:.0f}s (bound {HEALTH_BOUND:.0f}s)"
        return True, "ok: refreshing"

    def readiness(self) -> tuple[bool, str]:
        """Readiness: the last refresh read MongoDB (the page shows the fleet as it is)."""
        if not self.database.ok:
            return False, self.database.error or "database not answering"
        return True, "ok: database answering"

    # -- running --

    async def run(self, host: str, port: int, stop: asyncio.Event, ready: Callable[[int], object]) -> None:
        names = await asyncio.get_running_loop().run_in_executor(None, own_names, host)  # getfqdn may ask DNS
        self.allowed_hosts = self.allowed_hosts | names
        bound = await self.server.start(host, port)
        ready(bound)
        refreshing = asyncio.create_task(self.refresh_forever(stop))
        try:
            await stop.wait()
        finally:
            await refreshing
            await self.server.close()
            if self.connections is not None:
                self.connections.close()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.requests.shutdown(wait=False, cancel_futures=True)
