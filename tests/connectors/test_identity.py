"""The identity step (`Connector.whoami`, collector/sdk/whoami.py) of every built-in connector, against each
service's documented "who am I" answer: who the token belongs to (one call), a refused token (the service's own
401 form: Flickr's `stat: fail` code 98 with a 200, Stack Exchange's `error_id`, Facebook's code 190 with a 400),
and an answer without an account id, each the one AccountError `networks add` prints.

The answers are the services' reference examples, trimmed to the fields read (and a few beside them):
GitHub REST `GET /user` (octocat), Stack Exchange `/2.3/me` (user_id, display_name), Mastodon
`GET /api/v1/accounts/verify_credentials` (trwnh), Reddit `GET /api/v1/me`, atproto `com.atproto.server.getSession`,
X `GET /2/users/me` (TwitterDev), YouTube `channels.list?mine=true` (Google for Developers), Vimeo `GET /me`,
Tumblr `GET /v2/user/info` (derekg), Flickr `flickr.test.login` (Bees), Spotify `GET /v1/me` (wizzler), Dribbble
`GET /v2/user` (simplebits), Graph API `GET /me?fields=id,name`.
"""

from __future__ import annotations

import re

import pytest
import requests
import responses

from collector.ops import accounts
from collector.ops.accounts import IdentityRefused, IdentityUnreadable, ServiceUnreachable
from collector.sdk import Job
from collector.sdk.errors import BadResponse, Unauthorized
from collector.settings import settings_for_tests

from helpers import T0

TOKEN = "tok_SECRET_abcdef123456"
KEYS = {
    "STACKEXCHANGE_KEY": "se-app-key-123456",
    "FLICKR_API_KEY": "flickr-key-123456",
    "FLICKR_API_SECRET": "flickr-secret-123456",
}


def settings():
    base = settings_for_tests(github_api_url="https://api.github.com")
    return base.with_(allow_private_hosts=True, raw={**base.raw, **KEYS})


# service -> (credentials, the URL asked, the documented answer, (account id, name, fields))
CASES = {
    "github": (
        {},
        "https://api.github.com/user",
        {"login": "octocat", "id": 1, "node_id": "MDQ6VXNlcjE=", "name": "monalisa octocat", "type": "User"},
        ("1", "octocat", {}),
    ),
    "gist": (
        {},
        "https://api.github.com/user",
        {"login": "octocat", "id": 1, "name": "monalisa octocat"},
        ("1", "octocat", {}),
    ),
    "stackoverflow": (
        {},
        "https://api.stackexchange.com/2.3/me",
        {
            "items": [{"user_id": 22656, "account_id": 11683, "display_name": "Jon Skeet", "reputation": 1}],
            "has_more": False,
            "quota_max": 10000,
            "quota_remaining": 9999,
        },
        ("22656", "Jon Skeet", {}),
    ),
    "mastodon": (
        {"instanceUrl": "https://mastodon.social"},
        "https://mastodon.social/api/v1/accounts/verify_credentials",
        {"id": "14715", "username": "trwnh", "acct": "trwnh", "display_name": "infinite love ⴳ", "locked": False},
        ("14715@mastodon.social", "trwnh", {}),
    ),
    "reddit": (
        {},
        "https://oauth.reddit.com/api/v1/me",
        {"name": "spez", "id": "1w72", "created_utc": 1118030400.0, "link_karma": 1},
        ("1w72", "spez", {"username": "spez"}),
    ),
    "bluesky": (
        {},
        "https://bsky.social/xrpc/com.atproto.server.getSession",
        {"handle": "alice.bsky.social", "did": "did:plc:z72i7hdynmk6r22z27h6tvur", "active": True},
        ("did:plc:z72i7hdynmk6r22z27h6tvur", "alice.bsky.social", {"did": "did:plc:z72i7hdynmk6r22z27h6tvur"}),
    ),
    "twitter": (
        {},
        "https://api.x.com/2/users/me",
        {"data": {"id": "2244994945", "name": "X Dev", "username": "TwitterDev"}},
        ("2244994945", "TwitterDev", {"serviceUserId": "2244994945"}),
    ),
    "youtube": (
        {},
        "https://www.googleapis.com/youtube/v3/channels",
        {
            "kind": "youtube#channelListResponse",
            "etag": "x",
            "pageInfo": {"totalResults": 1, "resultsPerPage": 5},
            "items": [
                {
                    "kind": "youtube#channel",
                    "id": "UC_x5XG1OV2P6uZZ5FSM9Ttw",
                    "snippet": {"title": "Google for Developers"},
                }
            ],
        },
        ("UC_x5XG1OV2P6uZZ5FSM9Ttw", "Google for Developers", {}),
    ),
    "vimeo": (
        {},
        "https://api.vimeo.com/me",
        {"uri": "/users/152184", "name": "Staff Picks", "link": "https://vimeo.com/staff", "account": "business"},
        ("/users/152184", "Staff Picks", {}),
    ),
    "tumblr": (
        {},
        "https://api.tumblr.com/v2/user/info",
        {
            "meta": {"status": 200, "msg": "OK"},
            "response": {"user": {"following": 263, "name": "derekg", "likes": 606, "blogs": []}},
        },
        ("derekg", "derekg", {}),
    ),
    "flickr": (
        {"accessTokenSecret": "flickr_token_SECRET_99"},
        "https://api.flickr.com/services/rest/",
        {"user": {"id": "12037949754@N01", "username": {"_content": "Bees"}}, "stat": "ok"},
        ("12037949754@N01", "Bees", {}),
    ),
    "spotify": (
        {},
        "https://api.spotify.com/v1/me",
        {"display_name": "JM Wizzler", "id": "wizzler", "type": "user", "uri": "spotify:user:wizzler"},
        ("wizzler", "JM Wizzler", {}),
    ),
    "dribbble": (
        {},
        "https://api.dribbble.com/v2/user",
        {"id": 1, "name": "Dan Cederholm", "login": "simplebits", "html_url": "https://dribbble.com/simplebits"},
        ("1", "simplebits", {}),
    ),
    "facebook": (
        {},
        "https://graph.facebook.com/v25.0/me",
        {"id": "10158880883750002", "name": "Ann Example"},
        ("10158880883750002", "Ann Example", {}),
    ),
}

# service -> (status, the documented body of a refused token)
REFUSALS = {
    "github": (401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
    "gist": (401, {"message": "Bad credentials"}),
    "stackoverflow": (400, {"error_id": 402, "error_name": "invalid_access_token", "error_message": "invalid"}),
    "mastodon": (401, {"error": "The access token is invalid"}),
    "reddit": (401, {"message": "Unauthorized", "error": 401}),
    "bluesky": (401, {"error": "InvalidToken", "message": "Bad token scope"}),
    "twitter": (401, {"title": "Unauthorized", "type": "about:blank", "status": 401, "detail": "Unauthorized"}),
    "youtube": (
        401,
        {
            "error": {
                "code": 401,
                "message": "Request had invalid authentication credentials.",
                "status": "UNAUTHENTICATED",
            }
        },
    ),
    "vimeo": (401, {"error": "Something strange occurred.", "developer_message": "No user credentials were provided."}),
    "tumblr": (401, {"meta": {"status": 401, "msg": "Unauthorized"}, "response": []}),
    "flickr": (200, {"stat": "fail", "code": 98, "message": "Invalid auth token"}),
    "spotify": (401, {"error": {"status": 401, "message": "Invalid access token"}}),
    "dribbble": (401, {"message": "Bad credentials."}),
    "facebook": (400, {"error": {"message": "Invalid OAuth access token.", "type": "OAuthException", "code": 190}}),
}

# service -> an answer that says nothing of who the token belongs to
EMPTY = {
    "stackoverflow": {"items": [], "has_more": False, "quota_max": 10000, "quota_remaining": 9998},
    "youtube": {"kind": "youtube#channelListResponse", "pageInfo": {"totalResults": 0}, "items": []},
    "tumblr": {"meta": {"status": 200, "msg": "OK"}, "response": {"user": {"blogs": []}}},
    "flickr": {"stat": "ok"},
    "twitter": {"errors": [{"title": "Not Found Error"}]},
}


def test_every_builtin_connector_declares_an_identity_step():
    from collector.engine import Registry

    registry = Registry()
    builtins = [name for name in registry.names() if registry.is_builtin(name)]
    assert sorted(builtins) == sorted(CASES)
    assert all(registry.get(name).whoami is not None for name in builtins)


def credentials(service: str) -> dict[str, str]:
    return {"accessToken": TOKEN, **CASES[service][0]}


@pytest.mark.parametrize("service", sorted(CASES))
def test_one_call_says_who_the_token_belongs_to(http_mock, service):
    _, url, body, (account, name, fields) = CASES[service]
    http_mock.get(re.compile(re.escape(url) + r"(\?.*)?$"), json=body)
    given, identity = accounts.identify(service, credentials(service), now=T0, settings=settings())
    assert (identity.account_id, identity.name, dict(identity.fields)) == (account, name, fields)
    assert given == credentials(service) and len(http_mock.calls) == 1
    request = http_mock.calls[0].request
    assert TOKEN not in request.url  # in a header (or a signature), never the address
    auth = request.headers.get("Authorization", "")
    auth = auth.decode() if isinstance(auth, bytes) else auth  # OAuth 1.0a: oauth_token="..." in the signed header
    assert TOKEN in auth


@pytest.mark.parametrize("service", sorted(REFUSALS))
def test_a_refused_token_is_one_line_naming_the_service_and_never_the_token(http_mock, service):
    _, url, _, _ = CASES[service]
    status, body = REFUSALS[service]
    body = {**body, "echo": TOKEN}  # a service that echoes the token back: still never shown
    http_mock.get(re.compile(re.escape(url) + r"(\?.*)?$"), json=body, status=status)
    with pytest.raises(IdentityRefused) as refused:
        accounts.identify(service, credentials(service), now=T0, settings=settings())
    line = str(refused.value)
    assert line.startswith(f"{service} refused the token") and TOKEN not in line and "\n" not in line


@pytest.mark.parametrize("service", sorted(CASES))
def test_an_answer_without_an_account_id_is_named_not_guessed(http_mock, service):
    _, url, _, _ = CASES[service]
    http_mock.get(re.compile(re.escape(url) + r"(\?.*)?$"), json=EMPTY.get(service, {"unexpected": True}))
    with pytest.raises(IdentityUnreadable) as unreadable:
        accounts.identify(service, credentials(service), now=T0, settings=settings())
    assert f"{service} did not say who the token belongs to" in str(unreadable.value)
    assert "account id" in str(unreadable.value) or "usable" in str(unreadable.value)


@pytest.mark.parametrize(
    "body",
    [
        {"id": {"$gt": ""}, "login": "x"},
        {"id": True, "login": "x"},
        {"id": "a b", "login": "x"},
        {"id": "x" * 300, "login": "x"},
        {"id": None},
        ["not", "an", "object"],
    ],
)
def test_an_account_id_that_is_not_a_plain_value_is_refused(http_mock, body):
    http_mock.get("https://api.github.com/user", json=body)
    with pytest.raises(IdentityUnreadable):
        accounts.identify("github", {"accessToken": TOKEN}, now=T0, settings=settings())


def test_a_name_with_terminal_controls_is_kept_but_the_account_id_decides(http_mock):
    http_mock.get("https://api.github.com/user", json={"id": 7, "login": "\x1b[31mred\x1b[0m"})
    _, identity = accounts.identify("github", {"accessToken": TOKEN}, now=T0, settings=settings())
    assert identity.account_id == "7" and "red" in identity.name


def test_a_path_field_that_is_not_a_plain_name_is_refused(http_mock):
    http_mock.get(
        "https://oauth.reddit.com/api/v1/me", json={"id": "1w72", "name": "../../admin"}
    )  # goes into /user/{name}/saved
    with pytest.raises(IdentityUnreadable, match="username"):
        accounts.identify("reddit", {"accessToken": TOKEN}, now=T0, settings=settings())


@pytest.mark.parametrize(
    "answer, kind",
    [
        ({"status": 503, "body": "down"}, ServiceUnreachable),
        ({"status": 500, "json": {"message": "oops"}}, ServiceUnreachable),
        ({"status": 429, "json": {}, "headers": {"Retry-After": "30"}}, ServiceUnreachable),
        ({"status": 200, "body": "<html>not json</html>"}, IdentityUnreadable),
        ({"status": 404, "json": {"message": "Not Found"}}, IdentityUnreadable),
        ({"body": requests.ConnectionError("refused")}, ServiceUnreachable),
    ],
)
def test_a_service_that_does_not_answer_usably_says_which_way(http_mock, answer, kind):
    http_mock.get("https://api.github.com/user", **answer)
    with pytest.raises(kind) as failed:
        accounts.identify("github", {"accessToken": TOKEN}, now=T0, settings=settings())
    assert TOKEN not in str(failed.value) and str(failed.value).startswith("github ")


def test_the_sdk_step_raises_the_connectors_own_errors(http_mock):
    """Without the operator's tools: `Connector.identify` raises what a run would (Unauthorized, BadResponse)."""
    from collector.sdk import Http
    from connectors.github import GitHubConnector

    connector = GitHubConnector(settings(), Http(settings()))
    job = Job({"user": "ann@x.test", "accessToken": TOKEN}, "initial", T0)
    http_mock.get("https://api.github.com/user", json={"message": "Bad credentials"}, status=401)
    with pytest.raises(Unauthorized):
        connector.identify(job)
    http_mock.replace(responses.GET, "https://api.github.com/user", json={"login": "octocat"})
    with pytest.raises(BadResponse, match="account id"):
        connector.identify(job)


def test_what_each_connector_asks_for():
    from collector.engine import Registry

    registry = Registry()

    def asked(service):
        return [(c.name, c.required) for c in registry.get(service).credential_fields()]

    assert asked("github") == [("accessToken", True)]
    assert asked("mastodon") == [("accessToken", True), ("instanceUrl", True)]
    assert asked("flickr") == [("accessToken", True), ("accessTokenSecret", True)]
    assert asked("reddit") == [("accessToken", True), ("refreshToken", False)]
    assert asked("bluesky") == [("accessToken", True), ("refreshToken", False), ("pdsUrl", False)]
    assert asked("tumblr") == [("accessToken", True), ("accessTokenSecret", False), ("refreshToken", False)]
