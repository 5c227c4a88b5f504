"""The `opensearch` sink against osmem-server (OpenSearch 3.8-compatible), directly and behind a fault proxy: the
bulk request's shape, every outcome per document and for the whole request, the index template, authentication,
and the kit (collector.testing.sinkkit)."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import replace

import pytest

from collector.settings import SettingsError, settings_for_tests
from collector.sinks.builtin.opensearch import OpenSearchSink
from collector.sinks.http import make_http
from collector.sinks.sdk import AuthFailed, BatchRefused, Doc, TooLarge
from collector.testing.sinkkit import check_sink, item_docs, sink_config

from helpers.sinkservers import Fault, FaultProxy, osmem

# one worker runs this module's tests: its module-scoped fixture is set up once (--dist loadgroup)
pytestmark = [
    pytest.mark.system,
    pytest.mark.xdist_group("opensearch"),
]

PASSWORD = "os-password-0042"
API_KEY = "os-api-key-0042-abcdef"
SETTINGS = settings_for_tests(allow_private_hosts=False)  # the cluster's address is never checked


@pytest.fixture(scope="module")
def server():
    with osmem() as running:
        yield running


@pytest.fixture
def index():
    return f"items-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def proxy(server):
    with FaultProxy(server.url) as fault_proxy:
        yield fault_proxy


def make(url, index, timeout=10.0, **options):
    config = replace(sink_config(OpenSearchSink, url, name="os", INDEX=index, **options), timeout=timeout)
    return OpenSearchSink(config, make_http(config, SETTINGS, OpenSearchSink.checks_addresses))


def template_file(tmp_path, properties):
    path = tmp_path / "template.json"
    path.write_text(json.dumps({"template": {"mappings": {"properties": properties}}}))
    return str(path)


def bulk_answer(*results):
    items = []
    for doc_id, status, error in results:
        result = {"_id": doc_id, "status": status}
        if error:
            result["error"] = error
        items.append({"index": result})
    return json.dumps({"errors": True, "items": items}).encode()


def test_one_bulk_request_of_ndjson_index_actions_by_id_without_id_or_type_in_the_body(server, proxy, index):
    docs = [Doc("a" * 24, {"title": "one", "_id": "sneaky", "tags": ["x"]}), Doc("b" * 24, {"title": "two"})]
    assert [o.kind for o in make(proxy.url, index).deliver(docs)] == ["done", "done"]
    (request,) = proxy.requests
    assert (request["method"], request["path"]) == ("POST", "/_bulk")
    assert request["headers"]["Content-Type"] == "application/x-ndjson"
    assert request["body"].endswith(b"\n")
    lines = [json.loads(line) for line in request["body"].splitlines()]
    assert lines == [
        {"index": {"_index": index, "_id": "a" * 24}},
        {"title": "one", "tags": ["x"]},
        {"index": {"_index": index, "_id": "b" * 24}},
        {"title": "two"},
    ]
    assert server.source(index, "a" * 24) == {"title": "one", "tags": ["x"]}


def test_a_template_is_put_before_the_first_delivery_and_a_mapping_error_rejects_that_document_only(
    server, index, tmp_path
):
    sink = make(server.url, index, TEMPLATE=template_file(tmp_path, {"title": {"type": "integer"}}))
    sink.prepare()
    status, body = server.call("GET", f"/_index_template/likeastore-{index}")
    assert status == 200 and body["index_templates"][0]["index_template"]["index_patterns"] == [index]
    good, bad = Doc("1" * 24, {"title": 7}), Doc("2" * 24, {"title": "a text"})
    outcomes = sink.deliver([good, bad, Doc("3" * 24, {"title": 8})])
    assert [o.kind for o in outcomes] == ["done", "reject", "done"]
    assert outcomes[1].reason.startswith("400: mapper_parsing_exception: failed to parse field [title]")
    assert server.count(index, bad.id) == 0 and server.count(index, good.id) == 1


def test_an_index_blocked_read_only_gives_per_document_retries_then_done_once_unblocked(server, index):
    sink = make(server.url, index)
    docs = item_docs(3)
    sink.deliver(docs[:1])
    assert server.call("PUT", f"/{index}/_settings", {"index.blocks.read_only_allow_delete": True})[0] == 200
    outcomes = sink.deliver(docs)
    assert [o.kind for o in outcomes] == ["retry"] * 3
    assert outcomes[0].reason.startswith("429: cluster_block_exception: index [")
    assert server.call("PUT", f"/{index}/_settings", {"index.blocks.read_only_allow_delete": None})[0] == 200
    assert [o.kind for o in sink.deliver(docs)] == ["done"] * 3


def test_per_document_statuses_409_done_5xx_retry_4xx_reject(proxy, index):
    docs = item_docs(5)
    proxy.faults.append(
        Fault(
            status=200,
            body=bulk_answer(
                (docs[0].id, 201, None),
                (docs[1].id, 409, {"type": "version_conflict_engine_exception", "reason": "newer version"}),
                (docs[2].id, 503, {"type": "unavailable_shards_exception", "reason": "primary not active"}),
                (docs[3].id, 404, {"type": "index_not_found_exception", "reason": "no such index"}),
                (docs[4].id, 400, {"type": "illegal_argument_exception", "reason": f"bad {PASSWORD}"}),
            ),
        )
    )
    outcomes = make(proxy.url, index, USERNAME="writer", PASSWORD=PASSWORD).deliver(docs)
    assert [o.kind for o in outcomes] == ["done", "done", "retry", "reject", "reject"]
    assert outcomes[2].reason == "503: unavailable_shards_exception: primary not active"
    assert outcomes[3].reason == "404: index_not_found_exception: no such index"
    assert outcomes[4].reason == "400: illegal_argument_exception: bad ***"


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        json.dumps({"errors": False, "items": []}).encode(),  # short: fewer results than documents
        json.dumps({"took": 1}).encode(),
        bulk_answer(("someone-else", 201, None), ("x", 201, None)),  # results for other documents
    ],
)
def test_a_malformed_or_short_bulk_answer_refuses_the_batch(proxy, index, body):
    proxy.faults.append(Fault(status=200, body=body))
    with pytest.raises(BatchRefused, match="answer"):
        make(proxy.url, index).deliver(item_docs(2))


@pytest.mark.parametrize(
    ("fault", "error", "retry_after"),
    [
        (Fault(status=429, headers={"Retry-After": "12"}), BatchRefused, 12.0),
        (Fault(status=503), BatchRefused, None),
        (Fault(status=413), TooLarge, None),
        (Fault(status=401), AuthFailed, None),
        (Fault(status=403), AuthFailed, None),
        (Fault(reset=True), BatchRefused, None),
        (Fault(delay=3.0), BatchRefused, None),
    ],
)
def test_whole_request_failures(proxy, index, fault, error, retry_after):
    proxy.faults.append(fault)
    sink = make(proxy.url, index, timeout=1.0, API_KEY=API_KEY)
    with pytest.raises(error) as caught:
        sink.deliver(item_docs(2))
    assert type(caught.value) is error and str(caught.value).endswith("127.0.0.1/_bulk")
    assert API_KEY not in str(caught.value)
    if retry_after is not None:
        assert caught.value.retry_after == retry_after


@pytest.mark.parametrize("status", [400, 404, 405])
def test_a_whole_request_4xx_refuses_the_batch_with_its_reason_and_rejects_no_document(proxy, index, status):
    error = {"error": {"type": "illegal_argument_exception", "reason": f"no handler ({PASSWORD})"}}
    proxy.faults.append(Fault(status=status, body=json.dumps(error).encode()))
    sink = make(proxy.url, index, USERNAME="writer", PASSWORD=PASSWORD)
    with pytest.raises(BatchRefused) as caught:
        sink.deliver(item_docs(2))
    assert str(caught.value) == f"{status}: illegal_argument_exception: no handler (***): POST 127.0.0.1/_bulk"


def test_a_cluster_down_refuses_and_its_data_is_there_when_it_is_back(server, proxy, index):
    sink = make(proxy.url, index)
    first = item_docs(2)
    sink.deliver(first)
    proxy.down()
    with pytest.raises(BatchRefused, match="connection refused: POST 127.0.0.1/_bulk"):
        sink.deliver(item_docs(2))
    proxy.up()
    assert [o.kind for o in sink.deliver(first)] == ["done", "done"]
    assert all(server.count(index, doc.id) == 1 for doc in first)


def test_a_batch_over_the_byte_limit_is_too_large_before_anything_is_sent(proxy, index):
    sink = make(proxy.url, index)
    sink.max_batch_bytes = 1000
    with pytest.raises(TooLarge, match="over the 1000-byte limit"):
        sink.deliver(item_docs(10))
    assert proxy.requests == []


def test_a_bulk_over_the_clusters_100_mib_limit_is_a_413_too_large(server, index):
    sink = make(server.url, index, timeout=60.0)
    sink.max_batch_bytes = 200 * 1024 * 1024  # past osmem's (and OpenSearch's) http.max_content_length
    big = "x" * (51 * 1024 * 1024)
    with pytest.raises(TooLarge, match="^413: batch too large"):
        sink.deliver([Doc("1" * 24, {"text": big}), Doc("2" * 24, {"text": big})])


# --- authentication ------------------------------------------------------------------------------------------------
def test_basic_authentication_and_a_wrong_password_stops_the_sink_at_prepare(proxy, index):
    proxy.require = {"Authorization": "Basic " + base64.b64encode(f"writer:{PASSWORD}".encode()).decode()}
    sink = make(proxy.url, index, USERNAME="writer", PASSWORD=PASSWORD)
    sink.prepare()
    assert [o.kind for o in sink.deliver(item_docs(1))] == ["done"]
    with pytest.raises(AuthFailed) as caught:
        make(proxy.url, index, USERNAME="writer", PASSWORD="wrong-password").prepare()
    assert str(caught.value) == f"401: credentials refused: HEAD 127.0.0.1/{index}"


def test_an_api_key_is_sent_as_apikey_authorization(proxy, index):
    proxy.require = {"Authorization": f"ApiKey {API_KEY}"}
    sink = make(proxy.url, index, API_KEY=API_KEY)
    sink.prepare()
    assert [o.kind for o in sink.deliver(item_docs(1))] == ["done"]


def test_a_403_when_looking_at_the_index_does_not_stop_a_writer(proxy, index):
    proxy.faults.append(Fault(status=403))
    make(proxy.url, index).prepare()  # no error: the delivery will say whether writing is allowed


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"API_KEY": API_KEY, "USERNAME": "writer", "PASSWORD": PASSWORD}, "SINK_OS_API_KEY"),
        ({"PASSWORD": PASSWORD}, "SINK_OS_USERNAME"),
        ({"INDEX": "Items/Bad"}, "SINK_OS_INDEX"),
        ({"TEMPLATE": "/nonexistent/template.json"}, "SINK_OS_TEMPLATE"),
    ],
)
def test_options_that_cannot_work_are_settings_errors_naming_them(server, options, named):
    with pytest.raises(SettingsError) as caught:
        make(server.url, options.pop("INDEX", "items"), **options)
    assert named in str(caught.value)
    assert PASSWORD not in str(caught.value) and API_KEY not in str(caught.value)


@pytest.mark.parametrize(("content", "problem"), [("{not json", "is not JSON"), ("[1, 2]", "a JSON object")])
def test_a_bad_template_file_is_a_clear_settings_error(server, tmp_path, content, problem):
    path = tmp_path / "template.json"
    path.write_text(content)
    with pytest.raises(SettingsError, match=problem):
        make(server.url, "items", TEMPLATE=str(path))


def test_a_template_the_cluster_refuses_refuses_prepare_with_its_reason(server, index, tmp_path):
    sink = make(server.url, index, TEMPLATE=template_file(tmp_path, {"title": {"type": "nonsense"}}))
    with pytest.raises(BatchRefused, match=r"^400: index template refused: illegal_argument_exception: composable"):
        sink.prepare()


# --- the kit -------------------------------------------------------------------------------------------------------
def test_the_sink_kit_passes_on_the_opensearch_sink(server, proxy, index, tmp_path):
    proxy.require = {"Authorization": f"ApiKey {API_KEY}"}
    config = sink_config(
        OpenSearchSink,
        proxy.url,
        name="os",
        INDEX=index,
        API_KEY=API_KEY,
        TEMPLATE=template_file(tmp_path, {"stars": {"type": "integer"}}),
    )
    bad = [Doc(f"bad{k}" + "0" * 21, {"stars": f"not a number {k}"}) for k in range(2)]
    report = check_sink(
        OpenSearchSink,
        config,
        count=lambda doc_id: server.count(index, doc_id),
        bad=bad,
        wrong={"API_KEY": "a-wrong-api-key-0000"},
        settings=SETTINGS,
    )
    assert report.skipped == []
    assert len(report.passed) == 8
