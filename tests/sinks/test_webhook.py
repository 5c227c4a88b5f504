"""The `webhook` sink against a receiver that verifies every batch with the Standard Webhooks reference package
(`standardwebhooks`): the message and its signature, a stable webhook-id per batch, what each answer means, the
address checks of its URL, and the kit (collector.testing.sinkkit)."""

from __future__ import annotations

import base64
import json
import random
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from collector.settings import SettingsError, load_settings, settings_for_tests
from collector.sinks.builtin.webhook import WebhookSink, message_id, sign
from collector.sinks.http import make_http
from collector.sinks.sdk import AuthFailed, BatchRefused, Doc, TooLarge
from collector.sinks.service import SinkService
from collector.sinks.store import DEAD, QUEUE
from collector.testing.sinkkit import check_sink, item_docs, sink_config

from helpers.fakesink import Clock, add_items, run
from helpers.sinkservers import WEBHOOK_SECRET, FaultProxy, Reply, WebhookReceiver

pytestmark = pytest.mark.system

PRIVATE = settings_for_tests(allow_private_hosts=True)
PUBLIC_ONLY = settings_for_tests(allow_private_hosts=False)
OTHER_SECRET = "whsec_" + base64.b64encode(b"somebody else's secret 0042").decode()


@pytest.fixture
def receiver():
    with WebhookReceiver() as running:
        yield running


def make(url, secret=WEBHOOK_SECRET, settings=PRIVATE, timeout=10.0):
    config = replace(sink_config(WebhookSink, url, name="hook", SECRET=secret), timeout=timeout)
    return WebhookSink(config, make_http(config, settings, WebhookSink.checks_addresses))


def test_a_batch_is_one_signed_message_the_reference_library_verifies(receiver):
    docs = [Doc("a" * 24, {"title": "one", "id": "its-own"}), Doc("b" * 24, {"title": "two", "tags": ["x"]})]
    assert [o.kind for o in make(receiver.url).deliver(docs)] == ["done", "done"]
    (batch,) = receiver.batches
    payload = batch["payload"]
    assert payload["type"] == "items.created"
    assert datetime.fromisoformat(payload["timestamp"]).tzinfo is not None
    assert payload["data"] == [
        {"title": "one", "id": "a" * 24},
        {"title": "two", "tags": ["x"], "id": "b" * 24},
    ]
    assert [next(iter(item)) for item in payload["data"]] == ["id", "id"]  # {"id": ..., ...the item's fields}
    assert batch["id"].startswith("msg_") and batch["timestamp"].isdigit()


def test_the_same_batch_sent_again_has_the_same_webhook_id_another_batch_another(receiver):
    docs = item_docs(3)
    sink = make(receiver.url)
    sink.deliver(docs)
    sink.deliver(docs)
    sink.deliver(docs[:2])
    ids = [batch["id"] for batch in receiver.batches]
    assert ids[0] == ids[1] != ids[2]


def test_the_signature_is_the_reference_librarys_own():
    moment = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    body = b'{"type":"items.created","data":[]}'
    reference = Webhook(WEBHOOK_SECRET).sign("msg_x", moment, body.decode())
    key = base64.b64decode(WEBHOOK_SECRET.removeprefix("whsec_"))
    assert sign(key, "msg_x", int(moment.timestamp()), body) == {
        "webhook-id": "msg_x",
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": reference,
    }


def test_the_clock_sets_the_timestamp_header_and_field(receiver):
    sink = make(receiver.url)
    moment = datetime.now(UTC).replace(microsecond=123000)
    sink.clock = lambda: moment
    sink.deliver(item_docs(1))
    (batch,) = receiver.batches
    assert batch["timestamp"] == str(int(moment.timestamp()))
    assert batch["payload"]["timestamp"] == moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.mark.parametrize("status", [200, 202, 204])
def test_a_2xx_answer_is_done_for_every_document(receiver, status):
    receiver.replies.append(Reply(status))
    assert [o.kind for o in make(receiver.url).deliver(item_docs(3))] == ["done"] * 3


@pytest.mark.parametrize(
    ("reply", "error", "retry_after"),
    [
        (Reply(429, {"Retry-After": "30"}), BatchRefused, 30.0),
        (Reply(503, {"Retry-After": "2"}), BatchRefused, 2.0),
        (Reply(500), BatchRefused, None),
        (Reply(413), TooLarge, None),
        (Reply(403), AuthFailed, None),
    ],
)
def test_what_a_failing_answer_means_for_the_batch(receiver, reply, error, retry_after):
    receiver.replies.append(reply)
    with pytest.raises(error) as caught:
        make(receiver.url).deliver(item_docs(2))
    assert type(caught.value) is error and str(caught.value).endswith("POST 127.0.0.1/hooks/likes")
    assert caught.value.__class__ is not BatchRefused or caught.value.retry_after == retry_after


def test_a_receiver_that_cannot_verify_the_signature_stops_the_sink(receiver):
    with pytest.raises(AuthFailed) as caught:
        make(receiver.url, secret=OTHER_SECRET).deliver(item_docs(1))
    assert receiver.refused == 1 and receiver.batches == []
    assert OTHER_SECRET not in str(caught.value) and WEBHOOK_SECRET not in str(caught.value)


@pytest.mark.parametrize("status", [400, 404, 409, 410, 422])
def test_another_4xx_refuses_the_batch_for_now_and_rejects_no_document(receiver, status):
    receiver.replies.append(Reply(status, {"Retry-After": "7"}, body=b"no thanks"))
    with pytest.raises(BatchRefused) as caught:
        make(receiver.url).deliver(item_docs(2))
    assert type(caught.value) is BatchRefused and caught.value.retry_after == 7.0
    assert str(caught.value) == f"{status}: batch refused by the receiver: POST 127.0.0.1/hooks/likes"


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed_and_refuses_the_batch_saying_so(receiver, status):
    with WebhookReceiver() as elsewhere:
        receiver.replies.append(Reply(status, {"Location": elsewhere.url}))
        with pytest.raises(BatchRefused) as caught:
            make(receiver.url).deliver(item_docs(2))
        assert str(caught.value) == f"{status}: redirect not followed: POST 127.0.0.1/hooks/likes"
        assert elsewhere.batches == [] and elsewhere.refused == 0


@pytest.mark.parametrize("reply", [Reply(404, body=b"no route"), Reply(308, {"Location": "https://elsewhere.test/"})])
def test_a_receiver_answering_the_whole_request_badly_for_a_while_dead_letters_nothing(db, receiver, reply):
    """A route missing during a deploy, a proxy's 404, an endpoint moved: more answers than SINK_MAX_TRIES, then
    the receiver is back — every item delivered, none dead-lettered, the refusals counted as such."""
    ids = add_items(db, 5)
    receiver.replies = [reply] * 4
    settings = load_settings(
        environ={
            "SINKS": "hooks",
            "SINK_HOOKS_KIND": "webhook",
            "SINK_HOOKS_URL": receiver.url,
            "SINK_HOOKS_SECRET": WEBHOOK_SECRET,
            "ALLOW_PRIVATE_HOSTS": "true",
        },
        env="test",
        read_dotenv=False,
    )
    clock = Clock()
    svc = SinkService(db, settings, owner="one", clock=clock, rng=random.Random(3))
    run(svc, clock, rounds=10, tick=700)
    figures = svc.snapshot()["hooks"]
    svc.stop(5)
    assert db[DEAD].count_documents({}) == 0 and db[QUEUE].count_documents({}) == 0
    assert receiver.ids() == set(ids)
    assert figures.failed["refused"] == 4 and figures.failed["rejected"] == 0 and figures.dead_lettered == 0


def test_a_slow_receiver_is_cut_at_the_timeout(receiver):
    receiver.replies.append(Reply(204, delay=3.0))
    with pytest.raises(BatchRefused, match="deadline of 1s exceeded"):
        make(receiver.url, timeout=1.0).deliver(item_docs(1))


def test_a_receiver_down_refuses_the_batch_and_the_retry_goes_through(receiver):
    with FaultProxy(receiver.url.rsplit("/hooks", 1)[0]) as proxy:
        sink = make(proxy.url + "/hooks/likes")
        docs = item_docs(2)
        proxy.down()
        with pytest.raises(BatchRefused, match="connection refused: POST 127.0.0.1/hooks/likes"):
            sink.deliver(docs)
        proxy.up()
        assert [o.kind for o in sink.deliver(docs)] == ["done", "done"]
        assert receiver.ids() == {doc.id for doc in docs}


# --- the URL's addresses -------------------------------------------------------------------------------------------
def test_without_allow_private_hosts_a_loopback_url_is_refused_before_any_connection(receiver):
    port = receiver.server.server_address[1]
    for url in (receiver.url, f"https://127.0.0.1:{port}/hooks/likes"):
        with pytest.raises(SettingsError, match="SINK_HOOK_URL"):
            make(url, settings=PUBLIC_ONLY)
    sink = make(f"https://localhost:{port}/hooks/likes", settings=PUBLIC_ONLY)  # a name: checked at connect
    with pytest.raises(BatchRefused, match="non-public address"):
        sink.deliver(item_docs(1))
    assert receiver.batches == [] and receiver.refused == 0


def test_with_allow_private_hosts_a_loopback_receiver_gets_the_batch(receiver):
    assert [o.kind for o in make(receiver.url, settings=PRIVATE).deliver(item_docs(1))] == ["done"]


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_not base64!", "plain text secret"])
def test_a_secret_that_is_not_a_standard_webhooks_secret_is_a_settings_error_not_quoting_it(receiver, secret):
    with pytest.raises(SettingsError, match="SINK_HOOK_SECRET") as caught:
        make(receiver.url, secret=secret)
    assert secret in ("", "whsec_") or secret not in str(caught.value)


def test_the_message_id_is_a_digest_of_the_ids_in_order():
    docs = item_docs(2, tag="fixed0000000")
    assert message_id(docs) == message_id(list(docs)) != message_id(docs[::-1])
    assert json.dumps(message_id(docs)).isascii()


def test_the_sink_kit_passes_on_the_webhook_sink(receiver):
    config = sink_config(WebhookSink, receiver.url, name="hook", SECRET=WEBHOOK_SECRET)
    report = check_sink(
        WebhookSink,
        config,
        count=lambda doc_id: int(doc_id in receiver.ids()),
        wrong={"SECRET": OTHER_SECRET},
        settings=PRIVATE,
    )
    assert report.skipped == ["per-document outcomes in a mixed batch: no bad documents given"]
    assert len(report.passed) == 7
