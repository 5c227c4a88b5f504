"""Transport failures named, against real sockets on 127.0.0.1: TLS servers with certificates of a private
authority made here (untrusted, self-signed, expired, for another name), a closed port, a server that resets, a
name that cannot resolve, a proxy that is not there. The collectors' Http (their lastError, their run log line and
`collector networks run`) and the sinks' client (a webhook's refusal reason) say which; and CA_BUNDLE (or the
conventional variables) makes the private authority trusted, for both."""

from __future__ import annotations

import logging
import random
import re
import socket
import struct
from dataclasses import replace

import pytest

from collector import cli
from collector.engine import run_once
from collector.sdk.errors import Transient
from collector.sdk.http import Http
from collector.settings import load_settings, settings_for_tests
from collector.sinks.builtin.webhook import WebhookSink
from collector.sinks.http import make_http
from collector.sinks.sdk import DONE, BatchRefused
from collector.sinks.service import SinkService
from collector.sinks.store import QUEUE
from collector.testing.sinkkit import item_docs, sink_config

from helpers import T0, add_network, free_port
from helpers.fakesink import Clock, add_items, run
from helpers.rawserver import RawServer
from helpers.sinkservers import WEBHOOK_SECRET, WebhookReceiver, self_signed
from helpers.tlsservers import Authority, TlsServer

pytestmark = pytest.mark.system

PROXY_SECRET = "pr0xy-pa55word-77"


@pytest.fixture(scope="module")
def ours():
    return Authority()


@pytest.fixture
def bundle(ours, tmp_path):
    return str(ours.bundle(tmp_path))


# A deadline far from any cause these tests name: on a loaded machine the resolver's "no such name" can take
# seconds, and a deadline that fires first would name itself instead of the cause
DEADLINE = 60.0


def http(ca: str = "") -> Http:
    return Http(settings_for_tests(allow_private_hosts=True, ca_bundle=ca, http_timeout=DEADLINE))


def collector_error(url: str, ca: str = "") -> str:
    client = http(ca)
    try:
        with pytest.raises(Transient) as caught:
            client.get(url + "/user/starred?access_token=SECRET")
    finally:
        client.close()
    assert "SECRET" not in caught.value.message
    return caught.value.message


def hook(url: str, ca: str = "", private: bool = True) -> WebhookSink:
    config = replace(sink_config(WebhookSink, url, name="hook", SECRET=WEBHOOK_SECRET), timeout=DEADLINE)
    settings = settings_for_tests(allow_private_hosts=private, ca_bundle=ca)
    return WebhookSink(config, make_http(config, settings, WebhookSink.checks_addresses))


def sink_refusal(url: str, ca: str = "", private: bool = True) -> str:
    sink = hook(url, ca, private)
    with pytest.raises(BatchRefused) as caught:
        sink.deliver(item_docs(2))
    return str(caught.value)


def untrusted_servers(ours: Authority, tmp_path):
    """(server, the reason OpenSSL gives): a leaf of an authority nobody trusts, the same with its root sent, and
    a certificate signed by itself."""
    stranger = Authority()
    yield TlsServer(stranger.leaf()), "unable to get local issuer certificate"
    yield TlsServer(stranger.leaf(), authority=stranger), "self-signed certificate in certificate chain"
    yield TlsServer(files=self_signed(tmp_path)), "self-signed certificate"


# --- certificates: the collectors --------------------------------------------------------------------------------
def test_an_untrusted_certificate_is_named_with_its_reason_by_the_collectors(ours, bundle, tmp_path):
    for server, reason in untrusted_servers(ours, tmp_path):
        with server:
            for ca in ("", bundle):  # trusting our authority does not make a stranger's trusted
                expected = f"certificate verify failed: {reason}: GET 127.0.0.1/user/starred"
                assert collector_error(server.url, ca) == expected
            assert server.answered == 0


@pytest.mark.parametrize(
    ("names", "host", "reason"),
    [
        (("other.example",), "127.0.0.1", "IP address mismatch"),
        (("127.0.0.1",), "localhost", "hostname mismatch"),
        (("other.example", "10.9.8.7"), "localhost", "hostname mismatch"),
    ],
)
def test_a_certificate_for_another_name_is_a_mismatch(ours, bundle, names, host, reason):
    with TlsServer(ours.leaf(*names), host=host) as server:
        assert collector_error(server.url, bundle) == f"certificate verify failed: {reason}: GET {host}/user/starred"
        assert sink_refusal(server.url + "/hooks/likes", bundle) == (
            f"certificate verify failed: {reason}: POST {host}/hooks/likes"
        )


def test_an_expired_certificate_of_a_trusted_authority_is_named(ours, bundle):
    with TlsServer(ours.leaf(expired=True)) as server:
        assert collector_error(server.url, bundle) == "certificate verify failed: certificate has expired: GET " + (
            "127.0.0.1/user/starred"
        )
        assert sink_refusal(server.url + "/in", bundle).startswith("certificate verify failed: certificate has expired")


@pytest.mark.parametrize("how", ["CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_the_private_authority_is_trusted_through_ca_bundle_or_a_conventional_variable(ours, tmp_path, how):
    path = ours.hashed_dir(tmp_path) if how == "SSL_CERT_DIR" else ours.bundle(tmp_path)
    settings = load_settings(environ={how: str(path), "ALLOW_PRIVATE_HOSTS": "true"}, env="test", read_dotenv=False)
    assert settings.ca_bundle == str(path) and settings.trusted().source == how
    with TlsServer(ours.leaf()) as server:
        for host in ("127.0.0.1", "localhost"):
            client = Http(settings)
            try:
                answer = client.get(f"https://{host}:{server.port}/user")
            finally:
                client.close()
            assert (answer.status_code, answer.json()) == (200, {"ok": True})
        assert server.answered == 2


# --- certificates: the sinks -------------------------------------------------------------------------------------
def test_an_untrusted_certificate_is_a_webhooks_refusal_reason(ours, bundle, tmp_path):
    for server, reason in untrusted_servers(ours, tmp_path):
        with server:
            for ca in ("", bundle):
                url = server.url + "/hooks/likes"
                assert sink_refusal(url, ca) == f"certificate verify failed: {reason}: POST 127.0.0.1/hooks/likes"
            assert server.answered == 0


def leaf_files(ours: Authority, tmp_path):
    leaf = ours.leaf()
    cert, key = tmp_path / "leaf.pem", tmp_path / "leaf.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return cert, key


@pytest.mark.parametrize("directory", [False, True])
def test_a_webhook_on_https_127_0_0_1_is_reached_when_ca_bundle_trusts_its_authority(ours, tmp_path, directory):
    ca = str(ours.hashed_dir(tmp_path) if directory else ours.bundle(tmp_path))
    with WebhookReceiver(tls=leaf_files(ours, tmp_path)) as receiver:
        url = receiver.url.replace("://localhost:", "://127.0.0.1:")
        docs = item_docs(3)
        assert sink_refusal(url).startswith("certificate verify failed: unable to get local issuer certificate")
        assert hook(url, ca).deliver(docs) == [DONE] * 3
        assert receiver.ids() == {doc.id for doc in docs} and receiver.refused == 0


def service_settings(url: str, **extra: str):
    environ = {"SINKS": "hooks", "SINK_HOOKS_KIND": "webhook", "SINK_HOOKS_URL": url}
    environ |= {"SINK_HOOKS_SECRET": WEBHOOK_SECRET, "ALLOW_PRIVATE_HOSTS": "true", **extra}
    return load_settings(environ=environ, env="test", read_dotenv=False)


def test_the_sink_service_keeps_the_named_cause_as_the_refusal_and_delivers_once_trusted(db, ours, tmp_path):
    ids = add_items(db, 4)
    with WebhookReceiver(tls=leaf_files(ours, tmp_path)) as receiver:
        url = receiver.url.replace("://localhost:", "://127.0.0.1:")
        clock = Clock()
        untrusting = SinkService(db, service_settings(url), owner="one", clock=clock, rng=random.Random(5))
        run(untrusting, clock, rounds=4, tick=5)
        untrusting.stop(5)
        entries = list(db[QUEUE].find())
        assert entries and receiver.batches == []
        for entry in entries:
            assert entry["lastError"]["kind"] == "refused" and entry["lastError"]["message"].endswith(
                "certificate verify failed: unable to get local issuer certificate: POST 127.0.0.1/hooks/likes"
            )
        trusting = service_settings(url, CA_BUNDLE=str(ours.bundle(tmp_path)))
        svc = SinkService(db, trusting, owner="one", clock=clock, rng=random.Random(5))
        run(svc, clock, rounds=10, tick=700)
        svc.stop(5)
        assert receiver.ids() == set(ids) and db[QUEUE].count_documents({}) == 0


# --- the socket: refused, reset, closed, no such name ------------------------------------------------------------
def rst(conn: socket.socket, head: bytes, server: RawServer) -> None:
    """The whole request read (a client still sending when the RST comes would see its own broken pipe first, then
    a clean end), then closed with a RST (SO_LINGER 0)."""
    length = next(
        (int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")), 0
    )
    body = head.split(b"\r\n\r\n", 1)[1]
    while len(body) < length and (chunk := conn.recv(65536)):
        body += chunk
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close() sends a RST


def hang_up(conn: socket.socket, head: bytes, server: RawServer) -> None:
    """Closed cleanly, nothing answered: the request read to its end first, since closing a socket with bytes of
    it still unread (a POST's body, when it came apart from the head) sends a reset, not a clean close."""
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    unread = int(length.group(1)) - len(head.split(b"\r\n\r\n", 1)[1]) if length else 0
    while unread > 0:
        chunk = conn.recv(min(unread, 65536))
        if not chunk:
            return
        unread -= len(chunk)


@pytest.mark.parametrize(("script", "cause"), [(rst, "connection reset"), (hang_up, "connection closed without")])
def test_a_server_that_resets_or_hangs_up_is_named(script, cause):
    for _ in range(2):
        with RawServer(script) as server:
            assert collector_error(server.url).startswith(f"{cause}")
            assert collector_error(server.url).endswith(": GET 127.0.0.1/user/starred")
            assert sink_refusal(server.url + "/in").startswith(cause)


def test_a_closed_port_is_connection_refused():
    for port in (free_port(), free_port()):
        url = f"http://127.0.0.1:{port}"
        assert collector_error(url) == "connection refused: GET 127.0.0.1/user/starred"
        assert sink_refusal(url + "/hooks/likes") == "connection refused: POST 127.0.0.1/hooks/likes"
        assert sink_refusal(f"https://127.0.0.1:{port}/in") == "connection refused: POST 127.0.0.1/in"


@pytest.mark.parametrize("host", ["nohost.invalid", "api.collector-test.invalid", "hooks.example.invalid"])
def test_a_name_that_does_not_resolve_is_named(host):
    assert collector_error(f"https://{host}") == f"name not resolved: {host}: GET {host}/user/starred"
    for private in (True, False):  # the checked connection of a webhook too
        refusal = sink_refusal(f"https://{host}/hooks", private=private)
        assert refusal == f"name not resolved: {host}: POST {host}/hooks"


# --- a proxy -------------------------------------------------------------------------------------------------------
@pytest.fixture
def no_proxy_env(monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("proxy", "shown"),
    [
        ("http://collector:{secret}@127.0.0.1:{port}", "127.0.0.1:{port} (connection refused)"),
        ("http://127.0.0.1:{port}", "127.0.0.1:{port} (connection refused)"),
        ("https://user:{secret}@127.0.0.1:{port}", "127.0.0.1:{port} (connection refused)"),
        ("http://{secret}@proxy.collector-test.invalid:3128", "proxy.collector-test.invalid:3128 (name not resolved"),
    ],
)
def test_an_unreachable_proxy_is_named_by_host_and_port_without_its_credentials(no_proxy_env, proxy, shown):
    port = free_port()
    no_proxy_env.setenv("https_proxy", proxy.format(secret=PROXY_SECRET, port=port))
    message = collector_error("https://api.collector-test.invalid")
    assert message.startswith("proxy unreachable: " + shown.format(port=port))
    assert message.endswith(": GET api.collector-test.invalid/user/starred")
    assert PROXY_SECRET not in message and "collector:" not in message and "user" not in message.split(":")[1]


@pytest.mark.parametrize("status", ["407 Proxy Authentication Required", "403 Forbidden", "502 Bad Gateway"])
def test_a_proxy_refusing_the_tunnel_is_named_with_its_status(no_proxy_env, status):
    def refuse(conn: socket.socket, head: bytes, server: RawServer) -> None:
        server.send(conn, f"HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n".encode())

    with RawServer(refuse) as proxy:
        no_proxy_env.setenv("https_proxy", f"http://collector:{PROXY_SECRET}@127.0.0.1:{proxy.port}")
        message = collector_error("https://api.collector-test.invalid")
        assert message == f"proxy refused the tunnel: 127.0.0.1:{proxy.port}: {status}: GET " + (
            "api.collector-test.invalid/user/starred"
        )
        assert proxy.requests and proxy.requests[0].startswith(b"CONNECT api.collector-test.invalid:443")


# --- lastError, the run log line, `networks run` -------------------------------------------------------------------
def test_the_collectors_last_error_and_run_log_line_name_the_cause(db, ours, tmp_path, caplog):
    stranger = Authority()
    with TlsServer(stranger.leaf()) as server:
        cases = [
            (server.url, "certificate verify failed: unable to get local issuer certificate"),
            (f"https://127.0.0.1:{free_port()}", "connection refused"),
            ("https://api.collector-test.invalid", "name not resolved: api.collector-test.invalid"),
        ]
        for base, cause in cases:
            db.networks.delete_many({})
            doc = add_network(db)
            settings = settings_for_tests(github_api_url=base, http_timeout=DEADLINE)
            with caplog.at_level(logging.INFO):
                run_once(db, "initial", settings, now=T0)
            error = db.networks.find_one({"_id": doc["_id"]})["lastError"]
            assert error["kind"] == "transient" and error["message"].startswith(cause + ": GET ")
            assert any(cause in record.getMessage() for record in caplog.records if "run service" in record.msg)
            caplog.clear()


def test_networks_run_prints_the_cause(cli_db, monkeypatch, capsys, tmp_path):
    stranger = Authority()
    with TlsServer(stranger.leaf()) as server:
        for base, cause in [
            (server.url, "certificate verify failed: unable to get local issuer certificate: GET 127.0.0.1/"),
            (f"https://127.0.0.1:{free_port()}", "connection refused: GET 127.0.0.1/"),
        ]:
            monkeypatch.setenv("GITHUB_API_URL", base)
            doc = add_network(cli_db)
            assert cli.main(["networks", "run", str(doc["_id"])]) == 1
            out = capsys.readouterr().out
            assert f"status: transient — {cause}" in out
            assert cli_db.networks.find_one({"_id": doc["_id"]})["lastError"]["message"].startswith(cause)
