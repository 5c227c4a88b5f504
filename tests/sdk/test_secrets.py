"""No secret leaves: every log record at DEBUG (ours and third-party loggers'), --check-config, and the errors of
a bad MONGODB_URI."""

from __future__ import annotations

import json
import logging

import pytest

from collector import cli
from collector.daemon import logs
from collector.engine import Collector, store
from collector.engine.registry import Registry
from collector.sdk.connector import Connector, Result
from collector.sdk.errors import Transient
from collector.sdk.redaction import SECRETS
from collector.settings import settings_for_tests

from helpers import T0, TOKEN, FixedRefresh, add_network, free_port


def all_text(records) -> str:
    return "\n".join(r.getMessage() + (r.exc_text or "") + (r.stack_info or "") for r in records)


def test_pymongo_command_logs_at_debug_never_show_a_token(db, settings, caplog):
    add_network(db, refreshToken="rt-not-yet-claimed-5678")
    Collector(db, settings)  # installs the redaction for the whole process
    with caplog.at_level(logging.DEBUG):
        # exactly what pymongo logs for the reply of the claim's read-back, before the collector holds the network
        pymongo_reply_log({"cursor": {"firstBatch": [db.networks.find_one()]}})
    text = all_text(caplog.records)
    assert "accessToken" in text and "Command succeeded" in text
    assert TOKEN not in text and "rt-not-yet-claimed-5678" not in text


@pytest.mark.system
def test_urllib3_retry_warnings_never_show_the_stack_exchange_key(db, caplog):
    key = "se-app-key-ABCDEF123"
    settings = settings_for_tests(allow_private_hosts=True)
    settings = settings.with_(raw={**settings.raw, "STACKEXCHANGE_KEY": key})
    collector = Collector(db, settings)
    url = f"http://127.0.0.1:{free_port()}/2.3/me/favorites"
    with caplog.at_level(logging.DEBUG), pytest.raises(Transient):
        collector.http.get(url, params={"site": "stackoverflow", "key": key})
    text = all_text(caplog.records)
    assert "Retrying" in text and "/2.3/me/favorites" in text  # urllib3 did log the request line
    assert key not in text


def test_oauth1_signing_logs_at_debug_never_show_keys_or_secrets(db, http_mock, caplog):
    secrets = {"FLICKR_API_KEY": "flickr-key-1234567", "FLICKR_API_SECRET": "flickr-secret-7654321"}
    base = settings_for_tests()
    settings = base.with_(raw={**base.raw, **secrets})
    http_mock.get(
        "https://api.flickr.com/services/rest/", json={"stat": "ok", "photos": {"page": 1, "pages": 1, "photo": []}}
    )
    add_network(db, service="flickr", accessToken="72157-flickr-token", accessTokenSecret="tok-secret-abcdef")
    with caplog.at_level(logging.DEBUG):
        Collector(db, settings).run_pass("initial", now=T0)
    text = all_text(caplog.records)
    assert any(r.name.startswith("oauthlib") for r in caplog.records)  # the library did log its signing
    for value in [*secrets.values(), "72157-flickr-token", "tok-secret-abcdef"]:
        assert value not in text


class Chatty(Connector):
    """Refreshes its token, then logs it (and raises with it) the way a careless library would."""

    name = "chatty"
    token_refresh = FixedRefresh({"accessToken": "fresh-access-token-42", "refreshToken": "fresh-refresh-token-43"})

    def initial(self, job):
        if job.token == TOKEN:
            from collector.sdk.errors import TokenExpired

            raise TokenExpired("401", 401)
        logging.getLogger("some.library").debug("using token %s", job.token)
        try:
            raise RuntimeError(f"request with {job.token} failed")
        except RuntimeError:
            logging.getLogger("some.library").exception("retrying")
        return Result([{"itemId": "1", "type": "chatty", "source": "https://x.test/1"}], done=True)

    def normal(self, job):
        return self.initial(job)


def test_tokens_obtained_mid_run_are_redacted_in_messages_and_tracebacks(db, settings, caplog):
    add_network(db, service="chatty", refreshToken="rt-original-9999")
    with caplog.at_level(logging.DEBUG):
        report = Collector(db, settings, registry=Registry({"chatty": Chatty})).run_pass("initial", now=T0)
    assert report.by_status == {"ok": 1}
    text = all_text(caplog.records)
    assert "using token ***" in text and "request with *** failed" in text
    for value in (TOKEN, "fresh-access-token-42", "fresh-refresh-token-43", "rt-original-9999"):
        assert value not in text


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    return tmp_path


def test_check_config_masks_secrets_inside_uri_options(in_tmp, monkeypatch, capsys):
    uri = (
        "mongodb://collector:hunter2pass@db.example:27017/likeastore?tls=true"
        "&tlsCertificateKeyFilePassword=keyfile-pass-77&authMechanism=MONGODB-AWS"
        "&authMechanismProperties=AWS_SESSION_TOKEN:aws-session-tok-88,SERVICE_NAME:mongodb"
    )
    monkeypatch.setenv("MONGODB_URI", uri)
    assert cli.main(["--check-config"]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)["MONGODB_URI"]
    for secret in ("hunter2pass", "keyfile-pass-77", "aws-session-tok-88"):
        assert secret not in out
    assert "tlsCertificateKeyFilePassword=***" in shown and "AWS_SESSION_TOKEN:***" in shown
    assert "SERVICE_NAME:mongodb" in shown and "collector:***@db.example" in shown


@pytest.mark.parametrize(
    "uri",
    [
        "mongodb://db.example:99999/x",
        "mongodb://db.example/x?serverSelectionTimeoutMS=soon",
        "mongodb://user:pa:ss@db/x",
        "mongodb+srv://db.example:27017/x",
    ],
)
def test_a_uri_pymongo_cannot_parse_is_refused_by_check_config_and_by_a_run(in_tmp, monkeypatch, capsys, uri):
    monkeypatch.setenv("MONGODB_URI", uri)
    assert cli.main(["--check-config"]) == 2
    err = capsys.readouterr().err
    assert "MONGODB_URI" in err and "Traceback" not in err
    assert cli.main(["--mode", "normal", "--once"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MONGODB_URI" in err


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_timeout_that_would_mean_wait_forever_is_refused(in_tmp, monkeypatch, capsys, value):
    monkeypatch.setenv("HTTP_TIMEOUT", value)
    assert cli.main(["--check-config"]) == 2
    assert "HTTP_TIMEOUT" in capsys.readouterr().err


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("mongodb://db.example/x", 10_000),
        ("mongodb://db.example/x?serverSelectionTimeoutMS=2500", None),
    ],
)
def test_the_uris_own_server_selection_timeout_is_respected(in_tmp, monkeypatch, uri, expected):
    monkeypatch.setenv("MONGODB_URI", uri)
    from collector.settings import load_settings

    seen = {}

    class Client:
        def __init__(self, given, **options):
            seen.update(options, uri=given)

    monkeypatch.setattr(store, "MongoClient", Client)
    store.connect(load_settings())
    assert seen["uri"] == uri and seen.get("serverSelectionTimeoutMS") == expected and seen["tz_aware"] is True


def test_json_log_lines_redact_messages_and_tracebacks(capsys):
    SECRETS.add(["json-secret-token-98765"])
    try:
        logs.setup_logging("INFO", "json")
        try:
            raise ValueError("refused json-secret-token-98765")
        except ValueError:
            logging.getLogger("collector.test").exception("failed with %s", "json-secret-token-98765")
    finally:
        SECRETS.remove(["json-secret-token-98765"])
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["message"] == "failed with ***" and line["level"] == "ERROR"
    assert "ValueError: refused ***" in line["exc_info"]
    assert "json-secret-token-98765" not in json.dumps(line)


# Secrets where a document holds them but no writer of ours would: in a list, in a nested document, under a name
# of any depth. Each value is hidden at DEBUG before the collector knows it (pymongo's log of the claim's read-back),
# in a line that prints the document itself, and by value once the network is held.
NESTED = {
    "a list where a string belongs": {"accessToken": ["nested-list-token-0001", "nested-list-token-0002"]},
    "a nested document": {"oauth": {"token": "nested-doc-token-0003", "tokenSecret": "nested-doc-secret-0004"}},
    "a list of documents": {"credentials": [{"kind": "x", "value": "nested-cred-value-0005"}]},
    "brackets that do not pair": {"tokens": ["a}b", "c]d", "mismatch-secret-0009"]},
    "four levels down": {"auth": {"providers": [{"github": {"accessToken": "deep-token-0006"}}]}},
    "a password in a map": {"settings": {"smtp": {"password": "smtp-pass-0007", "host": "mail.example"}}},
    "an extended-JSON value": {"google": {"refreshToken": {"$binary": "cmVmcmVzaC10b2tlbi0wMDA4"}}},
}


def values_in(document) -> list[str]:
    if isinstance(document, dict):
        return [v for inner in document.values() for v in values_in(inner)]
    if isinstance(document, list):
        return [v for inner in document for v in values_in(inner)]
    return [document] if isinstance(document, str) and any(c.isdigit() for c in document) else []


def pymongo_reply_log(reply: dict) -> None:
    from pymongo.logger import _COMMAND_LOGGER, _CommandStatusMessage, _debug_log

    _debug_log(
        _COMMAND_LOGGER,
        message=_CommandStatusMessage.SUCCEEDED,
        clientId=1,
        durationMS=1,
        reply=reply,
        commandName="find",
        databaseName="likeastore",
        requestId=1,
        operationId=1,
        driverConnectionId=1,
        serverConnectionId=1,
        serverHost="db",
        serverPort=27017,
    )


@pytest.mark.parametrize("shape", sorted(NESTED))
def test_a_secret_nested_anywhere_in_a_network_is_hidden_at_every_level(db, settings, caplog, shape):
    fields = {k: v for k, v in NESTED[shape].items() if k != "accessToken"} or {"extra": NESTED[shape]}
    add_network(db, **fields)
    secrets = values_in(NESTED[shape])
    Collector(db, settings)  # installs the redaction for the whole process
    with caplog.at_level(logging.DEBUG):
        pymongo_reply_log({"cursor": {"firstBatch": [db.networks.find_one()]}})  # before the network is held
        logging.getLogger("collector.test").info("the document: %r", db.networks.find_one())
        logging.getLogger("collector.test").debug("as JSON: %s", json.dumps(NESTED[shape]))
    text = all_text(caplog.records)
    assert "Command succeeded" in text and "the document:" in text
    assert not [s for s in secrets if s in text], text


@pytest.mark.parametrize("shift", [0, 3, 9, 15])
def test_a_secret_cut_by_pymongos_document_limit_leaves_no_piece(db, settings, caplog, shift):
    """pymongo cuts a logged document at 1,000 characters: a token straddling the cut is masked to the end."""
    token = "ghs_cut" + "Q7w" * 10
    add_network(db, notes="n" * (930 + shift * 3), accessToken=token)
    Collector(db, settings)
    with caplog.at_level(logging.DEBUG):
        pymongo_reply_log({"cursor": {"firstBatch": [db.networks.find_one()]}})
    text = all_text(caplog.records)
    assert "..." in text  # pymongo did cut the document
    assert not [token[i : i + 6] for i in range(len(token) - 5) if token[i : i + 6] in text]


@pytest.mark.parametrize("shape", sorted(NESTED))
def test_a_held_networks_nested_secrets_are_masked_by_value_wherever_they_are_echoed(db, settings, http_mock, shape):
    """Once claimed, every value under a secret-looking name is known: a server echoing one in free text (no name
    beside it) gets it masked in lastError."""
    import responses as _responses

    from helpers import STARRED

    secrets = values_in(NESTED[shape])
    fields = {k: v for k, v in NESTED[shape].items() if k != "accessToken"} or {"extra": NESTED[shape]}
    echo = " and ".join(secrets)
    http_mock.add(_responses.GET, STARRED, status=502, json={"message": f"upstream said {echo}"})
    doc = add_network(db, **fields)
    Collector(db, settings).run_pass("initial", now=T0)
    message = db.networks.find_one({"_id": doc["_id"]})["lastError"]["message"]
    assert "upstream said" in message and not [s for s in secrets if s in message], message
