"""What each service's authorisation asks for, declared once (pure data): which flow it offers, the settings that
hold the application's credentials, where an operator registers the application, the endpoints and the scope.

The flows: `device` (RFC 8628: a code to enter on another screen), `loopback` (the authorisation code with PKCE,
RFC 7636, its redirect on 127.0.0.1, RFC 8252), `oauth1` (OAuth 1.0a with a verifier), `mastodon` (the application
registered on the instance first, then `loopback`), `bluesky` (an app password exchanged for a session)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

DEFAULT_TIMEOUT = 600.0  # seconds a flow waits for the person, by default (ten minutes)
DEVICE, LOOPBACK, OAUTH1, MASTODON, BLUESKY = "device", "loopback", "oauth1", "mastodon", "bluesky"
FLOW_WORDS = {
    DEVICE: "device code (RFC 8628)",
    LOOPBACK: "browser, PKCE and a 127.0.0.1 redirect (RFC 7636, RFC 8252)",
    OAUTH1: "OAuth 1.0a with a verifier",
    MASTODON: "app registered on the instance, then browser and PKCE",
    BLUESKY: "app password (createSession)",
}


@dataclass(frozen=True)
class App:
    """One service's authorisation. `client_id`/`client_secret` name settings (empty: none needed); a secret that
    is not `secret_required` is sent only when set (a public client). `basic_auth`: the token endpoint takes the
    client's credentials as HTTP Basic, else in the form."""

    service: str
    flow: str
    client_id: str = ""
    client_secret: str = ""
    secret_required: bool = True
    console: str = ""
    scope: str = ""
    device_url: str = ""
    authorize_url: str = ""
    token_url: str = ""
    request_token_url: str = ""
    access_token_url: str = ""
    extra: tuple[tuple[str, str], ...] = ()  # more parameters of the authorisation request
    basic_auth: bool = False
    redirect: str = ""  # the setting of a redirect registered exactly (empty: http://127.0.0.1, any port)

    @property
    def settings(self) -> tuple[str, ...]:
        """The settings this application's credentials come from, the required ones."""
        return tuple(n for n in (self.client_id, self.client_secret if self.secret_required else "") if n)


def _github(service: str) -> App:
    return App(
        service,
        DEVICE,
        client_id="GITHUB_CLIENT_ID",
        console="https://github.com/settings/developers (an OAuth app with Device Flow enabled)",
        scope="read:user",
        device_url="{web}/login/device/code",
        token_url="{web}/login/oauth/access_token",
    )


APPS: Mapping[str, App] = {
    app.service: app
    for app in (
        _github("github"),
        _github("gist"),
        App(
            "youtube",
            DEVICE,
            client_id="YOUTUBE_CLIENT_ID",
            client_secret="YOUTUBE_CLIENT_SECRET",
            console="https://console.cloud.google.com/apis/credentials (an OAuth client of type TVs and Limited "
            "Input devices)",
            scope="https://www.googleapis.com/auth/youtube.readonly",
            device_url="https://oauth2.googleapis.com/device/code",
            token_url="https://oauth2.googleapis.com/token",
        ),
        App(
            "twitter",
            LOOPBACK,
            "TWITTER_CLIENT_ID",
            "TWITTER_CLIENT_SECRET",
            secret_required=False,
            console="https://developer.x.com/en/portal/dashboard",
            scope="tweet.read users.read like.read offline.access",
            authorize_url="https://x.com/i/oauth2/authorize",
            token_url="https://api.x.com/2/oauth2/token",
            basic_auth=True,
            redirect="TWITTER_REDIRECT_URI",
        ),
        App(
            "spotify",
            LOOPBACK,
            "SPOTIFY_CLIENT_ID",
            "SPOTIFY_CLIENT_SECRET",
            secret_required=False,
            console="https://developer.spotify.com/dashboard",
            scope="user-library-read",
            authorize_url="https://accounts.spotify.com/authorize",
            token_url="https://accounts.spotify.com/api/token",
            redirect="SPOTIFY_REDIRECT_URI",
        ),
        App(
            "reddit",
            LOOPBACK,
            "REDDIT_CLIENT_ID",
            "REDDIT_CLIENT_SECRET",
            secret_required=False,
            console="https://www.reddit.com/prefs/apps (an installed app)",
            scope="history identity",
            authorize_url="https://www.reddit.com/api/v1/authorize",
            token_url="https://www.reddit.com/api/v1/access_token",
            extra=(("duration", "permanent"),),
            basic_auth=True,
            redirect="REDDIT_REDIRECT_URI",
        ),
        App(
            "stackoverflow",
            LOOPBACK,
            "STACKEXCHANGE_CLIENT_ID",
            "STACKEXCHANGE_CLIENT_SECRET",
            console="https://stackapps.com/apps/oauth/register",
            scope="no_expiry",
            authorize_url="https://stackoverflow.com/oauth",
            token_url="https://stackoverflow.com/oauth/access_token/json",
            redirect="STACKEXCHANGE_REDIRECT_URI",
        ),
        App(
            "vimeo",
            LOOPBACK,
            "VIMEO_CLIENT_ID",
            "VIMEO_CLIENT_SECRET",
            console="https://developer.vimeo.com/apps",
            scope="public private",
            authorize_url="https://api.vimeo.com/oauth/authorize",
            token_url="https://api.vimeo.com/oauth/access_token",
            basic_auth=True,
            redirect="VIMEO_REDIRECT_URI",
        ),
        App(
            "dribbble",
            LOOPBACK,
            "DRIBBBLE_CLIENT_ID",
            "DRIBBBLE_CLIENT_SECRET",
            console="https://dribbble.com/account/applications",
            scope="public",
            authorize_url="https://dribbble.com/oauth/authorize",
            token_url="https://dribbble.com/oauth/token",
            redirect="DRIBBBLE_REDIRECT_URI",
        ),
        App(
            "facebook",
            LOOPBACK,
            "FACEBOOK_CLIENT_ID",
            "FACEBOOK_CLIENT_SECRET",
            console="https://developers.facebook.com/apps",
            scope="user_likes",
            authorize_url="https://www.facebook.com/v19.0/dialog/oauth",
            token_url="https://graph.facebook.com/v19.0/oauth/access_token",
            redirect="FACEBOOK_REDIRECT_URI",
        ),
        App(
            "tumblr",
            OAUTH1,
            "TUMBLR_CONSUMER_KEY",
            "TUMBLR_CONSUMER_SECRET",
            console="https://www.tumblr.com/oauth/apps",
            request_token_url="https://www.tumblr.com/oauth/request_token",
            authorize_url="https://www.tumblr.com/oauth/authorize",
            access_token_url="https://www.tumblr.com/oauth/access_token",
        ),
        App(
            "flickr",
            OAUTH1,
            "FLICKR_API_KEY",
            "FLICKR_API_SECRET",
            console="https://www.flickr.com/services/apps/create/",
            request_token_url="https://www.flickr.com/services/oauth/request_token",
            authorize_url="https://www.flickr.com/services/oauth/authorize",
            access_token_url="https://www.flickr.com/services/oauth/access_token",
            extra=(("perms", "read"),),
        ),
        App(
            "mastodon",
            MASTODON,
            scope="read:favourites read:accounts",
            authorize_url="{instance}/oauth/authorize",
            token_url="{instance}/oauth/token",
        ),
        App("bluesky", BLUESKY),
    )
}
APP_SETTINGS = tuple(sorted({n for a in APPS.values() for n in (a.client_id, a.client_secret, a.redirect) if n}))


def github_web(api_url: str) -> str:
    """GitHub's web address for its API's (GITHUB_API_URL): github.com for api.github.com, the server itself for a
    GitHub Enterprise Server's https://HOST/api/v3."""
    parts = urlsplit(api_url.rstrip("/"))
    if parts.hostname == "api.github.com":
        return "https://github.com"
    path = parts.path[: -len("/api/v3")] if parts.path.endswith("/api/v3") else parts.path
    return f"{parts.scheme}://{parts.netloc}{path}"


def app_for(service: str, github_api_url: str = "https://api.github.com", instance: str = "") -> App:
    """The service's App with its endpoints filled in (GitHub's from GITHUB_API_URL, Mastodon's from the
    instance); KeyError for a service without one."""
    app = APPS[service]
    web = github_web(github_api_url)
    base = instance.rstrip("/")
    return replace(
        app,
        device_url=app.device_url.format(web=web),
        token_url=app.token_url.format(web=web, instance=base),
        authorize_url=app.authorize_url.format(instance=base),
    )


def missing(app: App, values: Mapping[str, str | None]) -> str:
    """The one line saying which settings an operator must set for `app`, and where the application is registered
    ("" when nothing is missing)."""
    unset = [name for name in app.settings if not (values.get(name) or "").strip()]
    if not unset:
        return ""
    return (
        f"{app.service}: set {' and '.join(unset)} (the settings file or the environment; docs/connecting.md); "
        f"register the application at {app.console}"
    )
