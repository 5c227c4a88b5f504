"""The monitor's account actions in process, on mongomock, against a real authorisation server (Authlib's classes
on a socket, tests/helpers/authserver.py): with the token, a network added with its credentials in the body,
removed by id, and connected through a device flow (its code shown, the token endpoint polled on the flow's own
thread) or the authorisation code with PKCE coming back to the monitor's /connect/callback (a state that is no
waiting flow's refused); an unauthorised network renewed in place. Refused without the token; no secret in any
answer or log line; the secrets a flow learnt let go of when it ends."""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import parse_qs, urlsplit

import mongomock
import pytest
import requests

from collector.connect.apps import LOOPBACK, App
from collector.monitor import app, connecting
from collector.monitor.httpd import Request
from collector.sdk.redaction import SECRETS
from collector.settings import load_settings

from helpers.authserver import AuthServer, Token, serving
from helpers.proc import wait_until

TOKEN = "monitor-token-0123456789"
EMAIL = "ann@example.com"


@pytest.fixture
def db():
    return mongomock.MongoClient(tz_aware=True)["monitor"]


@pytest.fixture
def github():
    server = AuthServer()
    server.add_client("public-app", redirect="http://127.0.0.1/connect/callback")
    server.store.interval = 1
    with serving(server) as served:
        yield served


@pytest.fixture
def monitor(db, github):
    settings = load_settings(
        environ={"GITHUB_API_URL": github.url, "GITHUB_CLIENT_ID": "public-app"}, env="test", read_dotenv=False
    )
    made = app.Monitor(db, token=TOKEN, version="9.9", settings=settings, connect_timeout=60)
    made.said = []  # every answer's body, to look for secrets in
    yield made
    made.connections.close()
    made.requests.shutdown(wait=True)


def post(monitor, path: str, body: object, token: str | None = TOKEN, query=None) -> tuple[int, dict]:
    headers = {"host": "127.0.0.1:8089", "content-type": "application/json"}
    if token is not None:
        headers["x-monitor-token"] = token
    got = asyncio.run(
        monitor.handle(Request("POST", path, query or {}, headers, json.dumps(body).encode(), "127.0.0.1"))
    )
    monitor.said.append(got.body.decode())
    return got.status, json.loads(got.body)


def callback(monitor, query: dict[str, list[str]]) -> tuple[int, str]:
    headers = {"host": "127.0.0.1:8089"}
    got = asyncio.run(monitor.handle(Request("GET", connecting.CALLBACK, query, headers, b"", "127.0.0.1")))
    monitor.said.append(got.body.decode())
    return got.status, got.body.decode()


def flow(monitor, flow_id: str) -> dict:
    status, body = post(monitor, "/api/connect/state", {"id": flow_id})
    assert status == 200, body
    return body["flow"]


def ended(monitor, flow_id: str) -> dict:
    return wait_until(lambda: (f := flow(monitor, flow_id))["status"] != "pending" and f, timeout=60)


def approve(server, user_code: str, allow: bool = True) -> None:
    decision = "allow" if allow else "deny"
    requests.post(f"{server.url}/device", data={"user_code": user_code, "decision": decision}, timeout=10)


def issued(server, access: str, user: str = "octo") -> str:
    server.store.tokens[access] = Token("public-app", user, "", access, "")
    return access


def secrets_of(server) -> list[str]:
    found = [v for t in server.store.tokens.values() for v in (t.access_token, t.refresh_token) if v]
    return found + [c["device_code"] for c in server.store.devices.values()] + list(server.store.codes)


def assert_no_secret(monitor, server, caplog, *more: str) -> None:
    text = "\n".join(monitor.said) + "\n".join(r.getMessage() for r in caplog.records)
    for secret in [*secrets_of(server), *more]:
        assert secret not in text


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/networks/add", {"user": EMAIL, "service": "github", "credentials": {"accessToken": "tok-abcdef12"}}),
        ("/api/networks/remove", {"id": "0" * 24}),
        ("/api/connect", {"user": EMAIL, "service": "github"}),
        ("/api/connect/state", {"id": "x"}),
    ],
)
@pytest.mark.parametrize("sent", [None, "guess", TOKEN + "x"])
def test_every_account_action_is_refused_without_the_right_token(db, monitor, github, path, body, sent):
    db.networks.insert_one({"_id": "n1", "user": "b@x.org", "service": "github", "accessToken": "kept-token"})
    status, answer = post(monitor, path, body, token=sent)
    assert status == 403 and not answer["ok"]
    assert list(db.networks.find({}, {"_id": 1})) == [{"_id": "n1"}] and github.store.devices == {}


def test_a_network_added_with_its_token_in_the_body_only_and_never_said_back(db, monitor, github, caplog):
    access = issued(github, "gho_" + "a" * 36)
    body = {"user": EMAIL, "service": "github", "credentials": {"accessToken": access}}
    with caplog.at_level(logging.INFO):
        status, answer = post(monitor, "/api/networks/add", body)
        assert status == 200 and answer["ok"] and answer["message"].startswith("added network ")
        assert "github account octo for ann@example.com, due now" in answer["message"]
        (network,) = db.networks.find()
        assert network["accessToken"] == access and network["mode"] == "initial" and network["accountId"] == "1"
        status, answer = post(monitor, "/api/networks/add", body)  # the same again: refused, as the CLI refuses it
        assert status == 409 and "has a github network already" in answer["message"]
        status, answer = post(monitor, "/api/networks/add", {**body, "replace": True})
        assert status == 200 and answer["message"].startswith(f"gave network {network['_id']} its new credentials")
        bad = {**body, "user": "bo@example.com", "credentials": {"accessToken": "tok-not-issued-12345"}}
        status, answer = post(monitor, "/api/networks/add", bad)
        assert status == 409 and "github refused the token" in answer["message"]
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.monitor"]
    assert any(
        line.startswith("monitor: add github network of ann@example.com by monitor (127.0.0.1): added network")
        for line in lines
    ), lines
    assert db.networks.count_documents({}) == 1
    assert_no_secret(monitor, github, caplog, "tok-not-issued-12345")


@pytest.mark.parametrize(
    "body, words",
    [
        ({"user": EMAIL, "service": "github"}, "credentials as an object"),
        ({"user": EMAIL, "service": "github", "credentials": "tok-12345678"}, "credentials as an object"),
        ({"user": EMAIL, "credentials": {"accessToken": "tok-12345678"}}, "name the person and the service"),
        ({"user": 5, "service": "github", "credentials": {"accessToken": "tok-12345678"}}, "user must be text"),
        ({"user": EMAIL, "service": "github", "credentials": {"accessToken": 7}}, "accessToken must be a string"),
        ({"user": EMAIL, "service": "nope", "credentials": {"accessToken": "tok-12345678"}}, "nope"),
        ({"user": EMAIL, "service": "github", "credentials": {"token": "tok-12345678"}}, "github takes accessToken"),
        ({"user": EMAIL, "service": "github", "credentials": {"x": 1}, "replace": "yes"}, "replace is true or false"),
    ],
)
def test_an_add_the_network_cannot_take_is_one_line_and_writes_nothing(db, monitor, body, words):
    status, answer = post(monitor, "/api/networks/add", body, query={"accessToken": ["tok-in-the-query-1"]})
    assert status in (400, 409) and words in answer["message"] and not answer["ok"]
    assert db.networks.count_documents({}) == 0 and "tok-12345678" not in answer["message"]


def test_a_network_is_removed_by_id_and_one_a_collector_holds_is_left(db, monitor):
    from datetime import UTC, datetime, timedelta

    gone = db.networks.insert_one({"user": EMAIL, "service": "github", "accessToken": "t-12345678"}).inserted_id
    held = {"user": EMAIL, "service": "gist", "leaseUntil": datetime.now(UTC) + timedelta(seconds=60)}
    held_id = db.networks.insert_one({**held, "leaseOwner": "box-1"}).inserted_id
    status, answer = post(monitor, "/api/networks/remove", {"id": str(gone)})
    assert status == 200 and answer["message"].startswith(f"removed network {gone} github ann@example.com")
    assert post(monitor, "/api/networks/remove", {"id": str(gone)})[1]["message"].startswith("no network with id")
    status, answer = post(monitor, "/api/networks/remove", {"id": str(held_id)})
    assert status == 409 and "being run by box-1" in answer["message"]
    assert post(monitor, "/api/networks/remove", {"id": {"$ne": 1}})[0] == 400
    assert [n["_id"] for n in db.networks.find()] == [held_id]


def test_a_device_flow_shows_its_code_is_pending_then_done_and_lets_its_secrets_go(db, monitor, github, caplog):
    with caplog.at_level(logging.INFO):
        status, answer = post(monitor, "/api/connect", {"service": "github", "user": EMAIL})
        assert status == 200 and answer["flow"]["status"] == "pending" and answer["flow"]["way"] == "device"
        flow_id = answer["flow"]["id"]
        shown = wait_until(lambda: (f := flow(monitor, flow_id))["userCode"] and f, timeout=60)
        (code,) = github.store.devices.values()
        assert shown["userCode"] == code["user_code"] and shown["verificationUri"] == f"{github.url}/device"
        assert shown["status"] == "pending" and flow(monitor, flow_id)["status"] == "pending"  # not yet entered
        status, again = post(monitor, "/api/connect", {"service": "github", "user": EMAIL})
        assert status == 409 and "under way already" in again["message"]  # one flow per network
        approve(github, code["user_code"])
        done = ended(monitor, flow_id)
    (network,) = db.networks.find()
    assert done["status"] == "done" and done["network"] == str(network["_id"]) and "added" in done["message"]
    assert network["user"] == EMAIL and network["accessToken"] in github.store.tokens
    wait_until(lambda: network["accessToken"] not in SECRETS._counts, timeout=60)  # let go of: no longer held
    assert SECRETS.redact(f"x {network['accessToken']} y") == "x *** y"  # and still masked a while
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.monitor"]
    assert any(
        line.startswith("monitor: connect github for ann@example.com by monitor (127.0.0.1): network") for line in lines
    )
    assert_no_secret(monitor, github, caplog)


def test_an_unauthorized_network_is_renewed_in_place_and_a_denial_is_one_line(db, monitor, github):
    old = {"user": EMAIL, "service": "github", "accessToken": "revoked-token", "accountId": "1", "page": 7}
    network_id = db.networks.insert_one(
        {**old, "unauthorized": True, "lastError": {"kind": "unauthorized"}}
    ).inserted_id
    other = db.networks.insert_one({"user": "bo@example.com", "service": "github", "accessToken": "t-working"})
    status, answer = post(monitor, "/api/connect", {"service": "github", "user": "bo@example.com"})
    assert status == 409 and "working github network already" in answer["message"] and other  # a working one
    status, answer = post(monitor, "/api/connect", {"service": "github", "user": EMAIL})
    assert status == 200 and f"renewing network {network_id}" in answer["message"]
    flow_id = answer["flow"]["id"]
    approve(github, wait_until(lambda: flow(monitor, flow_id)["userCode"], timeout=60))
    done = ended(monitor, flow_id)
    assert done["status"] == "done" and f"network {network_id} renewed" in done["message"]
    network = db.networks.find_one({"_id": network_id})
    assert "unauthorized" not in network and network["page"] == 7 and network["accessToken"] in github.store.tokens
    db.networks.update_one({"_id": network_id}, {"$set": {"unauthorized": True}})
    status, answer = post(monitor, "/api/connect", {"service": "github", "user": EMAIL})
    flow_id = answer["flow"]["id"]
    approve(github, wait_until(lambda: flow(monitor, flow_id)["userCode"], timeout=60), allow=False)
    failed = ended(monitor, flow_id)
    assert failed["status"] == "failed" and "denied" in failed["message"] and "\n" not in failed["message"]
    assert db.networks.find_one({"_id": network_id})["unauthorized"] is True


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"service": "tumblr", "user": EMAIL}, 409, "runs from the command line: collector connect tumblr"),
        ({"service": "youtube", "user": EMAIL}, 409, "set YOUTUBE_CLIENT_ID and YOUTUBE_CLIENT_SECRET"),
        ({"service": "github", "user": "not-an-email"}, 400, "the person's email"),
        ({"service": "<b>x</b>", "user": EMAIL}, 400, "service is one of"),
        ({"service": "github", "user": EMAIL, "origin": "javascript:alert(1)"}, 400, "origin must be"),
        ({"service": "github", "user": EMAIL, "origin": "http://h:1/path?x"}, 400, "origin must be"),
    ],
)
def test_a_flow_that_cannot_start_says_why_before_any_request(db, monitor, github, body, status, words):
    got, answer = post(monitor, "/api/connect", body)
    assert got == status and words in answer["message"] and github.store.devices == {}
    assert post(monitor, "/api/connect/state", {"id": "no-such-flow"})[0] == 404


def test_the_code_flow_comes_back_to_the_monitor_and_a_state_of_no_waiting_flow_is_refused(db, monitor, github):
    url = github.url
    monitor.connections.apps = lambda service, api: App(
        "github", LOOPBACK, "GITHUB_CLIENT_ID", authorize_url=f"{url}/authorize", token_url=f"{url}/token"
    )
    body = {"service": "github", "user": EMAIL, "origin": "http://127.0.0.1:8089"}
    status, answer = post(monitor, "/api/connect", body)
    assert status == 200 and answer["flow"]["way"] == "browser"
    flow_id = answer["flow"]["id"]
    opened = wait_until(lambda: flow(monitor, flow_id)["openUrl"], timeout=60)
    asked = parse_qs(urlsplit(opened).query)
    assert asked["redirect_uri"] == ["http://127.0.0.1:8089/connect/callback"] and asked["code_challenge_method"]
    for forged in ({"code": ["c-forged-1"], "state": ["not-the-state"]}, {"code": ["c-forged-2"]}, {}):
        got, page = callback(monitor, forged)
        assert got == 400 and "no connect flow waiting here" in page and "c-forged" not in page
    assert flow(monitor, flow_id)["status"] == "pending"  # a forged answer ends nothing
    ended_on = github.decide(opened)  # the person allows; the browser is sent back to the monitor
    assert ended_on.startswith("http://127.0.0.1:8089/connect/callback?")
    got, page = callback(monitor, parse_qs(urlsplit(ended_on).query))
    assert got == 200 and "the monitor has the answer" in page and "code" not in page.lower().split("<p>")[0]
    done = ended(monitor, flow_id)
    (network,) = db.networks.find()
    assert done["status"] == "done" and network["accessToken"] in github.store.tokens
    assert callback(monitor, parse_qs(urlsplit(ended_on).query))[0] == 400  # the same answer twice: once only


def pkce(monitor, github) -> None:
    """The monitor's GitHub application made a PKCE one at the test's server (a browser flow)."""
    url = github.url
    monitor.connections.apps = lambda service, api: App(
        "github", LOOPBACK, "GITHUB_CLIENT_ID", authorize_url=f"{url}/authorize", token_url=f"{url}/token"
    )


@pytest.mark.parametrize("bound", [1, 2, 4])
def test_flows_under_way_are_bounded_and_a_freed_place_is_taken_again(db, monitor, github, monkeypatch, bound):
    monkeypatch.setattr(connecting, "MAX_PENDING", bound)
    pkce(monitor, github)
    ids = []
    for n in range(bound):
        status, answer = post(monitor, "/api/connect", {"service": "github", "user": f"p{n}@example.com"})
        assert status == 200, answer
        ids.append(answer["flow"]["id"])
    status, answer = post(monitor, "/api/connect", {"service": "github", "user": "late@example.com"})
    assert status == 409 and f"{bound} connect flows are under way already" in answer["message"]
    monitor.connections.attempts[ids[0]].deadline = 0.0  # the first flow's time is up: its place is free again
    assert ended(monitor, ids[0])["status"] == "failed"
    status, answer = post(monitor, "/api/connect", {"service": "github", "user": "late@example.com"})
    assert status == 200 and answer["flow"]["status"] == "pending"


@pytest.mark.parametrize("timeout", [0.5, 1.5])
def test_a_browser_flow_nobody_comes_back_to_ends_at_its_timeout_in_one_line(db, monitor, github, timeout):
    pkce(monitor, github)
    monitor.connections.timeout = timeout
    status, answer = post(monitor, "/api/connect", {"service": "github", "user": EMAIL})
    failed = ended(monitor, answer["flow"]["id"])
    assert failed["status"] == "failed" and failed["message"] == (
        f"github: no answer came back within {timeout:g}s: start the flow again"
    )
    assert failed["openUrl"] and db.networks.count_documents({}) == 0
    assert callback(monitor, parse_qs(urlsplit(failed["openUrl"]).query))[0] == 400  # an ended flow takes nothing


@pytest.mark.parametrize("way", ["device", "browser"])
def test_a_monitor_that_stops_ends_its_flows_without_writing(db, monitor, github, way):
    if way == "browser":
        pkce(monitor, github)
    status, answer = post(monitor, "/api/connect", {"service": "github", "user": EMAIL})
    flow_id = answer["flow"]["id"]
    wait_until(lambda: (f := flow(monitor, flow_id))["userCode"] or f["openUrl"], timeout=60)
    monitor.connections.close()
    failed = ended(monitor, flow_id)
    assert failed["status"] == "failed" and "the monitor stopped" in failed["message"]
    assert db.networks.count_documents({}) == 0
