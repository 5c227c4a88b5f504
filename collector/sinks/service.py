"""The sink service: `collector sink` calls `step()` in a loop. Each round, on the calling thread (the only one
that touches the database): the outcomes of finished deliveries are written, the service lease held (only its
holder works; the others stand by and take over when it lapses), new sinks registered, marked items moved to the
queue (mover.py), backfills walked (backfill.py), due entries formed into batches (batches.py: a batch refused
keeps its id and documents for its next try) and handed to the sinks' worker threads (lane.py, delivery.py),
counters and stats written. A database that is away makes a round end early, losing nothing: the
verdicts wait in memory, the marker stays on the items, and the next round goes on."""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from importlib import import_module
from typing import Any

from ..engine.store import unavailable
from ..sdk.redaction import SECRETS
from ..settings import Settings
from ..textout import printable
from .backfill import Walks
from .batches import Batcher
from .config import secret_values, sink_configs
from .figures import SinkFigures, Stats
from .guard import Guard
from .health import lease_line
from .lane import Lane
from .mover import MOVE_BATCH, Unserved, move, register_new
from .outcomes import Outcomes
from .registry import SinkRegistry
from .sdk import Sink, SinkConfig
from .store import SERVICE_LEASE_SECONDS, SinkStore

log = logging.getLogger("collector.sinks")

LEASE_SECONDS = SERVICE_LEASE_SECONDS  # renewed every 5 s; a stand-by takes over this long after a silence
CUT_MARGIN = 1.0  # seconds before the end of a stop's wait at which the requests still running are cut
BUSY, IDLE, DOWN, STANDBY = 0.0, 1.0, 2.0, 5.0  # seconds step() asks to wait before the next round
HttpFactory = Callable[[SinkConfig, Settings, bool], Any]


def utcnow() -> datetime:
    return datetime.now(UTC)


class SinkService:
    def __init__(
        self,
        db: Any,
        settings: Settings,
        *,
        owner: str,
        registry: SinkRegistry | None = None,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        http_factory: HttpFactory | None = None,
        lease_seconds: float = LEASE_SECONDS,
    ):
        self.store = SinkStore(db)
        self.owner, self.host, self.pid = owner, socket.gethostname(), os.getpid()
        self.kinds = registry or SinkRegistry()  # the kinds of sink (not engine/registry.py's connectors)
        self.clock = clock
        self.rng = rng or random.Random()
        self.http_factory = http_factory
        self.lease_seconds = lease_seconds
        self.wakeup = threading.Event()  # set when a delivery or a prepare finishes: a round has work
        self.outcomes = Outcomes(self.store, self.rng)
        self.batcher = Batcher(self.store, self.outcomes)
        self.walks = Walks(self.store)
        self.stats = Stats(self.store)
        self.guard = Guard()  # one sink's part of a round failing on a bad value: logged, the others go on
        self.lanes: dict[str, Lane] = {}
        self.retiring: list[Lane] = []
        self.holds_lease = False
        self.stopping = False
        self.indexed = False
        self.database_up = True
        self.settings = settings
        self._secrets: list[str] = []
        self._renewed: datetime | None = None
        self.unserved = Unserved(self.store, owner)  # registered sinks not configured here: the mover waits
        self._configure(sink_configs(settings, self.kinds))

    # --- the public API ---------------------------------------------------------------------------------------------
    @property
    def outbox_pending(self) -> int:
        return self.stats.outbox_pending

    def step(self) -> float:
        """One round; the seconds to wait before the next (0 when work is waiting)."""
        self.wakeup.clear()
        now = self.clock()
        try:
            wait = self._round(now)
        except Exception as exc:
            if not unavailable(exc):
                raise
            if self.database_up:
                log.warning("sinks: the database is unreachable (%s); nothing is lost, retrying", type(exc).__name__)
            self.database_up = False
            return DOWN
        if not self.database_up:
            log.info("sinks: the database answers again")
        self.database_up = True
        return wait

    def apply_settings(self, settings: Settings) -> None:
        """New settings (a reload): SettingsError leaves everything as it was; a sink whose settings changed
        finishes its deliveries in flight and starts again with the new ones."""
        configs = sink_configs(settings, self.kinds)
        self.settings = settings
        self._configure(configs)

    def stop(self, timeout: float) -> None:
        """No new deliveries, and no more requests of those in flight (the rest of a split batch is not sent);
        wait up to `timeout` for them, all lanes together, write their outcomes, let the lease go. The requests
        still running near the end of `timeout` are cut: their documents' outcomes are not written, and their
        entries, still queued, are delivered again later."""
        self.stopping = True
        deadline = time.monotonic() + timeout
        for lane in self._all_lanes():  # cut a little before the deadline: the cut threads end within it
            lane.cut(max(0.0, timeout - min(CUT_MARGIN, timeout / 4)))
        for lane in self._all_lanes():
            lane.wait(deadline - time.monotonic())
        now = self.clock()
        try:
            self._collect()
            self._write_outcomes(now)
            if self.holds_lease:
                self.store.release_lease(self.owner, now)
        except Exception as exc:
            if not unavailable(exc):
                raise
            log.warning("sinks: the database is unreachable at the stop; unwritten outcomes are delivered again")
        self.holds_lease = False
        for lane in self._all_lanes():
            lane.close()
        SECRETS.remove(self._secrets)

    def snapshot(self) -> dict[str, SinkFigures]:
        """Each configured sink's figures, for the metrics: this process's counters, the last backlog and lag.
        Called on the thread that calls step() (between rounds), like everything here."""
        return {name: self.stats.figures(lane, self.outcomes.totals.get(name)) for name, lane in self.lanes.items()}

    # --- configuration ----------------------------------------------------------------------------------------------
    def _configure(self, configs: list[SinkConfig]) -> None:
        wanted = {c.name: c for c in configs}
        for name, lane in list(self.lanes.items()):
            if wanted.get(name) != lane.config:
                self.retiring.append(self.lanes.pop(name))
        for name, config in wanted.items():
            if name not in self.lanes:
                self.lanes[name] = Lane(config, self._make_sink, self.wakeup)
        SECRETS.add(new := secret_values(configs))
        SECRETS.remove(self._secrets)
        self._secrets = new

    def _make_sink(self, config: SinkConfig) -> Sink:
        """On a worker thread: the kind's class (a broken plugin fails this sink only) with its HTTP client."""
        cls = self.kinds.get(config.kind)
        factory = self.http_factory
        if factory is None:  # the real client (sinks/http.py); tests give their own factory
            factory = import_module(f"{__package__}.http").make_http
        return cls(config, factory(config, self.settings, cls.checks_addresses))

    def _all_lanes(self) -> list[Lane]:
        return [*self.lanes.values(), *self.retiring]

    # --- one round --------------------------------------------------------------------------------------------------
    def _round(self, now: datetime) -> float:
        self._collect()
        self._write_outcomes(now)
        if self.stopping:
            return IDLE
        if not self._lease(now):
            return STANDBY
        if not self.indexed:
            self.store.ensure_indexes()
            self.indexed = True
        configs = [lane.config for lane in self.lanes.values()]
        docs = self.store.sink_docs()
        if added := register_new(self.store, configs, docs, self.owner, now):
            docs = self.store.sink_docs()
            for name in added:
                walk = "its backfill started" if "backfill" in docs.get(name, {}) else "new items only"
                log.info("sink %s registered (%s): %s", name, self.lanes[name].config.kind, walk)
        # each part scoped: a bad value fails that part only (logged once), the database being away the round
        blocked = self.unserved.check(docs, configs, now)
        moved = 0 if blocked else self.guard.run("the mover", partial(move, self.store, configs, now)) or 0
        for config in configs:
            self.guard.run(f"sink {config.name}'s walk", partial(self.walks.round, [config], docs, now))
        for name, lane in self.lanes.items():
            self.guard.run(f"sink {name}'s deliveries", partial(self._deliver, lane, docs.get(name, {}), now))
        self._write_outcomes(now)
        self.stats.maybe_write(self.lanes, now, self.owner)
        # finished deliveries and prepares set `wakeup`; a walk goes at its pace, a round a second
        return BUSY if moved >= MOVE_BATCH else IDLE

    def _lease(self, now: datetime) -> bool:
        """Hold the service lease: renewed when a sixth of it has passed (not at every round: rounds follow the
        deliveries), taken when it lapsed."""
        if (
            self.holds_lease
            and self._renewed is not None
            and now < self._renewed + timedelta(seconds=self.lease_seconds / 6)
        ):
            return True
        before = None if self.holds_lease else self.store.lease()  # whose it was: said when taken over
        held = self.store.hold_lease(self.owner, self.host, self.pid, now, self.lease_seconds)
        self._renewed = now if held else None
        if held and not self.holds_lease:
            self.unserved.said = None  # the lease document may say another holder's: say ours
        if held != self.holds_lease:
            log.info("%s", lease_line(before, held, self.owner, now, self.lease_seconds))
        self.holds_lease = held
        return held

    def _collect(self) -> None:
        """Finished deliveries into the outcomes (no database), each lane asked once; retired lanes closed once
        idle (their verdicts, of settings since replaced, are `superseded`)."""
        for lane in self._all_lanes():
            current = self.lanes.get(lane.config.name) is lane
            self.outcomes.take(lane.config.name, lane.finished(), current, self.clock())
        for lane in [lane for lane in self.retiring if not lane.flights]:
            self.retiring.remove(lane)
            lane.close()

    def _write_outcomes(self, now: datetime) -> None:
        refused = self.outcomes.write(now, self.settings.sink_max_tries, self.settings.sink_retry_max)
        for name, reason in refused.items():
            self._stop_sink(name, reason, now)

    def _stop_sink(self, name: str, reason: str, now: datetime) -> None:
        lane = self.lanes.get(name)
        if lane is not None and lane.stopped:
            return
        self.store.stop(name, reason, now)
        if lane is not None:
            lane.stop()
        log.error(
            "sink %s stopped: its destination refused the credentials (%s); mend them, then: collector sinks resume %s",
            name,
            printable(reason),
            name,
        )

    def _deliver(self, lane: Lane, doc: dict, now: datetime) -> int:
        """The lane's turn (asked once), its due batches formed (batches.py) and handed to its threads; the
        batches started."""
        retired = [old for old in self.retiring if old.config.name == lane.config.name]
        turn = lane.turn(doc, now, self.rng, self.settings.sink_retry_max, self.stopping, retired)
        if turn.failed:
            self.outcomes.health.failed(turn.name, turn.failed, now)
        if turn.auth is not None:
            self.outcomes.count(turn.name, "failed.auth")
            self._stop_sink(turn.name, turn.auth, now)
            return 0
        if turn.slots <= 0:
            return 0
        planned = self.batcher.plan(turn, now)
        if planned:
            lane.submit(planned)
        return len(planned)


__all__ = ["SinkFigures", "SinkService", "utcnow"]
