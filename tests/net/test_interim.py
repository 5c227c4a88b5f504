"""An answer belongs to its own request (collector/net/answers.py), on real sockets against a receiver
that scripts every byte: interim answers of every kind the RFCs define (100, 101, 102, 103) and some they do not
(150, 199, several in a row, with headers, before and after a delay, past their bound), late ones after the final
answer, and answers nobody asked for. Through the sinks' client, real sink deliveries, and the collectors' Http:
each request gets its own answer, and a refused batch is never counted delivered."""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest

from collector.sdk.errors import Transient
from collector.sdk.http import Http
from collector.settings import settings_for_tests
from collector.sinks.builtin.opensearch import OpenSearchSink
from collector.sinks.builtin.webhook import WebhookSink
from collector.sinks.delivery import Fate, deliver, scrubber
from collector.sinks.http import make_http
from collector.sinks.sdk import BatchRefused, Doc, SinkConfig
from collector.testing.sinkkit import sink_config

from helpers.sinkservers import WEBHOOK_SECRET
from helpers.wireserver import CLOSE, WireServer, answer, chunked

PRIVATE = settings_for_tests(allow_private_hosts=True)

EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nLink: </app.js>; rel=preload\r\n\r\n"
INTERIM = {
    "100": [b"HTTP/1.1 100 Continue\r\n\r\n"],
    "102": [b"HTTP/1.1 102 Processing\r\n\r\n"],
    "103": [EARLY_HINTS],
    "150": [b"HTTP/1.1 150 Nobody Knows\r\nX-Odd: yes\r\n\r\n"],
    "199": [b"HTTP/1.1 199 \r\n\r\n"],
    "several": [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 102 Processing\r\n\r\n", EARLY_HINTS, EARLY_HINTS],
    "delayed": [b"HTTP/1.1 102 Processing\r\n\r\n", 0.2, EARLY_HINTS, 0.2],
    "sixteen": [b"HTTP/1.1 102 Processing\r\n\r\n"] * 16,
    "many-headers": [b"HTTP/1.1 103 Early Hints\r\n" + b"".join(b"Link: </%d>\r\n" % n for n in range(200)) + b"\r\n"],
    "bare-lf": [b"HTTP/1.1 103 Early Hints\nLink: </a>\n\n"],
}
REFUSED = {
    "101": (
        [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello"],
        "101",
    ),
    "seventeen": ([b"HTTP/1.1 102 Processing\r\n\r\n"] * 17, "more than 16 interim"),
    "huge-head": ([b"HTTP/1.1 103 X\r\n" + b"Link: </%d>\r\n" % 7 * 9000 + b"\r\n"], "over 65536 bytes"),
}


def sink_client(url: str):
    return make_http(SinkConfig(name="t", kind="opensearch", url=url, timeout=5.0), PRIVATE, False)


def collector_http() -> Http:
    return Http(PRIVATE)


def scripted(first: list, second: list | None = None, numbers: tuple[int, ...] = (1,)):
    """The requests `numbers` get `first`, every other request `second` (its own answer, naming its number)."""

    def script(request):
        if request.number in numbers:
            return first
        return second if second is not None else [answer(200, b"for %d" % request.number)]

    return script


@pytest.mark.parametrize("kind", sorted(INTERIM))
def test_interim_answers_are_skipped_and_each_sink_request_gets_its_own_answer(kind):
    with WireServer(scripted([*INTERIM[kind], answer(500, b"refused 1")])) as server:
        http = sink_client(server.url)
        first = http.request("POST", server.url + "/_bulk", body=b"one")
        second = http.request("POST", server.url + "/_bulk", body=b"two")
        third = http.request("POST", server.url + "/_bulk", body=b"three")
    assert (first.status, first.body) == (500, b"refused 1")
    assert (second.status, second.body) == (200, b"for 2")
    assert (third.status, third.body) == (200, b"for 3")
    assert server.connections == 1  # a clean exchange leaves its connection for the next


@pytest.mark.parametrize("kind", sorted(INTERIM))
def test_interim_answers_are_skipped_and_each_collector_request_gets_its_own_page(kind):
    with WireServer(scripted([*INTERIM[kind], chunked(200, b'["for 1"]', 4)])) as server:
        http = collector_http()
        pages = [http.get(f"{server.url}/page/{n}").content for n in (1, 2, 3)]
    assert pages == [b'["for 1"]', b"for 2", b"for 3"]
    assert server.connections == 1


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_an_unasked_101_or_interim_answers_past_their_bound_refuse_the_request_and_drop_the_connection(kind):
    pieces, reason = REFUSED[kind]
    with WireServer(scripted([*pieces, answer(200, b"late for 1")], numbers=(1, 3))) as server:
        http = sink_client(server.url)
        with pytest.raises(BatchRefused, match=reason) as caught:
            http.request("POST", server.url + "/_bulk")
        assert str(caught.value).endswith(": POST 127.0.0.1/_bulk")
        assert http.request("POST", server.url + "/_bulk").body == b"for 2"
        http = collector_http()
        with pytest.raises(Transient, match=reason):
            http.get(f"{server.url}/page")
        assert http.get(f"{server.url}/page").content == b"for 4"
    assert server.connections == 4  # each refused exchange's connection was dropped, never reused


@pytest.mark.parametrize(
    "after",
    [
        b"HTTP/1.1 103 Early Hints\r\n\r\n",  # a late interim answer
        answer(500, b"nobody asked"),  # a whole answer nobody asked for
        answer(200, b"for 2"),  # one that looks like the next request's
        b"\r\n",
    ],
    ids=["late-103", "unasked-500", "unasked-200", "crlf"],
)
def test_bytes_right_after_the_answer_make_it_unclear_the_request_refused_and_the_next_gets_its_own(after):
    with WireServer(scripted([answer(200, b"for 1") + after], numbers=(1, 3))) as server:
        http = sink_client(server.url)
        with pytest.raises(BatchRefused, match="bytes after the end of the answer"):
            http.request("POST", server.url + "/_bulk")
        assert http.request("POST", server.url + "/_bulk").body == b"for 2"
        http = collector_http()
        with pytest.raises(Transient, match="bytes after the end of the answer"):
            http.get(f"{server.url}/page")
        assert http.get(f"{server.url}/page").content == b"for 4"
    assert server.connections == 4


@pytest.mark.parametrize("final", [answer(200, b"for 1"), chunked(200, b"for 1", 2)], ids=["length", "chunked"])
@pytest.mark.parametrize(
    "late", [b"HTTP/1.1 103 Early Hints\r\n\r\n", answer(500, b"nobody asked")], ids=["late-103", "unasked-500"]
)
def test_an_answer_nobody_asked_for_arriving_later_never_reaches_the_next_request(final, late):
    """The late bytes arrive while the connection waits in the pool: it is dropped, the next request connects
    afresh and reads its own answer."""
    sent = threading.Event()

    def script(request):
        if request.number == 1:
            return [final, 0.1, late, sent.set, 1.0, CLOSE]
        return [answer(200, b"for %d" % request.number)]

    for client in ("sink", "collector"):
        sent.clear()
        with WireServer(script) as server:
            if client == "sink":
                http = sink_client(server.url)
                assert http.request("POST", server.url + "/_bulk").body == b"for 1"
                assert sent.wait(60)  # the late bytes are in (loopback: sent is received)
                assert http.request("POST", server.url + "/_bulk").body == b"for 2"
            else:
                http = collector_http()
                assert http.get(f"{server.url}/a").content == b"for 1"
                assert sent.wait(60)
                assert http.get(f"{server.url}/b").content == b"for 2"
        assert [r.connection for r in server.requests] == [1, 2]


def webhook(url: str) -> WebhookSink:
    config = replace(sink_config(WebhookSink, url, name="hook", SECRET=WEBHOOK_SECRET), timeout=5.0)
    return WebhookSink(config, make_http(config, PRIVATE, WebhookSink.checks_addresses))


def bulk_ok(docs: list[Doc]) -> bytes:
    items = [{"index": {"_id": doc.id, "status": 201}} for doc in docs]
    return json.dumps({"took": 1, "errors": False, "items": items}).encode()


@pytest.mark.parametrize("interim", [INTERIM["103"], INTERIM["several"], INTERIM["delayed"], INTERIM["199"]])
def test_a_refused_webhook_batch_after_interim_answers_is_retried_and_the_next_batch_done(interim):
    first = [Doc(f"{n:024x}", {"title": f"one {n}"}) for n in range(3)]
    second = [Doc(f"{n + 10:024x}", {"title": f"two {n}"}) for n in range(2)]
    script = scripted([*interim, answer(500, b"not now")], [*interim, answer(200, b"thanks")])
    with WireServer(script) as server:
        sink = webhook(server.url + "/hook")
        scrub = scrubber([WEBHOOK_SECRET])
        refused = deliver(sink, first, scrub)
        done = deliver(sink, second, scrub)
    assert [v.outcome for v in refused] == [Fate.RETRY] * 3 and "500" in refused[0].reason
    assert [v.outcome for v in done] == [Fate.DONE] * 2


@pytest.mark.parametrize("interim", [INTERIM["100"], INTERIM["103"], INTERIM["150"], INTERIM["sixteen"]])
def test_a_refused_bulk_after_interim_answers_is_retried_and_the_next_bulk_done(interim):
    first = [Doc(f"{n:024x}", {"title": f"one {n}"}) for n in range(4)]
    second = [Doc(f"{n + 10:024x}", {"title": f"two {n}"}) for n in range(3)]

    def script(request):
        if request.number == 1:
            return [*interim, answer(503, b'{"error":{"type":"busy","reason":"later"}}')]
        return [*interim, answer(200, bulk_ok(second))]

    with WireServer(script) as server:
        sink = OpenSearchSink(sink_config(OpenSearchSink, server.url, name="os"), sink_client(server.url))
        refused = deliver(sink, first, scrubber([]))
        done = deliver(sink, second, scrubber([]))
    assert [v.outcome for v in refused] == [Fate.RETRY] * 4 and "503" in refused[0].reason
    assert [v.outcome for v in done] == [Fate.DONE] * 3
    assert server.connections == 1


@pytest.mark.parametrize("kind", ["103", "several", "150"])
def test_through_a_proxy_the_collectors_skip_interim_answers_too(monkeypatch, kind):
    """A request through a proxy (HTTP_PROXY) goes through requests' proxy manager, whose pools are made of the
    checked connections as well: interim answers skipped, each request its own page."""
    with WireServer(scripted([*INTERIM[kind], answer(200, b'["for 1"]')])) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        http = collector_http()
        assert http.session.trust_env
        pages = [http.get(f"http://api.collector-test.example/page/{n}").content for n in (1, 2)]
    assert pages == [b'["for 1"]', b"for 2"]
    assert [r.path for r in proxy.requests] == [f"http://api.collector-test.example/page/{n}" for n in (1, 2)]
