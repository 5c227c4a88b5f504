"""The HTTP session connectors share: timeouts, a User-Agent, connection retries, typed transport errors.

Error messages name the host and path only: a query string may carry credentials for some services.
"""
from __future__ import annotations

import logging
from urllib.parse import urlsplit
from urllib.request import getproxies

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from .errors import Transient
from .settings import Settings

# These libraries log OAuth clients (keys and token secrets included) or whole request lines with their query
# strings (Stack Exchange's app key) at DEBUG: never let that through.
for _name in ("requests_oauthlib", "oauthlib", "urllib3.connectionpool"):
    logging.getLogger(_name).setLevel(logging.INFO)


def make_session(user_agent: str, pool_size: int = 32) -> requests.Session:
    session = requests.Session()
    # Retry only failures to connect, quickly; status codes are the executor's business (backoff, rateLimit).
    retry = Retry(total=2, connect=2, read=0, status=0, other=0, redirect=5,
                  backoff_factor=0.2, allowed_methods=frozenset({"GET"}),
                  raise_on_status=False, respect_retry_after_header=False)
    adapter = HTTPAdapter(max_retries=retry, pool_connections=pool_size, pool_maxsize=pool_size)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    session.headers["User-Agent"] = user_agent
    # requests re-reads proxy variables (and ~/.netrc) from the environment on every request, which costs
    # about as much CPU as the request itself; do it only where proxies are configured.
    session.trust_env = bool(getproxies())
    return session


def where(url: str) -> str:
    """host/path of a URL, without the query or credentials: safe to log."""
    parts = urlsplit(url)
    return f"{parts.hostname or ''}{parts.path}"


class Http:
    def __init__(self, settings: Settings, session: requests.Session | None = None):
        self.timeout = settings.http_timeout or None
        self.session = session or make_session(settings.user_agent)

    def get(self, url: str, *, params=None, headers=None, auth=None) -> requests.Response:
        return self.request("GET", url, params=params, headers=headers, auth=auth)

    def post(self, url: str, *, data=None, headers=None, auth=None) -> requests.Response:
        return self.request("POST", url, data=data, headers=headers, auth=auth)

    def request(self, method: str, url: str, **kwargs) -> requests.Response:
        try:
            return self.session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.Timeout:
            raise Transient(f"timed out after {self.timeout:g}s: {method} {where(url)}") from None
        except requests.ConnectionError:
            raise Transient(f"connection failed: {method} {where(url)}") from None
        except requests.RequestException as exc:
            raise Transient(f"request failed ({type(exc).__name__}): {method} {where(url)}") from None

    def close(self) -> None:
        self.session.close()
