"""The demo's and the bench's local sink destinations, without a socket: the receiver's signature check agrees with
the Standard Webhooks reference package, refuses what it must, and counts a redelivered document once; the demo's
--sink values."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from collector.devtools import destinations, sinkdemo
from collector.devtools.destinations import Receiver, document_ids, new_secret, verified


def signed(secret: str, body: bytes, msg_id: str = "msg_1", at: float | None = None) -> dict[str, str]:
    """Headers as the reference package signs them."""
    when = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, when, body.decode()),
    }


def test_the_receivers_signature_is_the_reference_packages():
    secret, body = new_secret(), b'[{"id": "a1"}]'
    headers = signed(secret, body)
    assert verified(secret, headers, body, time.time())
    assert destinations.signature(secret, "msg_1", headers["webhook-timestamp"], body) == headers["webhook-signature"]
    Webhook(secret).verify(body, headers)  # and the reference accepts what the receiver would


def test_a_wrong_secret_a_changed_body_or_an_old_timestamp_is_refused():
    secret, body = new_secret(), b'[{"id": "a1"}]'
    assert not verified(new_secret(), signed(secret, body), body, time.time())
    assert not verified(secret, signed(secret, body), body + b" ", time.time())
    assert not verified(secret, signed(secret, body, at=time.time() - 600), body, time.time())
    assert not verified(secret, {**signed(secret, body), "webhook-id": ""}, body, time.time())


def test_several_signatures_pass_when_one_of_them_holds():
    secret, body = new_secret(), b"[]"
    headers = signed(secret, body)
    headers["webhook-signature"] = "v1,bm90IGl0 " + headers["webhook-signature"]
    assert verified(secret, headers, body, time.time())


def test_the_receiver_counts_documents_by_id_and_refused_requests_apart():
    secret = new_secret()
    receiver = Receiver(secret)
    first = json.dumps([{"id": "a1", "title": "x"}, {"id": "a2"}]).encode()
    again = json.dumps({"data": [{"id": "a2"}, {"id": "a3"}]}).encode()
    assert receiver.take(signed(secret, first), first) == 200
    assert receiver.take(signed(secret, again, "msg_2"), again) == 200
    assert receiver.take(signed(new_secret(), again, "msg_3"), again) == 401
    assert receiver.take(signed(secret, again, "msg_4"), again, "/hook/other") == 200
    assert receiver.ids == {"a1", "a2", "a3"}
    assert receiver.stats() == {"received": 3, "requests": 3, "bad_signatures": 1}
    assert receiver.stats("/hook/other")["received"] == 2  # each path apart


def test_document_ids_of_the_batch_shapes():
    assert document_ids([{"id": 1}, {"_id": "b"}, "x"]) == ["1", "b"]
    assert document_ids({"items": [{"id": "c"}]}) == ["c"]
    assert document_ids({"type": "nothing"}) == [] and document_ids("text") == []


def test_the_demos_sink_values():
    assert sinkdemo.parse_kinds("none") == ()
    assert sinkdemo.parse_kinds(" Webhook ") == ("webhook",)
    assert sinkdemo.parse_kinds("webhook,webhook") == ("webhook",)
    assert sinkdemo.parse_kinds("all") == sinkdemo.KINDS == ("webhook", "opensearch")
    for bad in ("kafka", "", "webhook,kafka"):
        with pytest.raises(sinkdemo.SinkUsage, match="--sink takes"):
            sinkdemo.parse_kinds(bad)


def test_opensearch_asks_for_osmem_server_when_it_is_not_installed(monkeypatch):
    monkeypatch.setattr(destinations.Search, "installed", staticmethod(lambda: False))
    with pytest.raises(sinkdemo.SinkUsage, match="osmem-server"):
        sinkdemo.parse_kinds("webhook,opensearch")


def test_the_search_word_is_the_titles_most_common():
    assert destinations.words(["octo/python-tools", "py/python", "a/b"]) == "python"
    assert destinations.words([]) == ""


def test_the_stand_in_stores_a_sink_queues_document_ids_with_quick_inserts_and_refuses_a_duplicate():
    import mongomock

    from collector.devtools.mongocommands import Commands

    commands = Commands(mongomock.MongoClient(), quick_inserts=True)
    entries = [{"_id": {"s": "search", "i": f"item{k}"}, "sink": "search"} for k in range(3)]
    answer = commands.run({"insert": "sinkQueue", "documents": entries, "ordered": False, "$db": "d"}, [])
    assert answer["ok"] == 1.0 and answer["n"] == 3
    again = commands.run({"insert": "sinkQueue", "documents": entries[1:], "ordered": False, "$db": "d"}, [])
    assert again["n"] == 0 and [e["code"] for e in again["writeErrors"]] == [11000, 11000]  # ignored by the mover
    assert commands.client["d"]["sinkQueue"].count_documents({"sink": "search"}) == 3


def test_the_sink_figures_are_medians_per_side_and_their_ratio():
    from collector.devtools.figures import sink_figures

    def run(page, efficiency, **cpu):
        figures = {"efficiency": efficiency, "speedup": efficiency * 10, "db_ms_per_task": 1.0}
        return {**figures, "engine_cpu_ms_per_page": page, "wall_s_concurrent": 4.0, "tasks": 100, **cpu}

    off = [run(3.0, 0.9, standin_cpu_s=0.1), run(5.0, 0.8, standin_cpu_s=0.3), run(4.0, 0.7, standin_cpu_s=0.2)]
    on = [run(4.4, 0.6, standin_cpu_s=0.5, sink_cpu_s=1.0, items=9600, delivered=d) for d in (4000, 5000, 6000)]
    result = sink_figures(off, on)
    assert (
        result["engine_cpu_ms_per_page_apart_sink_off"] == 4.0 and result["engine_cpu_ms_per_page_apart_sink_on"] == 4.4
    )
    assert result["engine_cpu_ms_per_page_sink_on_vs_off"] == 1.1
    assert result["efficiency_sink_on_vs_off"] == 0.75  # 0.6 / 0.8
    assert result["standin_cpu_ms_per_task_sink_off"] == 2.0 and result["standin_cpu_ms_per_task_sink_on"] == 5.0
    assert result["sink_cpu_ms_per_task_sink_on"] == 10.0 and "sink_cpu_ms_per_task_sink_off" not in result
    assert result["sink_delivered_during_walk"] == 5000 and result["sink_walk_items"] == 9600
    assert result["sink_runs"] == 3


def test_a_sinks_rate_runs_from_the_first_delivery_seen_to_the_last():
    from collector.devtools.figures import sink_rate

    spent = {"sink": 2.0, "standin": 1.0, "destination": 0.5}
    left = {"queued": 0, "marked": 0, "dead_letters": 0}
    result = sink_rate(10_500, (100.0, 500), (105.0, 10_500), spent, 10_500, left)
    assert result["sink_items_per_s"] == 2000.0  # 10,000 more in 5 s
    assert result["sink_cpu_ms_per_item"] == 0.2 and result["sink_standin_cpu_ms_per_item"] == 0.1
    assert result["sink_destination_cpu_ms_per_item"] == 0.05
    assert result["sink_delivered"] == result["sink_held"] == result["sink_items"] and result["sink_left"] == left
    seen_at_once = sink_rate(300, (1.0, 300), (1.0, 300), spent, 300, left)
    assert seen_at_once["sink_items_per_s"] is None and seen_at_once["sink_cpu_ms_per_item"] is None


def test_a_sink_service_reads_the_walks_database_and_no_sink_of_the_operators(monkeypatch):
    import os

    from collector.devtools.sinkprocess import cpu_s, sink_env, with_database

    assert with_database("mongodb://127.0.0.1:5/likeastore", "b_1") == "mongodb://127.0.0.1:5/b_1"
    assert with_database("mongodb://h:1/?replicaSet=r", "b") == "mongodb://h:1/b?replicaSet=r"
    monkeypatch.setenv("SINK_OTHER_URL", "https://elsewhere.test")
    env = sink_env("mongodb://h:1/b", "bench", {"SINK_BENCH_URL": "http://127.0.0.1:9/x"})
    assert env["SINKS"] == "bench" and env["SINK_BENCH_BACKFILL"] == "false" and "SINK_OTHER_URL" not in env
    assert env["MONGODB_URI"] == "mongodb://h:1/b" and env["SINK_BENCH_URL"] == "http://127.0.0.1:9/x"
    assert cpu_s(os.getpid()) > 0


def test_the_stand_in_counts_as_pymongo_asks_without_an_aggregate_and_the_same():
    import mongomock

    from collector.devtools.mongocommands import Commands

    commands = Commands(mongomock.MongoClient())
    commands.client["d"]["items"].insert_many([{"_id": k, "sinkPending": k % 3 == 0} for k in range(10)])

    def count(pipeline):
        return commands.run({"aggregate": "items", "pipeline": pipeline, "cursor": {}, "$db": "d"}, [])

    group = {"$group": {"_id": 1, "n": {"$sum": 1}}}
    for middle, n in (([], 4), ([{"$skip": 1}], 3), ([{"$limit": 2}], 2), ([{"$skip": 3}, {"$limit": 2}], 1)):
        answer = count([{"$match": {"sinkPending": True}}, *middle, group])
        assert answer["cursor"]["firstBatch"] == [{"_id": 1, "n": n}]
    assert count([{"$match": {"sinkPending": "no"}}, group])["cursor"]["firstBatch"] == []  # as MongoDB: no group
    other = count([{"$match": {"sinkPending": True}}, {"$group": {"_id": "$sinkPending", "n": {"$sum": 1}}}])
    assert other["cursor"]["firstBatch"] == [{"_id": True, "n": 4}]  # any other pipeline: mongomock's aggregate
