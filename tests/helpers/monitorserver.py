"""The monitor's HTTP server (`collector.monitor.httpd.Server`) answering a handler of the test's, on an asyncio loop
of its own thread, on 127.0.0.1 and a free port: `with MonitorServer(handler) as monitor: ... monitor.port`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from collector.monitor import httpd


class MonitorServer:
    def __init__(self, handler: Callable[..., Any]) -> None:
        self.ready, self.port = threading.Event(), 0
        self.server = httpd.Server(handler)
        self.thread = threading.Thread(target=asyncio.run, args=(self.main(),), daemon=True)

    async def main(self) -> None:
        self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()
        self.port = await self.server.start("127.0.0.1", 0)
        self.ready.set()
        await self.stop.wait()
        await self.server.close()

    def __enter__(self) -> MonitorServer:
        self.thread.start()
        assert self.ready.wait(60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(60)
