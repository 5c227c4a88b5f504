"""A 2xx answer is done whatever its size (collector/sinks/http.py, net/answers.py), on real sockets: a body no one
needs is read and dropped (up to DROP_BYTES, then the connection is closed) and the answer counts; a body holding
per-document results (`_bulk`, a Typesense import) too large to read splits the batch, never repeats it; an error
answer keeps a bounded prefix for its reason. Several sizes, framings and statuses."""

from __future__ import annotations

import re
from dataclasses import replace

import orjson
import pytest

from collector.settings import settings_for_tests
from collector.sinks.builtin.opensearch import OpenSearchSink
from collector.sinks.builtin.typesense import TypesenseSink
from collector.sinks.builtin.webhook import WebhookSink
from collector.sinks.delivery import Fate, deliver, scrubber
from collector.sinks.http import DROP_BYTES, MAX_ANSWER_BYTES, REASON_BYTES, AnswerTooLarge, make_http
from collector.sinks.sdk import BatchRefused, Doc, SinkConfig, TooLarge
from collector.testing.sinkkit import sink_config

from helpers.sinkservers import WEBHOOK_SECRET
from helpers.wireserver import CLOSE, WireServer, answer, chunked

PRIVATE = settings_for_tests(allow_private_hosts=True)
MiB = 1024 * 1024
OVER = b"x" * (MAX_ANSWER_BYTES + 1)


def client(url: str, timeout: float = 20.0):
    return make_http(SinkConfig(name="t", kind="opensearch", url=url, timeout=timeout), PRIVATE, False)


def head_only(status: int, length: int) -> bytes:
    return f"HTTP/1.1 {status} X\r\nContent-Length: {length}\r\n\r\n".encode()


def close_delimited(status: int, body: bytes) -> bytes:
    return f"HTTP/1.1 {status} X\r\nConnection: close\r\n\r\n".encode() + body


def own(request) -> list:
    return [answer(200, b"for %d" % request.number)]


@pytest.mark.parametrize(
    ("first", "reused"),
    [
        ([answer(200)], True),
        ([answer(201, b"y" * 1000)], True),
        ([answer(204)], True),
        ([answer(299, b"z" * (3 * MiB))], True),
        ([answer(200, OVER)], True),  # over the cap a body is kept to: dropped, read to its end
        ([chunked(202, b"c" * (17 * MiB), 256 * 1024)], True),
        ([close_delimited(200, b"w" * (2 * MiB)), CLOSE], False),
        ([head_only(200, DROP_BYTES + 1), b"q" * 1000], False),  # more than may be dropped: closed unread
        ([chunked(200, b"c" * (DROP_BYTES + 2 * MiB), MiB)], False),  # the same, found while dropping
    ],
    ids=["empty", "1kb", "204", "3mib", "16mib+1", "chunked-17mib", "close-delimited", "declared-64mib+1", "64mib+"],
)
def test_a_2xx_whose_body_is_not_needed_counts_whatever_its_size(first, reused):
    with WireServer(lambda r: first if r.number == 1 else own(r)) as server:
        http = client(server.url)
        done = http.request("POST", server.url + "/hook", body=b"batch", keep_body=False)
        after = http.request("POST", server.url + "/hook")
    assert 200 <= done.status < 300 and done.body == b""
    assert after.body == b"for 2"
    assert [r.connection for r in server.requests] == ([1, 1] if reused else [1, 2])


@pytest.mark.parametrize(
    "first",
    [[answer(200, OVER)], [chunked(200, OVER, MiB)], [close_delimited(201, OVER), CLOSE], [head_only(200, 40 * MiB)]],
    ids=["announced", "chunked", "close-delimited", "announced-only"],
)
def test_a_2xx_whose_body_is_needed_and_too_large_is_too_large_never_refused(first):
    with WireServer(lambda r: first if r.number == 1 else own(r)) as server:
        http = client(server.url)
        with pytest.raises(AnswerTooLarge, match="over the 16777216-byte cap: POST 127.0.0.1/_bulk") as caught:
            http.request("POST", server.url + "/_bulk", body=b"batch")
        assert isinstance(caught.value, TooLarge)  # the delivery splits the batch
        assert http.request("POST", server.url + "/_bulk").body == b"for 2"
    assert [r.connection for r in server.requests] == [1, 2]  # the connection read halfway was closed


@pytest.mark.parametrize("status", [404, 413, 429, 500, 503])
@pytest.mark.parametrize("size", [10, REASON_BYTES, REASON_BYTES + 1, 20 * MiB])
def test_an_error_answer_keeps_a_prefix_for_its_reason_and_its_status_counts(status, size):
    body = b'{"error":"' + b"e" * size + b'"}'
    with WireServer(lambda r: [answer(status, body)] if r.number == 1 else own(r)) as server:
        http = client(server.url)
        refused = http.request("POST", server.url + "/_bulk", body=b"batch")
        after = http.request("POST", server.url + "/_bulk")
    assert refused.status == status and refused.body == body[:REASON_BYTES]
    assert after.body == b"for 2"
    if size in (10, 20 * MiB):  # read whole, the connection kept; far past the prefix, closed unread
        assert [r.connection for r in server.requests] == ([1, 1] if size == 10 else [1, 2])


def test_a_2xx_whose_dropped_body_outlives_the_deadline_still_counts_a_kept_one_does_not():
    # the deadline (3 s) far from both the head's arrival (at once) and the body's end (60 s) on a loaded machine
    trickle = [head_only(200, 1000), *[piece for _ in range(120) for piece in (b"t" * 8, 0.5)]]
    with WireServer(lambda r: trickle if r.number in (1, 2) else own(r)) as server:
        http = client(server.url, timeout=3.0)
        assert http.request("POST", server.url + "/hook", keep_body=False).status == 200
        with pytest.raises(BatchRefused, match="deadline of 3s exceeded"):
            http.request("POST", server.url + "/_bulk")
        assert http.request("POST", server.url + "/hook").body == b"for 3"


def docs(count: int, start: int = 0) -> list[Doc]:
    return [Doc(f"{n + start:024x}", {"title": f"item {n}"}) for n in range(count)]


@pytest.mark.parametrize("size", [0, 5 * MiB, MAX_ANSWER_BYTES + 1, 30 * MiB])
def test_a_webhook_batch_answered_2xx_with_a_body_of_any_size_is_done(size):
    body = b"k" * size
    with WireServer(lambda r: [answer(200, body)]) as server:
        config = replace(sink_config(WebhookSink, server.url + "/hook", name="hook", SECRET=WEBHOOK_SECRET))
        sink = WebhookSink(replace(config, timeout=20.0), make_http(config, PRIVATE, True))
        verdicts = deliver(sink, docs(5), scrubber([WEBHOOK_SECRET]))
    assert [v.outcome for v in verdicts] == [Fate.DONE] * 5
    assert len(server.requests) == 1


def bulk_answer(body: bytes) -> bytes:
    rows = [orjson.loads(line) for line in body.splitlines()][0::2]
    items = [{"index": {"_id": row["index"]["_id"], "status": 201}} for row in rows]
    return orjson.dumps({"took": 1, "errors": False, "items": items})


@pytest.mark.parametrize("largest_readable", [1, 2, 3])
def test_a_bulk_answer_too_large_to_read_splits_the_batch_until_it_can_be_read(largest_readable):
    """The answer to a batch of more than `largest_readable` documents is over the cap: the batch is halved until
    each part's answer can be read; no batch is ever sent twice."""

    def script(request):
        count = len(request.body.splitlines()) // 2
        if count > largest_readable:
            return [answer(200, OVER)]
        return [answer(200, bulk_answer(request.body))]

    with WireServer(script) as server:
        sink = OpenSearchSink(sink_config(OpenSearchSink, server.url, name="os"), client(server.url))
        verdicts = deliver(sink, docs(8), scrubber([]))
    assert [v.outcome for v in verdicts] == [Fate.DONE] * 8
    bodies = [r.body for r in server.requests]
    assert len(bodies) == len(set(bodies))  # never the same batch again unchanged
    assert max(len(b.splitlines()) // 2 for b in bodies[1:]) <= 4


def test_one_document_whose_import_answer_is_too_large_is_rejected_with_a_clear_reason():
    """Typesense: every answer too large to read. Halved down to single documents, each rejected as too large
    (counted too_large), the whole in 1 + 2 + 4 requests, never one repeated."""
    with WireServer(lambda r: [answer(200, b"{}")] if r.method == "GET" else [answer(200, OVER)]) as server:
        config = sink_config(TypesenseSink, server.url, name="ts", API_KEY="ts-key-0123456789")
        sink = TypesenseSink(config, client(server.url))
        verdicts = deliver(sink, docs(4), scrubber(["ts-key-0123456789"]))
    assert [(v.outcome, v.kind) for v in verdicts] == [(Fate.REJECT, "tooLarge")] * 4
    assert re.search(
        r"too large for the destination: 200: answer (of \d+ bytes )?over the 16777216-byte cap: POST "
        r"127.0.0.1/collections/items/documents/import$",
        verdicts[0].reason,
    )
    posts = [r.body for r in server.requests if r.method == "POST"]
    assert len(posts) == 7 and len(set(posts)) == 7


def test_an_error_answer_too_large_is_refused_for_now_by_its_status():
    big = b"<html>" + b"busy " * (4 * MiB) + b"</html>"
    with WireServer(lambda r: [answer(503, big)]) as server:
        sink = OpenSearchSink(sink_config(OpenSearchSink, server.url, name="os"), client(server.url))
        verdicts = deliver(sink, docs(3), scrubber([]))
    assert [v.outcome for v in verdicts] == [Fate.RETRY] * 3 and "503" in verdicts[0].reason
