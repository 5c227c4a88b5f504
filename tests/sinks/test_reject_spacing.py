"""sinks/outcomes.py: rejects are spaced like retries, with a floor (30 s, 60 s, ... capped by SINK_RETRY_MAX), so
a destination-wide condition of a few seconds that the destination reports per item (OpenSearch answering 404
index_not_found_exception for every item while an index is dropped and made again) does not dead-letter the items
sent meanwhile; a document refused for itself is still dead-lettered after SINK_MAX_TRIES rejects."""

from __future__ import annotations

import random

import orjson

from collector.settings import load_settings
from collector.sinks.http import Answer
from collector.sinks.outcomes import reject_floor
from collector.sinks.service import SinkService
from collector.sinks.store import DEAD, QUEUE

from helpers.fakesink import Clock, Destination, add_items, run, service, settle, sink_settings


class IndexGone:
    """An OpenSearch whose _bulk answers 200 with every item 404 index_not_found_exception until `back` is set."""

    def __init__(self) -> None:
        self.back = False
        self.indexed: set[str] = set()

    def request(self, method, url, *, body=None, headers=None, keep_body=True):
        if method == "HEAD":
            return Answer(200, {}, b"")
        rows = [orjson.loads(line) for line in body.splitlines()]
        items = []
        for action in rows[0::2]:
            doc_id = action["index"]["_id"]
            if self.back:
                self.indexed.add(doc_id)
                items.append({"index": {"_id": doc_id, "status": 201}})
            else:
                error = {"type": "index_not_found_exception", "reason": "no such index [items]"}
                items.append({"index": {"_id": doc_id, "status": 404, "error": error}})
        return Answer(200, {}, orjson.dumps({"errors": not self.back, "items": items}))

    def close(self) -> None:
        pass


def test_six_seconds_without_the_index_dead_letter_nothing(db):
    ids = add_items(db, 20)
    gone = IndexGone()
    environ = {"SINKS": "search", "SINK_SEARCH_KIND": "opensearch", "SINK_SEARCH_URL": "https://os.test:9200"}
    settings = load_settings(environ=environ, env="test", read_dotenv=False)
    clock = Clock()
    svc = SinkService(db, settings, owner="one", clock=clock, rng=random.Random(5), http_factory=lambda c, s, k: gone)
    for second in range(120):
        gone.back = second >= 6
        svc.step()
        settle(svc)
        clock.advance(1)
    svc.stop(5)
    assert db[DEAD].count_documents({}) == 0
    assert set(ids) <= gone.indexed


def test_a_document_refused_for_itself_is_dead_lettered_after_max_tries_rejects_spread_over_minutes(db):
    ids = add_items(db, 3)
    clock, dest = Clock(), Destination()
    dest.reject = {ids[0]}
    svc = service(db, sink_settings("a", SINK_MAX_TRIES="3"), clock, {"a": dest})
    run(svc, clock, rounds=85, tick=1)  # the third try comes 30 s + 60 s after the first at the soonest
    assert db[DEAD].count_documents({}) == 0 and db[QUEUE].count_documents({}) == 1
    run(svc, clock, rounds=20, tick=60)
    svc.stop(5)
    assert [str(d["item"]) for d in db[DEAD].find()] == [ids[0]]
    assert set(ids[1:]) <= set(dest.received)


def test_the_reject_floor_doubles_and_is_capped_by_sink_retry_max():
    assert [reject_floor(n, 600) for n in range(6)] == [30, 60, 120, 240, 480, 600]
    assert reject_floor(0, 10) == 10
