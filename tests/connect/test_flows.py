"""The flows against a real authorisation server (tests/helpers/authserver.py: Authlib's server classes on a real
socket): the device grant's answers, PKCE with the verifier checked by the server, the state checked by the
client, OAuth 1.0a's request token, verifier and access token, and a refresh rotation."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

import pytest
import requests

from collector.connect import oauth2
from collector.connect.apps import APPS, DEVICE, LOOPBACK, OAUTH1, App, missing
from collector.connect.errors import DENIED, EXPIRED, MALFORMED, REFUSED, SETTINGS, STATE, UNREACHABLE, ConnectError
from collector.connect.flows import Flow, Options, Redirect, client_of, redirect_for, run_flow
from collector.settings import settings_for_tests

from helpers import free_port
from helpers.authserver import USER, ExactClient, oauth1_app, query_of, with_query


class Person:
    """The person at the other end: records what is said; `answer` gives the line they paste back (from the
    address they were asked to open), `on_browse` what their browser does."""

    def __init__(self, answer=None, on_browse=None, secret=""):
        self.lines: list[str] = []
        self.answer = answer
        self.on_browse = on_browse
        self.secret = secret

    def say(self, line: str) -> None:
        self.lines.append(line)

    def browse(self, url: str) -> bool:
        if self.on_browse is None:
            return False
        self.thread = threading.Thread(target=self.on_browse, args=(url,), daemon=True)
        self.thread.start()
        return True

    def address(self) -> str:
        return next(w for line in self.lines for w in line.split() if "/authorize?" in w)

    def read_line(self, timeout: float) -> str:
        return self.answer(self.address()) if self.answer else ""

    def read_secret(self, label: str, timeout: float) -> str:
        return self.secret


class Clock:
    """The flow's clock and sleep, and the device codes' clock on the server: one fake time; `on_sleep` runs at
    each sleep (the person deciding meanwhile)."""

    def __init__(self, store, on_sleep=None):
        self.store, self.on_sleep, self.waits = store, on_sleep, []

    def __call__(self) -> float:
        return self.store.clock[0]

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.store.clock[0] += seconds
        if self.on_sleep:
            self.on_sleep(len(self.waits))


def device_app(url: str) -> App:
    return App("github", DEVICE, "GITHUB_CLIENT_ID", device_url=f"{url}/device/code", token_url=f"{url}/token")


def code_app(url: str, **changes) -> App:
    app = App("spotify", LOOPBACK, "ID", "SECRET", False, authorize_url=f"{url}/authorize", token_url=f"{url}/token")
    return replace(app, **changes)


def decide_on(server, at: int, allow: bool = True):
    """The person enters the code (and allows or denies) when the flow has slept `at` times."""

    def on_sleep(n: int) -> None:
        if n == at:
            (code,) = list(server.store.devices.values())
            requests.post(
                f"{server.url}/device",
                data={"user_code": code["user_code"], "decision": "allow" if allow else "deny"},
                timeout=10,
            )

    return on_sleep


def device_flow(server, http, clock, timeout=600.0):
    flow = Flow(http, Person(), Options(timeout=timeout, browser=False), clock=clock, sleep=clock.sleep)
    return run_flow(device_app(server.url), {"GITHUB_CLIENT_ID": "public-app"}, flow), flow.prompt


@pytest.mark.parametrize("interval, polls", [(1, 1), (5, 3), (7, 4)])
def test_the_device_grant_polls_at_the_interval_until_the_code_is_entered(server, http, interval, polls):
    server.store.interval = interval
    clock = Clock(server.store, decide_on(server, polls))
    credentials, person = device_flow(server, http, clock)
    assert clock.waits == [interval] * polls  # authorization_pending until then, each poll one interval apart
    token = server.store.tokens[credentials["accessToken"]]
    assert token.user == USER and credentials["refreshToken"] == token.refresh_token
    code = next(iter(server.store.devices.values()))
    assert any(code["user_code"] in line for line in person.lines)
    assert any(f"{server.url}/device" in line for line in person.lines)
    assert not any(code["device_code"] in line for line in person.lines)  # the device code stays the client's


@pytest.mark.parametrize("gap, waits", [(8, [5, 5, 10, 10]), (12, [5, 5, 10, 15, 15])])
def test_slow_down_adds_five_seconds_to_every_later_poll(server, http, gap, waits):
    server.store.min_gap = gap  # the server wants polls at least this far apart: slow_down until they are
    clock = Clock(server.store, decide_on(server, len(waits)))
    credentials, _ = device_flow(server, http, clock)
    assert clock.waits == waits
    assert credentials["accessToken"] in server.store.tokens


@pytest.mark.parametrize("life, polls", [(12, 3), (4, 1)])
def test_an_expired_device_code_ends_the_flow_in_one_line(server, http, life, polls):
    server.store.code_life = life  # the server's expired_token, before the advertised expires_in
    clock = Clock(server.store)
    with pytest.raises(ConnectError) as caught:
        device_flow(server, http, clock)
    assert caught.value.kind == EXPIRED and "expired" in caught.value.message
    assert len(clock.waits) == polls and server.store.tokens == {}


@pytest.mark.parametrize("at", [1, 3])
def test_a_denied_device_code_says_denied(server, http, at):
    clock = Clock(server.store, decide_on(server, at, allow=False))
    with pytest.raises(ConnectError) as caught:
        device_flow(server, http, clock)
    assert caught.value.kind == DENIED and "denied" in caught.value.message and len(clock.waits) == at
    assert caught.value.exit_code == 1


@pytest.mark.parametrize("timeout, polls", [(12, 2), (30, 6)])
def test_the_flow_s_own_timeout_ends_the_polling(server, http, timeout, polls):
    clock = Clock(server.store)
    with pytest.raises(ConnectError) as caught:
        device_flow(server, http, clock, timeout=timeout)
    assert caught.value.kind == EXPIRED and len(clock.waits) == polls


def test_a_device_endpoint_that_refuses_the_client_is_one_line(server, http):
    flow = Flow(http, Person(), Options(browser=False))
    with pytest.raises(ConnectError) as caught:
        run_flow(device_app(server.url), {"GITHUB_CLIENT_ID": "nobody"}, flow)
    assert caught.value.kind == REFUSED and "invalid_client" in caught.value.message


def test_a_service_that_does_not_answer_is_unreachable(http):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectError) as caught:
        run_flow(device_app(url), {"GITHUB_CLIENT_ID": "x"}, Flow(http, Person(), Options(browser=False)))
    assert caught.value.kind == UNREACHABLE and "127.0.0.1" in caught.value.message


# --- the authorisation code with PKCE -------------------------------------------------------------------------------
def code_flow(server, http, person, values=None, **changes):
    flow = Flow(http, person, Options(timeout=30, browser=person.on_browse is not None))
    return run_flow(code_app(server.url, **changes), values or {"ID": "public-app"}, flow)


@pytest.mark.parametrize(
    "values, changes",
    [
        ({"ID": "public-app"}, {}),
        ({"ID": "private-app", "SECRET": "s3cr3t-client-value"}, {}),
        ({"ID": "private-app", "SECRET": "s3cr3t-client-value"}, {"basic_auth": True}),
    ],
)
def test_the_code_flow_pasted_back_gives_tokens_the_server_issued(server, http, values, changes):
    person = Person(answer=server.decide)
    credentials = code_flow(server, http, person, values, **changes)
    assert server.store.tokens[credentials["accessToken"]].client_id == values["ID"]
    asked = query_of(person.address())
    assert asked["code_challenge_method"] == "S256" and len(asked["state"]) >= 20
    (form,) = [f for f in server.store.seen if f.get("grant_type") == "authorization_code"]
    assert oauth2.Pkce(form["code_verifier"], asked["state"]).challenge == asked["code_challenge"]
    assert ("client_secret" in form) == ("SECRET" in values and not changes)  # basic: in the header instead


def test_the_loopback_listener_takes_the_browser_s_redirect(server, http):
    pages = []

    def browser(url: str) -> None:
        location = server.decide(url)
        pages.append(requests.get(location, timeout=10))

    person = Person(on_browse=browser)
    credentials = code_flow(server, http, person)
    person.thread.join(30)  # the browser's half: its page read after the listener answered
    assert credentials["accessToken"] in server.store.tokens
    assert pages[0].status_code == 200 and "return to the terminal" in pages[0].text
    assert query_of(pages[0].url)["code"] not in pages[0].text


@pytest.mark.parametrize("state", ["", "forged", "x" * 40])
def test_a_state_that_is_not_the_flow_s_is_refused_and_nothing_is_exchanged(server, http, state):
    person = Person(answer=lambda url: with_query(server.decide(url), state=state))
    with pytest.raises(ConnectError) as caught:
        code_flow(server, http, person)
    assert caught.value.kind == STATE and "state" in caught.value.message
    assert [f for f in server.store.seen if f.get("grant_type") == "authorization_code"] == []
    assert server.store.tokens == {}


@pytest.mark.parametrize("verifier", ["a" * 43, "Zz0-._~" * 18])
def test_the_server_refuses_a_code_with_another_verifier(server, http, verifier):
    app, client, pkce = code_app(server.url), oauth2.Client("public-app"), oauth2.Pkce.new()
    redirect = "http://127.0.0.1:9/callback"
    location = server.decide(oauth2.authorize_url(app, client, pkce, redirect))
    code = oauth2.read_redirect(app, location, pkce.state)
    with pytest.raises(ConnectError) as caught:
        oauth2.exchange_code(http, app, client, code, replace(pkce, verifier=verifier), redirect)
    assert caught.value.kind == REFUSED and "invalid_grant" in caught.value.message
    assert server.store.tokens == {}


def test_a_denial_in_the_browser_says_denied(server, http):
    person = Person(answer=lambda url: server.decide(url, allow=False))
    with pytest.raises(ConnectError) as caught:
        code_flow(server, http, person)
    assert caught.value.kind == DENIED


@pytest.mark.parametrize("answer", ["", "   ", None])
def test_no_answer_within_the_time_is_one_line(server, http, answer):
    person = Person(answer=(lambda url: answer) if answer is not None else None)
    with pytest.raises(ConnectError) as caught:
        code_flow(server, http, person)
    assert caught.value.kind == EXPIRED and "30s" in caught.value.message


def test_a_refresh_rotates_the_refresh_token(server, http):
    from collector.sdk import Job, OAuth2Refresh, Unauthorized
    from connectors.spotify import SpotifyConnector

    from helpers import T0

    first = code_flow(server, http, Person(answer=server.decide))
    settings = settings_for_tests(allow_private_hosts=True)
    connector = SpotifyConnector(settings.with_(raw={"SPOTIFY_CLIENT_ID": "public-app"}), http)
    refresh = OAuth2Refresh(f"{server.url}/token", "SPOTIFY_CLIENT_ID", "SPOTIFY_CLIENT_SECRET")
    second = refresh.refresh(connector, Job({"refreshToken": first["refreshToken"]}, "initial", T0))
    assert second["refreshToken"] != first["refreshToken"] and second["accessToken"] != first["accessToken"]
    with pytest.raises(Unauthorized):  # the old refresh token was spent
        refresh.refresh(connector, Job({"refreshToken": first["refreshToken"]}, "initial", T0))
    third = refresh.refresh(connector, Job({"refreshToken": second["refreshToken"]}, "initial", T0))
    assert third["accessToken"] in server.store.tokens


# --- OAuth 1.0a ------------------------------------------------------------------------------------------------------


def oauth1_flow(server, http, answer, secret="consumer-secret-value"):
    person = Person(answer=answer)
    person.address = lambda: next(w for line in person.lines for w in line.split() if "/oauth1/authorize?" in w)
    flow = Flow(http, person, Options(timeout=30, browser=False))
    return run_flow(oauth1_app(server.url, "flickr"), {"KEY": "consumer-key", "SECRET": secret}, flow)


def test_oauth1_request_token_verifier_and_access_token(server, http):
    credentials = oauth1_flow(server, http, server.decide)
    assert server.store.oauth1_tokens[credentials["accessToken"]] == credentials["accessTokenSecret"]
    assert server.store.temporary == {}  # the request token was spent


def test_oauth1_refuses_an_answer_for_another_request_token(server, http):
    with pytest.raises(ConnectError) as caught:
        oauth1_flow(server, http, lambda url: with_query(server.decide(url), oauth_token="another"))
    assert caught.value.kind == STATE and server.store.oauth1_tokens == {}


def test_oauth1_with_a_wrong_consumer_secret_is_refused_by_the_server(server, http):
    with pytest.raises(ConnectError) as caught:
        oauth1_flow(server, http, server.decide, secret="not-the-secret")
    assert caught.value.kind == REFUSED


def test_oauth1_denied(server, http):
    with pytest.raises(ConnectError) as caught:
        oauth1_flow(server, http, lambda url: server.decide(url, allow=False))
    assert caught.value.kind == DENIED


# --- the applications' settings --------------------------------------------------------------------------------------
@pytest.mark.parametrize("service", sorted(s for s, a in APPS.items() if a.settings))
def test_missing_settings_name_what_to_set_and_where_to_register(service):
    app = APPS[service]
    line = missing(app, {})
    assert all(name in line for name in app.settings) and app.console.split()[0] in line
    if app.client_secret in app.settings:
        with pytest.raises(ConnectError) as caught:
            client_of(app, {app.client_id: "id", app.client_secret: "  "})
        assert caught.value.kind == SETTINGS and caught.value.exit_code == 2
        assert app.client_id not in caught.value.message
    else:  # a public client: the id alone will do, a secret is sent when set
        assert client_of(app, {app.client_id: " id "}) == oauth2.Client("id")
    assert missing(app, dict.fromkeys(app.settings, "set")) == ""


def test_every_service_with_a_connector_has_a_flow():
    from collector.engine.registry import Registry

    assert set(APPS) == set(Registry().names())


# --- no secret in the logs -------------------------------------------------------------------------------------------
def test_no_secret_of_a_flow_reaches_a_log_line(server, http, caplog):
    """oauthlib logs what it signs and urllib3 what it sends, at DEBUG: the flows' secrets are masked in them."""
    from collector.sdk.redaction import install

    install()
    caplog.set_level(logging.DEBUG)
    confidential = {"ID": "private-app", "SECRET": "s3cr3t-client-value"}
    tokens = code_flow(server, http, Person(answer=server.decide), confidential)
    pasted: list[str] = []
    tokens |= oauth1_flow(server, http, lambda url: pasted.append(server.decide(url)) or pasted[-1])
    assert any(r.name.startswith("oauthlib") for r in caplog.records)  # there were lines to leak into
    spent = [c["code_verifier"] for c in server.store.seen if "code_verifier" in c]
    spent += [c["code"] for c in server.store.seen if "code" in c]
    spent += [query_of(pasted[0])["oauth_verifier"], query_of(pasted[0])["oauth_token"]]  # the request token too
    for secret in [*tokens.values(), *spent, "s3cr3t-client-value", "consumer-secret-value"]:
        assert secret not in caplog.text


def test_the_services_table_says_the_flow_each_service_uses():
    from pathlib import Path

    words = {"device code": DEVICE, "browser, PKCE": LOOPBACK, "OAuth 1.0a": OAUTH1}
    words |= {"app on the instance, browser, PKCE": "mastodon", "app password": "bluesky"}
    page = (Path(__file__).resolve().parents[2] / "docs" / "services.md").read_text()
    table = page.split("| service | collects | connect flow |", 1)[1].split("\n\n", 1)[0]
    said = {row.split("`")[1]: row.split(" | ")[2] for row in table.splitlines() if row.startswith("| `")}
    assert {service: words[word] for service, word in said.items()} == {s: a.flow for s, a in APPS.items()}


@pytest.mark.parametrize(
    "doc",
    [
        {"clientId": "a", "clientSecret": "b", "redirectUri": "http://127.0.0.1:notaport/callback"},
        {"clientId": "a", "clientSecret": "b", "redirectUri": "https://evil.example/callback"},
        {"clientId": ["a"], "clientSecret": "b", "redirectUri": "http://127.0.0.1:5000/callback"},
        {"clientId": "a", "clientSecret": None, "redirectUri": "http://127.0.0.1:5000/callback"},
        {"clientId": "a", "clientSecret": "b"},
    ],
)
def test_an_unusable_remembered_application_is_registered_again(db, doc):
    from collector.connect.instances import known_app

    db.connectApps.insert_one({"_id": "https://social.example", **doc})
    assert known_app(db, "https://social.example") is None
    db.connectApps.replace_one(
        {}, {"clientId": "a", "clientSecret": "b", "redirectUri": "http://127.0.0.1:5000/callback"}
    )
    assert known_app(db, "https://social.example").redirect_uri.endswith(":5000/callback")


@pytest.mark.parametrize(
    "status, body, kind, words",
    [
        (200, "<html>maintenance</html>", MALFORMED, "neither JSON nor a form"),
        (200, "[1, 2]", MALFORMED, "not an object"),
        (200, '{"device_code": "d", "user_code": "u"}', MALFORMED, "without verification_uri"),
        (
            200,
            '{"device_code": "d", "user_code": "u", "verification_uri": "https://x", "expires_in": -1}',
            MALFORMED,
            "expires_in",
        ),
        (503, "{}", UNREACHABLE, "the service is down"),
        (418, '{"error": "device_flow_disabled"}', REFUSED, "device_flow_disabled"),
    ],
)
def test_an_answer_the_flow_cannot_use_is_one_line(server, http, status, body, kind, words):
    from urllib.parse import quote

    app = replace(device_app(server.url), device_url=f"{server.url}/broken/{status}/{quote(body, safe='')}")
    with pytest.raises(ConnectError) as caught:
        run_flow(app, {"GITHUB_CLIENT_ID": "public-app"}, Flow(http, Person(), Options(browser=False)))
    assert caught.value.kind == kind and words in caught.value.message and "\n" not in caught.value.message


# --- a redirect registered exactly ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, expected",
    [
        ("", Redirect("127.0.0.1", 0, "/callback")),
        (" http://127.0.0.1:8123/cb ", Redirect("127.0.0.1", 8123, "/cb")),
        ("http://localhost:9000/oauth/done", Redirect("localhost", 9000, "/oauth/done")),
        ("http://127.0.0.1:5000", Redirect("127.0.0.1", 5000, "/")),
    ],
)
def test_a_registered_redirect_comes_from_its_setting(value, expected):
    app = APPS["spotify"]
    assert redirect_for(app, {app.redirect: value}, 0) == expected


@pytest.mark.parametrize(
    "value",
    [
        "https://127.0.0.1:8123/cb",
        "http://127.0.0.1/cb",
        "http://example.com:8080/cb",
        "callback",
        "http://127.0.0.1:99999/x",
        "http://127.0.0.1:80/cb?x=1",
        "http://[::1]:8000/cb",
    ],
)
def test_an_unusable_registered_redirect_names_its_setting(value):
    app = APPS["twitter"]
    with pytest.raises(ConnectError) as caught:
        redirect_for(app, {app.redirect: value}, 0)
    assert (
        caught.value.kind == SETTINGS and "TWITTER_REDIRECT_URI" in caught.value.message and caught.value.exit_code == 2
    )


@pytest.mark.parametrize("host, path, browser", [("localhost", "/registered", False), ("127.0.0.1", "/oauth/cb", True)])
def test_the_flow_sends_the_registered_redirect_exactly(server, http, host, path, browser):
    registered = f"http://{host}:{free_port()}{path}"
    server.store.clients["exact-app"] = ExactClient("exact-app", "", (registered,))
    pages = []

    def in_browser(url: str) -> None:
        pages.append(requests.get(server.decide(url), timeout=10))

    person = Person(answer=None if browser else server.decide, on_browse=in_browser if browser else None)
    values = {"ID": "exact-app", "REDIRECT": registered}
    flow = Flow(http, person, Options(timeout=30, browser=browser))
    credentials = run_flow(code_app(server.url, redirect="REDIRECT"), values, flow)
    if browser:
        person.thread.join(30)
        assert pages[0].status_code == 200
    assert credentials["accessToken"] in server.store.tokens
    assert query_of(person.address())["redirect_uri"] == registered
