"""Dates outside Python's calendar (review 2, finding 1): MongoDB and JavaScript keep a date past year 9999 (a
Node.js collector or a shell writing `new Date(ts * 1000)` with ts already in ms gives year ~55000), which pymongo
cannot decode into a datetime. The sink service's client reads one as a DatetimeMS (and invalid UTF-8 with U+FFFD);
the mover queues such an item as due now, and a destination receives such a date as null."""

from __future__ import annotations

from datetime import UTC, datetime

import bson
from bson import DatetimeMS, ObjectId
from bson.codec_options import DatetimeConversion
from pymongo import MongoClient

from collector.daemon.sinkprocess import service_database
from collector.sinks.docs import as_doc
from collector.sinks.store import QUEUE

from helpers.fakesink import Clock, Destination, add_items, service, settle, sink_settings

YEAR_55800 = DatetimeMS(1_700_000_000_000 * 1000)  # a timestamp in ms taken for one in seconds
IN_RANGE = DatetimeMS(1_700_000_000_123)


def test_a_date_outside_the_calendar_is_null_for_a_destination_one_inside_iso():
    doc = as_doc({"_id": ObjectId(), "date": YEAR_55800, "seen": IN_RANGE, "list": [DatetimeMS(-(2**62))]})
    assert doc.body == {"date": None, "seen": "2023-11-14T22:13:20.123Z", "list": [None]}


def test_the_services_database_reads_such_dates_and_invalid_text_instead_of_failing():
    client = MongoClient("mongodb://127.0.0.1:1/likeastore", tz_aware=True, connect=False)
    try:
        db = service_database(client)
        options = db.codec_options
        assert options.datetime_conversion == DatetimeConversion.DATETIME_AUTO and options.tz_aware
        raw = bson.encode({"date": YEAR_55800, "at": datetime(2026, 1, 1, tzinfo=UTC)})
        raw = raw[:-1] + b"\x02t\x00\x03\x00\x00\x00\xff\xfe\x00" + b"\x00"  # a string that is not UTF-8
        raw = len(raw).to_bytes(4, "little") + raw[4:]
        decoded = bson.decode(raw, options)
        assert decoded["date"] == YEAR_55800 and decoded["at"] == datetime(2026, 1, 1, tzinfo=UTC)
        assert decoded["t"] == "\ufffd\ufffd"
    finally:
        client.close()


def test_an_item_dated_outside_the_calendar_is_queued_as_due_now_and_delivered(db):
    """What the service reads through its client (a DatetimeMS in `date` and elsewhere) moves and delivers."""
    ids = add_items(db, 3)
    odd = ObjectId()
    db.items.insert_one({"_id": odd, "type": "github", "date": YEAR_55800, "seen": YEAR_55800, "sinkPending": True})
    clock, dest = Clock(), Destination()
    svc = service(db, sink_settings("a"), clock, {"a": dest})
    svc.step()
    assert db[QUEUE].find_one({"item": odd})["date"] == clock.now
    for _ in range(3):
        settle(svc)
        clock.advance(2)
        svc.step()
    svc.stop(2)
    assert set(dest.received) == {*ids, str(odd)}
    assert dest.bodies[str(odd)]["date"] is None
