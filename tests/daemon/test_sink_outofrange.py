"""The sink service's own client against a MongoDB on a loopback socket (WireServer) that keeps a date past year
9999 as MongoDB does (review 2, finding 1): every round goes through and every item is delivered, the odd one
with its date as null — before, every round raised InvalidBSON at the mover, for every sink."""

from __future__ import annotations

import random

import bson
import pytest
from bson.codec_options import CodecOptions, DatetimeConversion
from pymongo import MongoClient

import collector.devtools.mongowire as mongowire
from collector.daemon.sinkprocess import service_database
from collector.devtools.mongowire import WireServer
from collector.engine.store import connect
from collector.settings import settings_for_tests
from collector.sinks.service import SinkService

from helpers.fakesink import Clock, Destination, add_items, registry, settle, sink_settings

pytestmark = pytest.mark.system


def test_an_item_dated_past_9999_is_delivered_and_stops_nothing(monkeypatch):
    # the stand-in keeps such a date (it decodes it as a DatetimeMS, as MongoDB stores it, instead of failing)
    codec = CodecOptions(tz_aware=False, datetime_conversion=DatetimeConversion.DATETIME_AUTO)
    monkeypatch.setattr(mongowire, "CODEC", codec)
    with WireServer() as wire:
        client = connect(settings_for_tests(mongodb_uri=wire.uri))
        raw = MongoClient(wire.uri, datetime_conversion="DATETIME_AUTO")
        try:
            db = service_database(client)
            ids = add_items(db, 5)
            odd = bson.ObjectId()
            late = bson.DatetimeMS(1_700_000_000_000 * 1000)  # year ~55800
            raw.get_default_database("likeastore").items.insert_one(
                {"_id": odd, "type": "github", "title": "odd", "sinkPending": True, "date": late}
            )
            clock, dest = Clock(), Destination()
            svc = SinkService(
                db,
                sink_settings("a"),
                owner="one",
                registry=registry(),
                clock=clock,
                rng=random.Random(1),
                http_factory=lambda c, s, k: dest,
            )
            for _ in range(5):
                svc.step()  # raises if a round fails
                settle(svc)
                clock.advance(2)
            svc.stop(2)
            assert set(dest.received) == {*ids, str(odd)}
            assert dest.bodies[str(odd)]["date"] is None
        finally:
            raw.close()
            client.close()
