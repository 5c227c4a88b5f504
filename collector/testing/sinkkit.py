"""A test kit for sinks: what every destination must do, checked against the author's own test server.

`check_sink(kind, config, count=...)` makes the sink as the sink service does (its `http` from sinks/http.py) and
checks that:

- prepare() may run twice (it runs again after every resume);
- deliver() gives one outcome per document, in order: a batch of good documents all done;
- each id is held once at the destination, and delivering the same documents again leaves each once (idempotent
  by id: the service delivers at least once, so a document may come twice);
- with `bad` documents (ones the destination refuses for themselves), a batch mixing good and bad ones gets done
  for the good and reject for the bad, each in its place, and the bad ones are not held;
- a destination that is down (nothing listening) is a BatchRefused, for prepare() and deliver() alike;
- with `wrong` option values (a credential the destination refuses), prepare() or deliver() raises AuthFailed;
- no secret of the configuration (nor a wrong one) appears in any reason or exception message.

`count(doc_id)` says how many documents the destination holds under that id (ask your server: a search, a GET by
id, what your receiver recorded). A runnable example with the built-in OpenSearch sink and osmem-server (both come
with the test extra):

    import urllib.request
    from urllib.error import HTTPError

    from osmem_server import OsmemServer

    from collector.sinks.builtin.opensearch import OpenSearchSink
    from collector.testing.sinkkit import check_sink, sink_config

    with OsmemServer.start(japanese=False) as server:

        def count(doc_id: str) -> int:
            try:
                urllib.request.urlopen(f"{server.url}/kit/_doc/{doc_id}")
            except HTTPError:
                return 0
            return 1

        config = sink_config(OpenSearchSink, server.url, INDEX="kit")
        report = check_sink(OpenSearchSink, config, count=count)
        assert "idempotent by id" in report.passed

A check that fails raises `SinkKitFailure` (an AssertionError) saying which and what was seen.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..settings import Settings, settings_for_tests
from ..sinks.http import make_http
from ..sinks.sdk import AuthFailed, BatchRefused, Doc, Outcome, Sink, SinkConfig

__all__ = ["KitReport", "SinkKitFailure", "build", "check_sink", "item_docs", "sink_config"]


class SinkKitFailure(AssertionError):
    """A check of the kit failed."""


@dataclass
class KitReport:
    passed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # checks not run, and why
    seen: list[str] = field(default_factory=list)  # every reason and exception message met (checked for secrets)


def sink_config(kind: type[Sink], url: str, *, name: str = "kit", **options: str) -> SinkConfig:
    """A SinkConfig for `kind` at `url` with these options (its defaults for the rest); the secret ones among them
    are the config's secret values."""
    values = {option.name: option.default for option in kind.options if option.default}
    values.update(options)
    hidden = tuple(values[o.name] for o in kind.options if o.secret and values.get(o.name))
    return SinkConfig(name=name, kind=kind.kind, url=url, options=values, secret_values=hidden)


def build(kind: type[Sink], config: SinkConfig, settings: Settings | None = None) -> Sink:
    """The sink as the service makes it (private addresses allowed unless `settings` say otherwise: test servers
    listen on 127.0.0.1)."""
    settings = settings or settings_for_tests(allow_private_hosts=True)
    return kind(config, make_http(config, settings, kind.checks_addresses))


def item_docs(count: int, tag: str | None = None) -> list[Doc]:
    """`count` documents shaped like stored items, with ids (24 hex digits) no earlier run used."""
    run = tag or secrets.token_hex(6)
    return [
        Doc(
            f"{run}{k:012x}",
            {
                "user": "ann@example.com",
                "type": "github",
                "itemId": f"{run}-{k}",
                "title": f"Item {k} of run {run}",
                "description": "a repository someone starred",
                "authorName": "bob",
                "source": f"https://github.com/bob/{run}-{k}",
                "date": "2026-06-01T12:00:00.000Z",
                "tags": ["python", "sinks"],
                "userData": {"email": "ann@example.com", "name": "Ann"},
            },
        )
        for k in range(count)
    ]


class _Kit:
    def __init__(self, kind: type[Sink], config: SinkConfig, count: Callable[[str], int], settings: Settings | None):
        self.kind, self.config, self.count, self.settings = kind, config, count, settings
        self.report = KitReport()
        self.hidden = set(config.secret_values)

    def fail(self, check: str, what: str) -> SinkKitFailure:
        return SinkKitFailure(f"sink kit, {check}: {what}")

    def deliver(self, sink: Sink, batch: Sequence[Doc], check: str) -> list[Outcome]:
        outcomes = list(sink.deliver(batch))
        self.report.seen += [o.reason for o in outcomes if o.reason]
        if len(outcomes) != len(batch):
            raise self.fail(check, f"{len(outcomes)} outcomes for {len(batch)} documents")
        return outcomes

    def held(self, docs: Sequence[Doc], check: str, expected: int = 1) -> None:
        counts = {doc.id: self.count(doc.id) for doc in docs}
        wrong = {doc_id: n for doc_id, n in counts.items() if n != expected}
        if wrong:
            raise self.fail(check, f"held {wrong} times, expected {expected} each")

    def all_done(self, outcomes: Sequence[Outcome], check: str) -> None:
        if any(o.kind != "done" for o in outcomes):
            raise self.fail(check, f"not all done: {[(o.kind, o.reason) for o in outcomes]}")

    def raises(self, expected: type[Exception], call: Callable[[], Any], check: str) -> None:
        try:
            call()
        except expected as exc:
            self.report.seen.append(str(exc))
            return
        except Exception as exc:
            raise self.fail(check, f"{type(exc).__name__} raised, expected {expected.__name__}: {exc}") from exc
        raise self.fail(check, f"nothing raised, expected {expected.__name__}")

    def passed(self, check: str) -> None:
        self.report.passed.append(check)


def check_sink(
    kind: type[Sink],
    config: SinkConfig,
    *,
    count: Callable[[str], int],
    bad: Sequence[Doc] = (),
    wrong: Mapping[str, str] | None = None,
    settings: Settings | None = None,
    size: int = 10,
) -> KitReport:
    """Run every check (the module's docstring) on `kind` at `config.url`; the report names what passed."""
    kit = _Kit(kind, config, count, settings)
    sink = build(kind, config, settings)
    try:
        _check_delivery(kit, sink, size)
        _check_mixed(kit, sink, bad, size)
    finally:
        sink.close()
    _check_down(kit)
    _check_wrong(kit, wrong)
    leaked = [text for text in kit.report.seen if any(secret in text for secret in kit.hidden)]
    if leaked:
        raise kit.fail("no secret in messages", f"{len(leaked)} reasons or messages hold a secret of the config")
    kit.passed("no secret in messages")
    return kit.report


def _check_delivery(kit: _Kit, sink: Sink, size: int) -> None:
    sink.prepare()
    sink.prepare()
    kit.passed("prepare is idempotent")
    docs = item_docs(size)
    kit.all_done(kit.deliver(sink, docs, "one outcome per document"), "one outcome per document")
    kit.passed("one outcome per document")
    kit.held(docs, "each id held once")
    kit.passed("each id held once")
    kit.all_done(kit.deliver(sink, docs, "idempotent by id"), "idempotent by id")
    kit.held(docs, "idempotent by id")
    kit.passed("idempotent by id")


def _check_mixed(kit: _Kit, sink: Sink, bad: Sequence[Doc], size: int) -> None:
    check = "per-document outcomes in a mixed batch"
    if not bad:
        kit.report.skipped.append(f"{check}: no bad documents given")
        return
    good = item_docs(max(len(bad), 2))
    batch: list[Doc] = []
    for k, doc in enumerate(good):
        batch.append(doc)
        if k < len(bad):
            batch.append(bad[k])
    outcomes = kit.deliver(sink, batch, check)
    expected = ["reject" if doc in bad else "done" for doc in batch]
    kinds = [o.kind for o in outcomes]
    if kinds != expected:
        raise kit.fail(check, f"outcomes {kinds}, expected {expected}: {[o.reason for o in outcomes]}")
    kit.held(good, check)
    kit.held(bad, check, expected=0)
    kit.passed(check)


def _check_down(kit: _Kit) -> None:
    check = "a destination down is BatchRefused"
    with socket.socket() as probe:  # a port nothing listens on (closed again before the sink connects)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = urlunsplit(urlsplit(kit.config.url)._replace(netloc=f"127.0.0.1:{port}"))
    sink = build(kit.kind, replace(kit.config, url=down, timeout=5.0), kit.settings)
    try:
        if type(sink).prepare is not Sink.prepare:
            kit.raises(BatchRefused, sink.prepare, check)
        kit.raises(BatchRefused, lambda: sink.deliver(item_docs(2)), check)
    finally:
        sink.close()
    kit.passed(check)


def _check_wrong(kit: _Kit, wrong: Mapping[str, str] | None) -> None:
    check = "wrong credentials are AuthFailed"
    if not wrong:
        kit.report.skipped.append(f"{check}: no wrong option values given")
        return
    kit.hidden |= {value for value in wrong.values() if value}
    options = {**kit.config.options, **wrong}
    config = replace(kit.config, options=options, secret_values=(*kit.config.secret_values, *wrong.values()))
    sink = build(kit.kind, config, kit.settings)

    def attempt() -> None:
        sink.prepare()
        sink.deliver(item_docs(2))

    try:
        kit.raises(AuthFailed, attempt, check)
    finally:
        sink.close()
    kit.passed(check)
