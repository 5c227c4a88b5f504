"""The sink kit itself (collector.testing.sinkkit): its documented example runs, a sink that does what a sink must
passes, and each thing a sink can get wrong is caught with a message saying which check failed. (The kit on the
three built-in sinks: test_opensearch.py, test_typesense.py, test_webhook.py.)"""

from __future__ import annotations

import textwrap

import pytest

from collector.sinks.sdk import DONE, AuthFailed, BatchRefused, Doc, Option, Reject, Sink
from collector.testing import sinkkit
from collector.testing.sinkkit import SinkKitFailure, check_sink, item_docs, sink_config

from helpers.sinkservers import WebhookReceiver

pytestmark = pytest.mark.system

TOKEN = "memory-sink-token-0042"
BAD = [Doc(f"bad{k}", {"bad": True}) for k in range(2)]


class MemorySink(Sink):
    """A destination held in a dict (`held`, id -> copies): it asks its URL first (so a down URL is refused, through
    the sink's own http) and refuses a wrong TOKEN."""

    kind = "memory"
    options = (Option("TOKEN", "the destination's credential", secret=True),)
    held: dict[str, int] = {}

    def _ask(self) -> None:
        self.http.request("GET", self.config.url)
        if self.option("TOKEN") != TOKEN:
            raise AuthFailed("401: credentials refused")

    def prepare(self) -> None:
        self._ask()

    def deliver(self, batch):
        self._ask()
        outcomes = []
        for doc in batch:
            if doc.body.get("bad"):
                outcomes.append(Reject("400: bad document"))
            else:
                self.keep(doc)
                outcomes.append(DONE)
        return outcomes

    def keep(self, doc: Doc) -> None:
        self.held[doc.id] = 1


class Appending(MemorySink):
    def keep(self, doc):
        self.held[doc.id] = self.held.get(doc.id, 0) + 1


class Short(MemorySink):
    def deliver(self, batch):
        return super().deliver(batch)[:-1]


class Reversed(MemorySink):
    def deliver(self, batch):
        return list(reversed(super().deliver(batch)))


class Leaky(MemorySink):
    def deliver(self, batch):
        return [
            Reject(f"refused with {self.option('TOKEN')}") if o.kind == "reject" else o for o in super().deliver(batch)
        ]


class Unrefused(MemorySink):
    def _ask(self):
        try:
            super()._ask()
        except BatchRefused as exc:
            raise RuntimeError("down") from exc


class Trusting(MemorySink):
    def _ask(self):
        self.http.request("GET", self.config.url)


@pytest.fixture
def url():
    with WebhookReceiver() as receiver:  # something that answers
        yield receiver.url


def run(kind, url, **kwargs):
    kind.held = {}
    config = sink_config(kind, url, TOKEN=TOKEN)
    return check_sink(kind, config, count=lambda doc_id: kind.held.get(doc_id, 0), **kwargs)


def test_the_documented_example_runs():
    example = sinkkit.__doc__.split("with the test extra):\n")[1].split("\nA check that fails")[0]
    scope: dict = {}
    exec(compile(textwrap.dedent(example), "sinkkit example", "exec"), scope)
    assert "idempotent by id" in scope["report"].passed


def test_a_sink_that_does_what_a_sink_must_passes_every_check(url):
    report = run(MemorySink, url, bad=BAD, wrong={"TOKEN": "wrong-token"})
    assert report.passed == [
        "prepare is idempotent",
        "one outcome per document",
        "each id held once",
        "idempotent by id",
        "per-document outcomes in a mixed batch",
        "a destination down is BatchRefused",
        "wrong credentials are AuthFailed",
        "no secret in messages",
    ]
    assert report.skipped == []


def test_without_bad_documents_or_wrong_credentials_those_checks_are_skipped_and_said(url):
    report = run(MemorySink, url)
    assert [line.split(":")[0] for line in report.skipped] == [
        "per-document outcomes in a mixed batch",
        "wrong credentials are AuthFailed",
    ]


@pytest.mark.parametrize(
    ("kind", "check"),
    [
        (Appending, "idempotent by id: held"),
        (Short, "one outcome per document: 9 outcomes for 10 documents"),
        (Reversed, "per-document outcomes in a mixed batch: outcomes"),
        (Leaky, "no secret in messages: 2 reasons or messages hold a secret"),
        (Unrefused, "a destination down is BatchRefused: RuntimeError raised"),
        (Trusting, "wrong credentials are AuthFailed: nothing raised"),
    ],
)
def test_each_thing_a_sink_can_get_wrong_is_caught(url, kind, check):
    with pytest.raises(SinkKitFailure) as caught:
        run(kind, url, bad=BAD, wrong={"TOKEN": "wrong-token"})
    assert str(caught.value).startswith(f"sink kit, {check}")
    assert TOKEN not in str(caught.value)


def test_item_docs_are_shaped_like_items_with_fresh_ids():
    first, second = item_docs(3), item_docs(3)
    assert len({doc.id for doc in first + second}) == 6
    assert all(len(doc.id) == 24 and set(doc.body) >= {"user", "type", "title", "date"} for doc in first)


def test_sink_config_takes_the_kinds_defaults_and_hides_its_secrets():
    config = sink_config(MemorySink, "http://127.0.0.1:1", TOKEN=TOKEN)
    assert (config.kind, config.options["TOKEN"], config.secret_values) == ("memory", TOKEN, (TOKEN,))
