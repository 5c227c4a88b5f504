"""A sink's credentials in the forms they take on the wire — base64 of `user:password` (basic authentication), an
API key sent as `ApiKey <base64 of id:key>` decoded, and its key alone — are masked wherever a server or a proxy
echoes them without the scheme word: the reason of a verdict, the queue entry's lastError, the log."""

from __future__ import annotations

import base64
import logging

from collector.sdk.redaction import redact
from collector.settings import load_settings
from collector.sinks.builtin.opensearch import OpenSearchSink
from collector.sinks.config import sink_configs
from collector.sinks.delivery import deliver, scrubber
from collector.sinks.http import Answer
from collector.sinks.registry import SinkRegistry
from collector.sinks.sdk import Doc
from collector.sinks.store import QUEUE

from helpers.fakesink import Clock, add_items, run

PASSWORD = "Pa55word-xyz-9"
BASIC = base64.b64encode(f"collector:{PASSWORD}".encode()).decode()
BARE_KEY = "ui2lp2axTNmsyakw9tvNnw"
API_KEY = base64.b64encode(f"VuaCfGcBCdbkQm-e5aOx:{BARE_KEY}".encode()).decode()


class EchoHttp:
    """An OpenSearch (or a proxy before it) whose error quotes the credential it was sent, without `Basic` or
    `ApiKey`, in the form `echo` gives (the header's value by default)."""

    def __init__(self, echo=lambda credential: credential):
        self.echo = echo

    def request(self, method, url, *, body=None, headers=None, keep_body=True):
        if method == "HEAD":
            return Answer(200)
        credential = headers["Authorization"].split(" ", 1)[1]
        reason = f"unknown user for token {self.echo(credential)}"
        return Answer(400, {}, b'{"error": {"type": "security_exception", "reason": "' + reason.encode() + b'"}}')

    def close(self):
        pass


def environ(**options: str) -> dict[str, str]:
    prefix = "SINK_SEARCH_"
    return {"SINKS": "search", prefix + "KIND": "opensearch", prefix + "URL": "https://os.test:9200"} | {
        prefix + name: value for name, value in options.items()
    }


def config_of(**options: str):
    (config,) = sink_configs(load_settings(environ=environ(**options), env="test", read_dotenv=False), SinkRegistry())
    return config


def reason_of(config, http) -> str:
    docs = [Doc(id="a" * 24, body={"t": 1})]
    (verdict,) = deliver(OpenSearchSink(config, http), docs, scrubber(config.secret_values))
    return verdict.reason


def test_an_echoed_basic_token_is_masked_in_the_reason():
    reason = reason_of(config_of(USERNAME="collector", PASSWORD=PASSWORD), EchoHttp())
    assert "unknown user for token ***" in reason
    assert BASIC not in reason and BASIC.rstrip("=") not in reason and PASSWORD not in reason


def test_an_echoed_api_key_is_masked_raw_decoded_and_bare():
    config = config_of(API_KEY=API_KEY)
    decode = lambda key: base64.b64decode(key).decode()  # noqa: E731
    for echo, shown in ((lambda key: key, API_KEY), (decode, decode(API_KEY)), (lambda key: BARE_KEY, BARE_KEY)):
        reason = reason_of(config, EchoHttp(echo))
        assert shown not in reason and "token ***" in reason, reason


def test_the_wire_forms_are_the_sinks_secret_values_and_nothing_short():
    values = set(config_of(USERNAME="collector", PASSWORD=PASSWORD).secret_values)
    assert {PASSWORD, BASIC} <= values and "collector" not in values
    assert {API_KEY, BARE_KEY, base64.b64decode(API_KEY).decode()} <= set(config_of(API_KEY=API_KEY).secret_values)
    assert all(len(value) >= 8 for value in values - {PASSWORD})


def test_the_service_keeps_an_echoed_token_out_of_last_error_and_the_log(db, caplog):
    from collector.sinks.service import SinkService

    caplog.set_level(logging.DEBUG)
    settings = load_settings(environ=environ(USERNAME="collector", PASSWORD=PASSWORD), env="test", read_dotenv=False)
    clock = Clock()
    svc = SinkService(db, settings, owner="one", clock=clock, http_factory=lambda *_: EchoHttp())
    add_items(db, 2)
    run(svc, clock, rounds=4, tick=700)
    errors = [entry["lastError"]["message"] for entry in db[QUEUE].find()]
    assert len(errors) == 2 and all("unknown user for token ***" in error for error in errors), errors
    assert BASIC not in redact(f"a proxy said {BASIC}")  # the process-wide redaction knows it while it runs
    svc.stop(5)
    assert all(BASIC not in record.getMessage() for record in caplog.records)
    assert all(BASIC not in str(entry) for entry in db[QUEUE].find())
