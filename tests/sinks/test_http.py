"""The sinks' HTTP client (collector/sinks/http.py) against real sockets: answers as they come, every failure a
BatchRefused whose message names host and path only, the whole-request deadline, the 16 MiB cap, no redirects,
and the address checks a webhook's URL gets."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from collector.settings import SettingsError, settings_for_tests
from collector.sinks.http import MAX_ANSWER_BYTES, Answer, answer_failure, make_http, retry_after, scrub
from collector.sinks.sdk import AuthFailed, BatchRefused, SinkConfig, TooLarge

from helpers import free_port
from helpers.sinkservers import Fault, FaultProxy, WebhookReceiver, osmem, self_signed

# one worker runs this module's tests: its module-scoped fixture is set up once (--dist loadgroup)
pytestmark = [
    pytest.mark.system,
    pytest.mark.xdist_group("sinks_http"),
]

SECRET = "s3cr3t-value-0042"
PRIVATE = settings_for_tests(allow_private_hosts=True)
PUBLIC_ONLY = settings_for_tests(allow_private_hosts=False)


@pytest.fixture(scope="module")
def backend():
    with osmem() as server:
        yield server


@pytest.fixture
def proxy(backend):
    with FaultProxy(backend.url) as fault_proxy:
        yield fault_proxy


def client(url, timeout=5.0, concurrency=2, settings=PRIVATE, check=False):
    config = SinkConfig(name="t", kind="opensearch", url=url, timeout=timeout, concurrency=concurrency)
    return make_http(config, settings, check)


def refused(http, url, **kwargs) -> str:
    with pytest.raises(BatchRefused) as caught:
        http.request("POST", url, **kwargs)
    return str(caught.value)


def test_an_answer_is_its_status_lower_case_headers_and_whole_body(backend):
    http = client(backend.url)
    answer = http.request("GET", backend.url + "/")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert b'"cluster_name"' in answer.body
    missing = http.request("GET", backend.url + "/nowhere/_doc/1")
    assert missing.status == 404  # an error status is an answer, not an exception
    http.close()


def test_a_redirect_is_an_answer_never_followed(proxy):
    proxy.faults.append(Fault(status=302, headers={"Location": "http://169.254.169.254/latest"}))
    answer = client(proxy.url).request("GET", proxy.url + "/")
    assert answer.status == 302 and answer.headers["location"].startswith("http://169.254")
    assert len(proxy.requests) == 1


def test_nothing_listening_is_batch_refused_naming_host_and_path_only():
    url = f"http://127.0.0.1:{free_port()}/_bulk?api_key={SECRET}"
    message = refused(client(url), url, body=SECRET.encode(), headers={"Authorization": f"Bearer {SECRET}"})
    assert message == "connection refused: POST 127.0.0.1/_bulk"


def test_a_connection_reset_without_an_answer_is_batch_refused(proxy):
    proxy.faults.append(Fault(reset=True))
    assert "127.0.0.1/_bulk" in refused(client(proxy.url), proxy.url + "/_bulk")


def test_a_trickling_answer_is_cut_at_the_whole_request_deadline(proxy):
    proxy.faults.append(Fault(status=200, body=b"x" * 400, trickle=0.05))  # 20 s at this pace
    message = refused(client(proxy.url, timeout=1.0), proxy.url + "/_bulk")
    assert message == "deadline of 1s exceeded: POST 127.0.0.1/_bulk"


def test_a_slow_answer_is_cut_at_the_deadline_and_the_next_request_goes_through(proxy):
    http = client(proxy.url, timeout=1.0)
    proxy.faults.append(Fault(delay=3.0))
    assert "1s" in refused(http, proxy.url + "/")
    assert http.request("GET", proxy.url + "/").status == 200


def test_a_2xx_over_16_mib_is_too_large_whether_announced_or_not_and_done_when_its_body_is_not_needed(proxy):
    big = b"x" * (MAX_ANSWER_BYTES + 1)
    for length in (True, False):
        proxy.faults.append(Fault(status=200, body=big, length=length))
        with pytest.raises(TooLarge, match="over the 16777216-byte cap"):  # the delivery splits the batch
            client(proxy.url, timeout=30).request("POST", proxy.url + "/")
        proxy.faults.append(Fault(status=200, body=big, length=length))
        assert client(proxy.url, timeout=30).request("POST", proxy.url + "/", keep_body=False).status == 200


def test_a_proxy_down_refuses_and_when_up_again_the_pooled_client_recovers(proxy):
    http = client(proxy.url)
    assert http.request("GET", proxy.url + "/").status == 200
    proxy.down()
    assert refused(http, proxy.url + "/x") == "connection refused: POST 127.0.0.1/x"
    proxy.up()
    assert http.request("GET", proxy.url + "/").status == 200


def test_requests_from_more_threads_than_the_pool_holds_all_complete(backend):
    http = client(backend.url, concurrency=2)
    statuses = []

    def ask():
        statuses.append(http.request("GET", backend.url + "/").status)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 8


def test_a_stopping_sink_refuses_new_requests(backend):
    http = client(backend.url)
    http.interrupt_after(0)
    assert "stopping" in refused(http, backend.url + "/")


# --- addresses -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://hooks.example.com/in", "must be an https URL"),
        ("https://127.0.0.1/in", "non-public address"),
        ("https://10.1.2.3/in", "non-public address"),
        ("https://169.254.169.254/latest", "non-public address"),
        ("https://[::1]:8443/in", "non-public address"),
    ],
)
def test_a_webhook_url_to_a_private_address_or_without_https_is_refused_at_once(url, problem):
    with pytest.raises(SettingsError) as caught:
        client(url, settings=PUBLIC_ONLY, check=True)
    assert problem in str(caught.value) and "SINK_T_URL" in str(caught.value)


def test_a_url_with_credentials_is_refused_without_quoting_them():
    with pytest.raises(SettingsError) as caught:
        client(f"https://user:{SECRET}@search.example.com/", check=False)
    assert SECRET not in str(caught.value)


def test_a_webhook_host_whose_name_resolves_to_loopback_is_refused_at_connect():
    with WebhookReceiver() as receiver:
        port = receiver.server.server_address[1]
        url = f"https://localhost:{port}/hooks/likes"
        message = refused(client(url, settings=PUBLIC_ONLY, check=True), url, body=b"{}")
        assert "non-public address" in message and message.endswith("POST localhost/hooks/likes")
        assert receiver.batches == [] and receiver.refused == 0  # no connection was made


def test_with_allow_private_hosts_a_webhook_on_loopback_over_http_is_reached():
    with WebhookReceiver() as receiver:
        http = client(receiver.url, settings=PRIVATE, check=True)
        answer = http.request("POST", receiver.url, body=b"{}")
        assert answer.status == 401 and receiver.refused == 1  # reached: the receiver refused an unsigned body


def test_https_certificates_are_verified_and_a_private_ca_is_trusted_through_ssl_cert_file(tmp_path, monkeypatch):
    cert, key = self_signed(tmp_path)
    with WebhookReceiver(tls=(cert, key)) as receiver:
        http = client(receiver.url, settings=PRIVATE, check=True)
        message = refused(http, receiver.url, body=b"{}")
        assert message == "certificate verify failed: self-signed certificate: POST localhost/hooks/likes"
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        answer = client(receiver.url, settings=PRIVATE, check=True).request("POST", receiver.url, body=b"{}")
        assert answer.status == 401 and receiver.refused == 1  # reached over verified TLS: unsigned, refused


def test_the_other_sinks_reach_a_private_cluster_without_allow_private_hosts(backend):
    assert client(backend.url, settings=PUBLIC_ONLY, check=False).request("GET", backend.url + "/").status == 200


# --- statuses, Retry-After, scrubbing ------------------------------------------------------------------------------
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("30", 30.0), ("0", 0.0), ("999999", 3600.0), ("Mon, 01 Jun 2026 12:01:00 GMT", 60.0), ("soon", None), ("", None)],
)
def test_retry_after_in_seconds_or_as_a_date_bounded(value, seconds):
    assert retry_after({"retry-after": value}, NOW) == seconds


@pytest.mark.parametrize(
    ("status", "error", "wait"),
    [(401, AuthFailed, None), (403, AuthFailed, None), (413, TooLarge, None), (429, BatchRefused, 7.0)]
    + [(503, BatchRefused, 7.0), (500, BatchRefused, 7.0), (307, BatchRefused, None)],
)
def test_the_statuses_every_destination_shares(status, error, wait):
    failure = answer_failure(Answer(status, {"retry-after": "7"} if wait else {}), "POST h/_bulk", NOW)
    assert type(failure) is error and str(failure).endswith("POST h/_bulk")
    if wait is not None:
        assert failure.retry_after == wait


def test_other_statuses_are_the_sinks_own_to_read():
    assert answer_failure(Answer(200), "x") is None and answer_failure(Answer(400), "x") is None


def test_scrub_masks_the_configs_secrets_and_clips():
    config = SinkConfig(name="t", kind="k", url="http://h", secret_values=(SECRET,))
    text = scrub(f"key {SECRET} echoed " + "y" * 1000, config)
    assert SECRET not in text and "***" in text and len(text) == 300
