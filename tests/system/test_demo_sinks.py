"""`collector demo` shows a sink working: after the collection a sink service delivers every item to a webhook
receiver that checks each signature and into osmem-server, which then finds them; a receiver refusing the
signatures makes the demo fail, saying why."""

from __future__ import annotations

import io
import json

import pytest

from collector import cli
from collector.devtools import demo, destinations


def summary_of(out: io.StringIO) -> dict:
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_the_demo_delivers_every_item_to_a_webhook_and_into_opensearch_which_finds_them():
    out = io.StringIO()
    assert demo.run(out=out, sinks=("webhook", "opensearch")) == 0
    summary = summary_of(out)
    items = summary["items"]
    assert items == summary["items_expected"] > 300
    sinks = summary["sinks"]
    assert sinks["items"] == items
    hook, search = sinks["webhook"], sinks["opensearch"]
    assert hook["delivered"] == hook["received"] == items and hook["missing"] == 0 and hook["bad_signatures"] == 0
    assert hook["requests"] >= 2  # batches of 500 at most
    assert search["delivered"] == search["count"] == items
    assert search["search"] and search["hit"]  # a word of the titles finds an item
    text = out.getvalue()
    assert f"sink: {items} of {items} items delivered to webhook (signatures verified)" in text
    assert f"sink: {items} of {items} items delivered to opensearch (osmem-server" in text


def test_a_receiver_refusing_every_signature_fails_the_demo_and_says_so(monkeypatch):
    monkeypatch.setattr(destinations, "verified", lambda *args: False)
    out = io.StringIO()
    assert demo.run(out=out, sinks=("webhook",)) == 1
    hook = summary_of(out)["sinks"]["webhook"]
    assert hook["bad_signatures"] >= 1 and hook["received"] == 0 and hook["missing"] == summary_of(out)["items"]
    assert "requests refused for a bad signature" in out.getvalue()


def test_no_sink_leaves_the_summary_as_it_was():
    out = io.StringIO()
    assert demo.run(out=out, sinks=()) == 0
    assert "sinks" not in summary_of(out) and "sink:" not in out.getvalue()


def test_an_unknown_sink_is_a_usage_error(capsys):
    assert cli.main(["demo", "--sink", "kafka"]) == 2
    assert "--sink takes webhook, opensearch, all or none" in capsys.readouterr().err


def test_the_demos_receiver_takes_what_the_webhook_sink_signs_and_refuses_another_secret():
    from collector.settings import load_settings
    from collector.sinks.builtin.webhook import WebhookSink
    from collector.sinks.http import make_http
    from collector.sinks.sdk import DONE, AuthFailed, Doc, SinkConfig

    settings = load_settings({"ALLOW_PRIVATE_HOSTS": "true"}, read_dotenv=False)
    secret = destinations.new_secret()
    batch = [Doc("a" * 24, {"title": "octo/one"}), Doc("b" * 24, {"title": "octo/two"})]
    receiver = destinations.Receiver(secret)
    with receiver as url:
        for signing in (secret, destinations.new_secret()):
            config = SinkConfig(name="webhook", kind="webhook", url=url, options={"SECRET": signing})
            sink = WebhookSink(config, make_http(config, settings, True))
            if signing == secret:
                assert list(sink.deliver(batch)) == [DONE, DONE]
            else:
                with pytest.raises(AuthFailed):  # answered 401: the sink stops, loudly
                    sink.deliver(batch)
            sink.http.close()
    assert receiver.ids == {"a" * 24, "b" * 24}
    assert receiver.stats() == {"received": 2, "requests": 1, "bad_signatures": 1}
