"""sinks/service.py: a delivery made with settings a reload has replaced (the operator rotated a revoked key and
sent SIGHUP while it was in flight) ends in a refused authentication: that verdict is about the old credentials, so
its entries are tried again with the new ones, and the sink — now holding good credentials — is not stopped."""

from __future__ import annotations

import random
import threading

from collector.sinks.sdk import AuthFailed
from collector.sinks.service import SinkService

from helpers.fakesink import Clock, Destination, add_items, registry, settle, sink_settings


class Revoked(Destination):
    """Refuses the credentials, once its gate opens."""

    def deliver(self, docs: list) -> list:
        assert self.gate is not None
        self.gate.wait(60)
        raise AuthFailed("401 the old key was revoked")


def test_a_late_401_from_the_replaced_settings_does_not_stop_the_sink_with_new_credentials(db):
    ids = add_items(db, 5)
    clock = Clock()
    old, new = Revoked(), Destination()
    old.gate = threading.Event()
    current = {"a": old}
    svc = SinkService(
        db,
        sink_settings("a", SINK_A_TOKEN="old-token-1"),
        owner="one",
        registry=registry(),
        clock=clock,
        rng=random.Random(1),
        http_factory=lambda config, settings, check: current["a"],
    )
    svc.step()
    settle(svc)
    clock.advance(1)
    svc.step()  # the delivery with the old key is in flight
    assert svc.lanes["a"].flights
    current["a"] = new
    svc.apply_settings(sink_settings("a", SINK_A_TOKEN="new-token-2"))  # SIGHUP with the new key
    old.gate.set()
    for _ in range(8):
        svc.step()
        settle(svc)
        clock.advance(5)
    svc.stop(5)
    doc = db["sinks"].find_one({"_id": "a"})
    assert not doc.get("stopped"), "the sink with the new credentials was stopped"
    assert set(ids) <= set(new.received)
    assert doc["counts"]["failed"]["auth"] == 1  # the old delivery's refusal is still counted


def test_a_401_with_the_current_settings_still_stops_the_sink(db):
    add_items(db, 3)
    clock, dest = Clock(), Destination()
    dest.auth = True
    svc = SinkService(
        db,
        sink_settings("a"),
        owner="one",
        registry=registry(),
        clock=clock,
        rng=random.Random(1),
        http_factory=lambda config, settings, check: dest,
    )
    for _ in range(4):
        svc.step()
        settle(svc)
        clock.advance(1)
    svc.stop(5)
    assert db["sinks"].find_one({"_id": "a"}).get("stopped")
