"""The `typesense` sink against the real Typesense 0.24.1, directly and behind a fault proxy: the collection made
with an automatic schema, the import's shape and its one result line per document, what cannot be indexed made
indexable, every outcome, and the kit (collector.testing.sinkkit)."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from collector.settings import SettingsError, settings_for_tests
from collector.sinks.builtin.typesense import TypesenseSink, indexable
from collector.sinks.http import make_http
from collector.sinks.sdk import AuthFailed, BatchRefused, Doc, TooLarge
from collector.testing.sinkkit import check_sink, item_docs, sink_config

from helpers.sinkservers import Fault, FaultProxy, typesense

# one worker runs this module's tests: its module-scoped fixture is set up once (--dist loadgroup)
pytestmark = [
    pytest.mark.system,
    pytest.mark.xdist_group("typesense"),
]

SETTINGS = settings_for_tests(allow_private_hosts=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with typesense(tmp_path_factory.mktemp("typesense")) as running:
        yield running


@pytest.fixture
def collection():
    return f"items_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def proxy(server):
    with FaultProxy(server.url) as fault_proxy:
        yield fault_proxy


def make(url, collection, api_key, timeout=10.0):
    config = sink_config(TypesenseSink, url, name="ts", COLLECTION=collection, API_KEY=api_key)
    config = replace(config, timeout=timeout)
    return TypesenseSink(config, make_http(config, SETTINGS, TypesenseSink.checks_addresses))


def lines(*results):
    return b"\n".join(json.dumps(result).encode() for result in results)


def test_prepare_makes_the_collection_with_an_automatic_nested_schema_once(server, collection):
    sink = make(server.url, collection, server.api_key)
    sink.prepare()
    sink.prepare()
    status, schema = server.call("GET", f"/collections/{collection}")
    assert status == 200 and schema["enable_nested_fields"] is True
    assert [(f["name"], f["type"]) for f in schema["fields"]] == [(".*", "auto")]


def test_an_existing_collection_is_left_as_it_is(server, collection):
    fields = [{"name": "title", "type": "string"}]
    assert server.call("POST", "/collections", {"name": collection, "fields": fields})[0] == 201
    make(server.url, collection, server.api_key).prepare()
    assert [f["name"] for f in server.call("GET", f"/collections/{collection}")[1]["fields"]] == ["title"]


def test_one_import_upserting_json_lines_with_the_item_id_and_nested_fields_indexed(server, proxy, collection):
    sink = make(proxy.url, collection, server.api_key)
    sink.prepare()
    docs = [Doc("a" * 24, {"title": "one", "id": "its-own", "userData": {"name": "Ann"}}), Doc("b" * 24, {"n": 2})]
    assert [o.kind for o in sink.deliver(docs)] == ["done", "done"]
    request = proxy.requests[-1]
    assert (request["method"], request["path"]) == ("POST", f"/collections/{collection}/documents/import?action=upsert")
    sent = [json.loads(line) for line in request["body"].splitlines()]
    assert sent == [{"title": "one", "id": "a" * 24, "userData": {"name": "Ann"}}, {"n": 2, "id": "b" * 24}]
    assert server.document(collection, "a" * 24)["userData"] == {"name": "Ann"}
    query = f"/collections/{collection}/documents/search?q=Ann&query_by=userData.name"
    assert [hit["document"]["id"] for hit in server.call("GET", query)[1]["hits"]] == ["a" * 24]


def test_what_typesense_cannot_index_is_made_indexable(server, collection):
    sink = make(server.url, collection, server.api_key)
    sink.prepare()
    doc = Doc("c" * 24, {"tags": ["a", None, 1], "nest": [[1, 2], [3]], "objs": [{"a": 1}, None], "empty": []})
    assert [o.kind for o in sink.deliver([doc])] == ["done"]
    held = server.document(collection, doc.id)
    assert (held["tags"], held["nest"], held["objs"]) == (["a", "1"], ["[1,2]", "[3]"], [{"a": 1}])


def test_indexable_keeps_what_typesense_takes():
    value = {"n": 1, "f": 2.5, "ok": True, "s": "x", "nums": [1, 2.5], "obj": {"list": [True, False]}, "none": None}
    assert indexable(value) == value


def test_a_type_conflict_rejects_that_document_only_without_echoing_it(server, collection):
    sink = make(server.url, collection, server.api_key)
    sink.prepare()
    sink.deliver([Doc("1" * 24, {"stars": 5})])
    outcomes = sink.deliver([Doc("2" * 24, {"stars": 6}), Doc("3" * 24, {"stars": "many, the doc's own text"})])
    assert [o.kind for o in outcomes] == ["done", "reject"]
    assert outcomes[1].reason == "400: Field `stars` must be an int64."


def test_per_line_results_transient_ones_retried(proxy, collection, server):
    docs = item_docs(5)
    proxy.faults.append(
        Fault(
            status=200,
            body=lines(
                {"success": True},
                {"success": False, "code": 503, "error": "Not Ready or Lagging", "document": "{...}"},
                {"success": False, "code": 429, "error": "Rate limit exceeded"},
                {"success": False, "error": "Request timed out."},
                {"success": False, "code": 404, "error": "Could not find a field named `x`.", "document": "{doc}"},
            ),
        )
    )
    outcomes = make(proxy.url, collection, server.api_key).deliver(docs)
    assert [o.kind for o in outcomes] == ["done", "retry", "retry", "retry", "reject"]
    assert outcomes[1].reason == "503: Not Ready or Lagging"
    assert outcomes[4].reason == "404: Could not find a field named `x`."


@pytest.mark.parametrize(
    "body",
    [lines({"success": True}), lines({"success": True}, {"success": True}, {"success": True}), b"ok\nok"],
)
def test_an_answer_without_one_json_line_per_document_refuses_the_batch(proxy, collection, server, body):
    proxy.faults.append(Fault(status=200, body=body))
    with pytest.raises(BatchRefused, match="answer"):
        make(proxy.url, collection, server.api_key).deliver(item_docs(2))


def test_a_wrong_api_key_stops_the_sink_at_prepare_and_at_deliver(server, collection):
    sink = make(server.url, collection, "a-wrong-api-key-0042")
    for call in (sink.prepare, lambda: sink.deliver(item_docs(1))):
        with pytest.raises(AuthFailed) as caught:
            call()
        assert "a-wrong-api-key-0042" not in str(caught.value) and "127.0.0.1/collections/" in str(caught.value)


@pytest.mark.parametrize(
    ("fault", "error", "retry_after"),
    [
        (Fault(status=429, headers={"Retry-After": "5"}), BatchRefused, 5.0),
        (Fault(status=503), BatchRefused, None),
        (Fault(status=413), TooLarge, None),
        (Fault(status=403), AuthFailed, None),
        (Fault(delay=3.0), BatchRefused, None),
        (Fault(reset=True), BatchRefused, None),
    ],
)
def test_whole_request_failures(server, proxy, collection, fault, error, retry_after):
    proxy.faults.append(fault)
    with pytest.raises(error) as caught:
        make(proxy.url, collection, server.api_key, timeout=1.0).deliver(item_docs(2))
    assert type(caught.value) is error and server.api_key not in str(caught.value)
    assert "?action" not in str(caught.value)
    if retry_after is not None:
        assert caught.value.retry_after == retry_after


def test_a_server_down_refuses_and_the_collection_is_there_when_it_is_back(server, proxy, collection):
    sink = make(proxy.url, collection, server.api_key)
    sink.prepare()
    docs = item_docs(2)
    proxy.down()
    with pytest.raises(BatchRefused, match="connection refused: "):
        sink.deliver(docs)
    proxy.up()
    assert [o.kind for o in sink.deliver(docs)] == ["done", "done"]


def test_a_server_skipping_writes_refuses_the_batch_and_rejects_no_document(tmp_path):
    with typesense(tmp_path / "skipping", "skip-key", "--skip-writes=true") as skipping:
        sink = make(skipping.url, "items", "skip-key")
        with pytest.raises(BatchRefused, match="^422: Skipping writes.: POST 127.0.0.1/collections$"):
            sink.prepare()
        import_path = "127.0.0.1/collections/items/documents/import"
        with pytest.raises(BatchRefused, match=f"^422: Skipping writes.: POST {import_path}$"):
            sink.deliver(item_docs(2))


def test_a_collection_dropped_after_prepare_is_made_again(server, collection):
    sink = make(server.url, collection, server.api_key)
    sink.prepare()
    assert server.call("DELETE", f"/collections/{collection}")[0] == 200
    with pytest.raises(BatchRefused, match="created again") as caught:
        sink.deliver(item_docs(1))
    assert caught.value.retry_after == 0.0
    assert [o.kind for o in sink.deliver(item_docs(1))] == ["done"]


def test_a_batch_over_the_byte_limit_is_too_large_before_anything_is_sent(server, proxy, collection):
    sink = make(proxy.url, collection, server.api_key)
    sink.max_batch_bytes = 500
    with pytest.raises(TooLarge):
        sink.deliver(item_docs(5))
    assert proxy.requests == []


@pytest.mark.parametrize(
    ("options", "named"), [({"API_KEY": ""}, "SINK_TS_API_KEY"), ({"COLLECTION": "a/b"}, "SINK_TS_COLLECTION")]
)
def test_options_that_cannot_work_are_settings_errors(server, options, named):
    with pytest.raises(SettingsError, match=named):
        make(server.url, options.get("COLLECTION", "items"), options.get("API_KEY", "k"))


def test_the_sink_kit_passes_on_the_typesense_sink(server, collection):
    fields = [{"name": "stars", "type": "int32", "optional": True}, {"name": ".*", "type": "auto"}]
    assert server.call("POST", "/collections", {"name": collection, "fields": fields})[0] == 201
    config = sink_config(TypesenseSink, server.url, name="ts", COLLECTION=collection, API_KEY=server.api_key)
    bad = [Doc(f"bad{k}", {"stars": {"not": "a number"}}) for k in range(2)]
    report = check_sink(
        TypesenseSink,
        config,
        count=lambda doc_id: server.count(collection, doc_id),
        bad=bad,
        wrong={"API_KEY": "a-wrong-api-key-0000"},
        settings=SETTINGS,
    )
    assert report.skipped == [] and len(report.passed) == 8
