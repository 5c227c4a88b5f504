"""The browser half of the loopback flows, in a real headless Chromium (tests/helpers/browser.py): the flow opens
the authorisation page, the person clicks Allow (or Deny), the server redirects to the flow's one-shot listener on
127.0.0.1, which answers with its page and hands the code back; the flow exchanges it (PKCE) or the verifier
(OAuth 1.0a) with the server. Authlib's server classes answer (tests/helpers/authserver.py)."""

from __future__ import annotations

import threading

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from collector.connect.apps import LOOPBACK, App
from collector.connect.errors import DENIED, ConnectError
from collector.connect.flows import Flow, Options, run_flow

from helpers.authserver import oauth1_app
from helpers.browser import chromium

pytestmark = pytest.mark.system


class BrowserPerson:
    """Opens the address in Chromium and clicks `button`; what the browser ended on is kept."""

    def __init__(self, driver, button: str = "allow"):
        self.driver, self.button, self.lines = driver, button, []
        self.ended: list[str] = []
        self.errors: list[BaseException] = []

    def say(self, line: str) -> None:
        self.lines.append(line)

    def browse(self, url: str) -> bool:
        self.thread = threading.Thread(target=self._click, args=(url,), daemon=True)
        self.thread.start()
        return True

    def done(self) -> None:
        """Wait for the browser's half to end (its last page read) before the browser is closed."""
        self.thread.join(60)

    def _click(self, url: str) -> None:
        try:
            self.driver.get(url)
            self.driver.find_element(By.ID, self.button).click()
            WebDriverWait(self.driver, 20).until(lambda d: "127.0.0.1" in d.current_url and "callback" in d.current_url)
            WebDriverWait(self.driver, 20).until(lambda d: d.find_element(By.TAG_NAME, "body").text)
            self.ended.append(self.driver.find_element(By.TAG_NAME, "body").text)
        except BaseException as exc:  # said by the test, not lost in the thread
            self.errors.append(exc)

    def read_line(self, timeout: float) -> str:  # pragma: no cover (the browser way reads nothing)
        raise AssertionError("the browser way reads nothing")

    def read_secret(self, label: str, timeout: float) -> str:  # pragma: no cover
        raise AssertionError("no secret asked")


def pkce_app(url: str) -> App:
    return App("twitter", LOOPBACK, "ID", authorize_url=f"{url}/authorize", token_url=f"{url}/token")


def test_the_pkce_loopback_flow_in_chromium(server, http):
    with chromium() as driver:
        person = BrowserPerson(driver)
        credentials = run_flow(pkce_app(server.url), {"ID": "public-app"}, Flow(http, person, Options(timeout=60)))
        person.done()
    assert not person.errors, person.errors
    assert credentials["accessToken"] in server.store.tokens and credentials["refreshToken"]
    assert "return to the terminal" in person.ended[0] and "code=" not in person.ended[0]
    assert not any(credentials["accessToken"] in line for line in person.lines)


def test_a_denial_in_chromium_comes_back_as_denied(server, http):
    with chromium() as driver:
        person = BrowserPerson(driver, button="deny")
        with pytest.raises(ConnectError) as caught:
            run_flow(pkce_app(server.url), {"ID": "public-app"}, Flow(http, person, Options(timeout=60)))
        person.done()
    assert caught.value.kind == DENIED and server.store.tokens == {}


def test_the_oauth1_flow_in_chromium(server, http):
    values = {"KEY": "consumer-key", "SECRET": "consumer-secret-value"}
    with chromium() as driver:
        person = BrowserPerson(driver)
        credentials = run_flow(oauth1_app(server.url, "tumblr"), values, Flow(http, person, Options(timeout=60)))
        person.done()
    assert not person.errors, person.errors
    assert server.store.oauth1_tokens[credentials["accessToken"]] == credentials["accessTokenSecret"]
