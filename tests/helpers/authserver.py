"""A real authorisation server for the connect flows, built from Authlib's server classes (the RFCs as Authlib
implements them: RFC 6749's AuthorizationServer with the authorization-code grant under RFC 7636's CodeChallenge,
the refresh-token grant rotating its tokens, RFC 8628's device authorization endpoint and DeviceCodeGrant, and RFC
5849's OAuth 1.0a AuthorizationServer), served as a WSGI app on 127.0.0.1, an ephemeral port, in a thread.

What is ours is only the storage Authlib asks its integrations for (dicts) and the person: `/authorize` shows a
page with Allow and Deny buttons (a browser clicks one; `decide` posts the choice as a browser would),
`/device` takes a user code and the choice, and the device code's clock is `clock` (the client's fake sleep moves
it). Also: POST /api/v1/apps (Mastodon's registration: a client added to the store), createSession (Bluesky), and
GET /user (a resource: who the bearer token belongs to)."""

from __future__ import annotations

import hmac
import html
import json
import os
import secrets
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # http://127.0.0.1 in this process's tests

from authlib.oauth1 import AuthorizationServer as OAuth1Server  # noqa: E402
from authlib.oauth1 import ClientMixin as OAuth1ClientMixin  # noqa: E402
from authlib.oauth1 import OAuth1Request, TemporaryCredential  # noqa: E402
from authlib.oauth2 import AuthorizationServer  # noqa: E402
from authlib.oauth2.rfc6749 import ClientMixin, JsonRequest, OAuth2Request  # noqa: E402
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant  # noqa: E402
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload  # noqa: E402
from authlib.oauth2.rfc6750 import BearerTokenGenerator  # noqa: E402
from authlib.oauth2.rfc7636 import CodeChallenge  # noqa: E402
from authlib.oauth2.rfc8628 import DeviceAuthorizationEndpoint, DeviceCodeGrant, DeviceCredentialDict  # noqa: E402

USER = "octo"
ALIASES = {  # GitHub's paths, Mastodon's
    "/login/device/code": "/device/code",
    "/login/oauth/access_token": "/token",
    "/oauth/authorize": "/authorize",
    "/oauth/token": "/token",
}
ALL_GRANTS = ("authorization_code", "refresh_token", DeviceCodeGrant.GRANT_TYPE)


@dataclass
class Client(ClientMixin):
    client_id: str
    secret: str = ""
    redirect_uris: tuple[str, ...] = ()
    grants: tuple[str, ...] = ALL_GRANTS

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope):
        return scope or ""

    def check_redirect_uri(self, redirect_uri):
        """RFC 8252 section 7.3: a loopback redirect matches whatever its port."""
        return any(loopback_key(redirect_uri) == loopback_key(uri) for uri in self.redirect_uris)

    def check_client_secret(self, client_secret):
        return bool(self.secret) and hmac.compare_digest(self.secret, client_secret)

    def check_endpoint_auth_method(self, method, endpoint):
        return method == "none" if not self.secret else method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in self.grants


class ExactClient(Client):
    """A client whose redirect must be the registered one exactly, port included (as X's and Spotify's)."""

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri in self.redirect_uris


def loopback_key(uri: str) -> tuple[str, str, str]:
    parts = urlsplit(uri)
    port = "" if parts.hostname == "127.0.0.1" else str(parts.port)
    return parts.scheme, f"{parts.hostname}:{port}", parts.path


@dataclass
class Code:
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str | None
    code_challenge_method: str | None

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope


@dataclass
class Token:
    client_id: str
    user: str
    scope: str
    access_token: str
    refresh_token: str
    revoked: bool = False

    def check_client(self, client):
        return client.get_client_id() == self.client_id

    def get_scope(self):
        return self.scope

    def get_expires_in(self):
        return 3600

    def is_expired(self):
        return False

    def is_revoked(self):
        return self.revoked

    def get_user(self):
        return self.user


@dataclass
class Store:
    """What Authlib's integrations keep in a database, here in dicts; `clock` is the device codes' time."""

    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, Code] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    devices: dict[str, DeviceCredentialDict] = field(default_factory=dict)
    decisions: dict[str, tuple[str, bool]] = field(default_factory=dict)  # user code -> (user, approved)
    polls: dict[str, float] = field(default_factory=dict)  # device code -> when it was last polled
    clock: list[float] = field(default_factory=lambda: [0.0])
    min_gap: float = 0.0  # a poll sooner than this after the last one gets slow_down
    code_life: float = 1800.0  # the device code's life as the server keeps it
    interval: int = 5  # the polling interval the device answer asks for
    account_ids: dict[str, int] = field(default_factory=dict)  # a user's account id at /user (1 when not set)
    seen: list[dict[str, str]] = field(default_factory=list)  # every token request's form, for the tests
    oauth1_clients: dict[str, str] = field(default_factory=dict)
    temporary: dict[str, TemporaryCredential] = field(default_factory=dict)
    oauth1_tokens: dict[str, str] = field(default_factory=dict)
    nonces: set[str] = field(default_factory=set)
    sessions: dict[str, str] = field(default_factory=dict)  # bluesky handle -> app password
    jwts: dict[str, str] = field(default_factory=dict)  # bluesky accessJwt -> handle
    on_token: Any = None  # called with each access token issued (a fake API gives the person's likes to it)


class WsgiRequest(OAuth2Request):
    def __init__(self, environ: dict[str, Any], form: dict[str, str]):
        super().__init__(environ["REQUEST_METHOD"], request_uri(environ), headers=headers_of(environ))
        self._query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
        self._form = form
        self.payload = BasicOAuth2Payload(self._query | form)

    @property
    def args(self):
        return self._query

    @property
    def form(self):
        return self._form


class Server(AuthorizationServer):
    def __init__(self, store: Store):
        super().__init__()
        self.store = store
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                lambda **_: "at-" + secrets.token_urlsafe(16), lambda **_: "rt-" + secrets.token_urlsafe(16)
            ),
        )

    def query_client(self, client_id):
        return self.store.clients.get(client_id)

    def save_token(self, token, request):
        user = request.user or USER
        client = request.client.get_client_id()
        kept = Token(client, user, token.get("scope", ""), token["access_token"], token.get("refresh_token", ""))
        self.store.tokens[token["access_token"]] = kept
        if self.store.on_token is not None:
            self.store.on_token(token["access_token"])

    def create_oauth2_request(self, request):
        return request if isinstance(request, OAuth2Request) else WsgiRequest(*request)

    def create_json_request(self, request):  # pragma: no cover (no JSON endpoint here)
        return JsonRequest("POST", "/")

    def handle_response(self, status, body, headers):
        return status, body, headers

    def send_signal(self, name, *args, **kwargs):
        pass


class CodeGrant(AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def save_authorization_code(self, code, request):
        data = request.payload.data
        self.server.store.codes[code] = Code(
            request.client.get_client_id(),
            data.get("redirect_uri"),
            data.get("scope", ""),
            request.user,
            data.get("code_challenge"),
            data.get("code_challenge_method"),
        )

    def query_authorization_code(self, code, client):
        found = self.server.store.codes.get(code)
        return found if found and found.client_id == client.get_client_id() else None

    def delete_authorization_code(self, authorization_code):
        for key, value in list(self.server.store.codes.items()):
            if value is authorization_code:
                del self.server.store.codes[key]

    def authenticate_user(self, authorization_code):
        return authorization_code.user


class Refresh(RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation: each refresh gives a new refresh token, the old one revoked

    def authenticate_refresh_token(self, refresh_token):
        for token in self.server.store.tokens.values():
            if token.refresh_token == refresh_token and not token.revoked:
                return token
        return None

    def authenticate_user(self, refresh_token):
        return refresh_token.user

    def revoke_old_credential(self, refresh_token):
        refresh_token.revoked = True


class Devices(DeviceAuthorizationEndpoint):
    def __init__(self, server, base: str):
        super().__init__(server)
        self.base = base

    @property
    def INTERVAL(self):  # noqa: N802 (Authlib's name): the store's, as the test sets it
        return self.server.store.interval

    def get_verification_uri(self):
        return f"{self.base}/device"

    def save_device_credential(self, client_id, scope, data):
        store = self.server.store
        credential = {**data, "client_id": client_id, "scope": scope, "expires_at": store.clock[0] + store.code_life}
        store.devices[data["device_code"]] = DeviceCredentialDict(credential)


class DeviceGrant(DeviceCodeGrant):
    def query_device_credential(self, device_code):
        found = self.server.store.devices.get(device_code)
        if found is None:
            return None
        clock = self.server.store.clock

        class Timed(DeviceCredentialDict):  # expiry on the store's clock, not the wall's
            def is_expired(self):
                return self["expires_at"] < clock[0]

        return Timed(found)

    def query_user_grant(self, user_code):
        return self.server.store.decisions.get(user_code)

    def should_slow_down(self, credential):
        store = self.server.store
        last = store.polls.get(credential["device_code"])
        store.polls[credential["device_code"]] = store.clock[0]
        return last is not None and store.clock[0] - last < store.min_gap


class OAuth1Client(OAuth1ClientMixin):
    def __init__(self, client_id: str, secret: str):
        self.client_id, self.secret = client_id, secret

    def get_default_redirect_uri(self):
        return "oob"

    def get_client_secret(self):
        return self.secret

    def get_rsa_public_key(self):  # pragma: no cover
        return None


class OAuth1(OAuth1Server):
    def __init__(self, store: Store):
        super().__init__()
        self.store = store

    def create_oauth1_request(self, request):
        if isinstance(request, OAuth1Request):
            return request
        environ, body = request
        return OAuth1Request(environ["REQUEST_METHOD"], request_uri(environ), body, headers_of(environ))

    def handle_response(self, status_code, payload, headers):
        return status_code, payload, headers

    def get_client_by_id(self, client_id):
        secret = self.store.oauth1_clients.get(client_id)
        return OAuth1Client(client_id, secret) if secret else None

    def exists_nonce(self, nonce, request):
        key = f"{request.client_id}:{nonce}:{request.timestamp}"
        if key in self.store.nonces:
            return True
        self.store.nonces.add(key)
        return False

    def create_temporary_credential(self, request):
        credential = TemporaryCredential(
            oauth_token=secrets.token_urlsafe(12),
            oauth_token_secret=secrets.token_urlsafe(12),
            client_id=request.client_id,
            oauth_callback=request.redirect_uri,
        )
        self.store.temporary[credential["oauth_token"]] = credential
        return credential

    def get_temporary_credential(self, request):
        return self.store.temporary.get(request.token)

    def delete_temporary_credential(self, request):
        self.store.temporary.pop(request.token, None)

    def create_authorization_verifier(self, request):
        verifier = secrets.token_urlsafe(12)
        request.credential["oauth_verifier"] = verifier
        request.credential["user_id"] = request.user
        return verifier

    def create_token_credential(self, request):
        token, secret = "o1-" + secrets.token_urlsafe(12), secrets.token_urlsafe(12)
        self.store.oauth1_tokens[token] = secret
        return TemporaryCredential(oauth_token=token, oauth_token_secret=secret)


def request_uri(environ: dict[str, Any]) -> str:
    query = environ.get("QUERY_STRING", "")
    return f"{environ['wsgi.url_scheme']}://{environ['HTTP_HOST']}{environ['PATH_INFO']}" + (
        f"?{query}" if query else ""
    )


def headers_of(environ: dict[str, Any]) -> dict[str, str]:
    found = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        found["Content-Type"] = environ["CONTENT_TYPE"]
    return found


PAGE = """<!doctype html><title>Authorise</title><p>Let the collector read your likes?</p>
<form method=post action="{action}"><button id=allow name=decision value=allow>Allow</button>
<button id=deny name=decision value=deny>Deny</button></form>"""


class AuthServer:
    """The app and its routes; `url` once served."""

    def __init__(self, store: Store | None = None):
        self.store = store or Store()
        self.url = ""
        self.oauth2 = Server(self.store)
        self.oauth2.register_grant(CodeGrant, [CodeChallenge(required=True)])
        self.oauth2.register_grant(Refresh)
        self.oauth2.register_grant(DeviceGrant)
        self.oauth1 = OAuth1(self.store)
        self.lock = threading.Lock()  # one request at a time touches the store
        self.stars: Any = None  # a FakeGitHub (collector.devtools.fakeapi) serving GET /user/starred

    def add_client(self, client_id: str, secret: str = "", redirect: str = "http://127.0.0.1/callback") -> None:
        self.store.clients[client_id] = Client(client_id, secret, (redirect,))

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        with self.lock:
            status, payload, headers = self.route(environ, body)
        if isinstance(payload, list):  # OAuth 1.0a's answers: a form
            payload = urlencode(payload)
        if isinstance(payload, dict):
            payload = json.dumps(payload)
            if not any(k.lower() == "content-type" for k, _ in headers):
                headers = [*headers, ("Content-Type", "application/json")]
        data = payload.encode() if isinstance(payload, str) else bytes(payload or b"")
        start_response(f"{status} X", [(k, v) for k, v in headers if k.lower() != "content-length"])
        return [data]

    def route(self, environ, body: bytes):
        path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
        form = dict(parse_qsl(body.decode())) if b"{" not in body[:1] else {}
        path = ALIASES.get(path, path)
        if path.startswith("/broken/"):  # a server that answers what no flow can read: the body is the rest of the path
            return int(path.split("/")[2]), unquote(path.split("/", 3)[3]), [("Content-Type", "text/html")]
        if path == "/token":
            self.store.seen.append(form)
            return self.oauth2.create_token_response((environ, form))
        if path == "/device/code":
            return self.oauth2.create_endpoint_response("device_authorization", (environ, form))
        if path == "/device" and method == "POST":
            self.store.decisions[form["user_code"]] = (USER, form.get("decision") == "allow")
            return 200, "ok", []
        if path == "/authorize":
            return self.authorize(environ, method, form)
        if path.startswith("/oauth1/"):
            return self.oauth1_route(environ, path, method, body, form)
        if path == "/api/v1/apps" and method == "POST":
            client = Client(secrets.token_urlsafe(8), secrets.token_urlsafe(16), (form["redirect_uris"],))
            self.store.clients[client.client_id] = client
            return 200, {"client_id": client.client_id, "client_secret": client.secret, "name": form["client_name"]}, []
        if path == "/xrpc/com.atproto.server.createSession":
            asked = json.loads(body)
            if self.store.sessions.get(asked["identifier"]) != asked["password"]:
                return 401, {"error": "AuthenticationRequired", "message": "Invalid identifier or password"}, []
            jwt = {"accessJwt": "aj-" + secrets.token_urlsafe(8), "refreshJwt": "rj-" + secrets.token_urlsafe(8)}
            self.store.jwts[jwt["accessJwt"]] = asked["identifier"]
            return 200, {**jwt, "did": "did:plc:abc123", "handle": asked["identifier"]}, []
        bearer = environ.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ")
        if path == "/xrpc/com.atproto.server.getSession" and bearer in self.store.jwts:
            return 200, {"did": "did:plc:abc123", "handle": self.store.jwts[bearer]}, []
        token = self.store.tokens.get(bearer)
        if token is None and path in ("/user", "/api/v1/accounts/verify_credentials"):
            return 401, {"error": "The access token is invalid"}, []
        if path == "/user/starred" and self.stars is not None:  # the person's stars, as the project's fake API has them
            query = parse_qs(environ.get("QUERY_STRING", ""))
            status, headers, body = self.stars.handle(
                bearer, query, self.url, time.time(), environ.get("HTTP_IF_NONE_MATCH")
            )
            return status, body if body is not None else b"", [*headers.items(), ("Content-Type", "application/json")]
        if path == "/user":  # GitHub's
            return 200, {"login": token.user, "id": self.store.account_ids.get(token.user, 1)}, []
        if path == "/api/v1/accounts/verify_credentials":  # Mastodon's
            return 200, {"id": "109", "acct": token.user, "username": token.user}, []
        return 404, "not found", []

    def authorize(self, environ, method: str, form: dict[str, str]):
        request = WsgiRequest(environ, {})
        if method == "GET":
            grant = self.oauth2.get_consent_grant(request=request)
            del grant  # validated: a bad client, redirect or challenge is refused here
            action = html.escape(f"{environ['PATH_INFO']}?{environ['QUERY_STRING']}")
            return 200, PAGE.format(action=action), [("Content-Type", "text/html")]
        grant = self.oauth2.get_authorization_grant(request)
        user = USER if form.get("decision") == "allow" else None
        return self.oauth2.create_authorization_response(request, grant_user=user, grant=grant)

    def oauth1_route(self, environ, path: str, method: str, body: bytes, form: dict[str, str]):
        request = (environ, body.decode())
        if path == "/oauth1/request_token":
            return self.oauth1.create_temporary_credentials_response(request)
        if path == "/oauth1/access_token":
            return self.oauth1.create_token_response(request)
        if method == "GET":
            action = html.escape(f"{path}?{environ['QUERY_STRING']}")
            return 200, PAGE.format(action=action), [("Content-Type", "text/html")]
        user = USER if form.get("decision") == "allow" else None
        return self.oauth1.create_authorization_response(request, grant_user=user)

    def decide(self, authorize_address: str, allow: bool = True, verify: bool | str = True) -> str:
        """What a person's browser does: opens the authorisation page, clicks Allow (or Deny), and ends on the
        redirect's address (returned, not followed)."""
        import requests

        page = requests.get(authorize_address, timeout=10, verify=verify)
        assert page.status_code == 200, page.text
        answer = requests.post(
            authorize_address,
            data={"decision": "allow" if allow else "deny"},
            allow_redirects=False,
            timeout=10,
            verify=verify,
        )
        assert answer.status_code == 302, answer.text
        return answer.headers["Location"]


class Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002
        pass


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


@contextmanager
def serving(app: AuthServer, tls: ssl.SSLContext | None = None) -> Iterator[AuthServer]:
    server = make_server("127.0.0.1", 0, app, server_class=ThreadingServer, handler_class=Quiet)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls else "http"
    app.url = f"{scheme}://127.0.0.1:{server.server_port}"
    app.oauth2.register_endpoint(Devices(app.oauth2, app.url))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield app
    finally:
        server.shutdown()
        server.server_close()
        thread.join(60)


def query_of(address: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(address).query))


def with_query(address: str, **changes: str) -> str:
    parts = urlsplit(address)
    return parts._replace(query=urlencode(query_of(address) | changes)).geturl()


def oauth1_app(url: str, service: str) -> Any:
    """An OAuth 1.0a application of `service` whose three endpoints are this server's at `url`."""
    from collector.connect.apps import OAUTH1, App

    return App(
        service,
        OAUTH1,
        "KEY",
        "SECRET",
        request_token_url=f"{url}/oauth1/request_token",
        authorize_url=f"{url}/oauth1/authorize",
        access_token_url=f"{url}/oauth1/access_token",
    )
