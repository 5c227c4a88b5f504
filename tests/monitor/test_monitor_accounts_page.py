"""The monitor's account actions in a real headless Chromium, against a real `collector monitor` on the MongoDB
stand-in and a real authorisation server (Authlib's classes, tests/helpers/authserver.py) standing in for GitHub:
a network removed from its row (a second click confirms), and an unauthorised network renewed through a device
flow whose code the page shows (the test enters it at the server, as the person would) and whose outcome the page
then says. No secret reaches the page or the monitor's log. Last, the browser half of the PKCE flow: the page's
link opens the service's page in a new tab, Allow sends that tab back to the monitor's own /connect/callback, and
the page says the network was added (a monitor in this process: the service's endpoints are the test's)."""

from __future__ import annotations

import asyncio
import threading

import pytest
import requests
from pymongo import MongoClient

from collector.connect.apps import LOOPBACK, App
from collector.devtools.mongowire import WireServer
from collector.monitor.app import Monitor as InProcess
from collector.settings import load_settings

from helpers import free_port
from helpers.authserver import AuthServer, serving
from helpers.browser import chromium, require, severe
from helpers.proc import get, start, stop, wait_until, write_env

pytestmark = pytest.mark.system
TOKEN = "accounts-page-token-0123456789"
ANN, BO = "ann@example.com", "bo@example.com"


class Monitor:
    def __init__(self, tmp, wire, auth):
        self.port = free_port()
        env = write_env(
            tmp / "monitor.env",
            MONGODB_URI=wire.uri,
            GITHUB_API_URL=auth.url,
            GITHUB_CLIENT_ID="public-app",
            MONITOR_TOKEN=TOKEN,
            LOG_LEVEL="INFO",
        )
        self.log = tmp / "monitor.log"
        self.process = start(["monitor", "--port", str(self.port)], env, self.log)
        self.url = f"http://127.0.0.1:{self.port}/"
        wait_until(lambda: get(self.port, "/healthz")[0] == 200, timeout=60)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    require()
    tmp = tmp_path_factory.mktemp("accounts")
    auth = AuthServer()
    auth.add_client("public-app", redirect="http://127.0.0.1/connect/callback")
    auth.store.interval = 1
    with WireServer() as wire, serving(auth):
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        monitor = Monitor(tmp, wire, auth)
        monitor.wire = wire
        try:
            yield monitor, db, auth
        finally:
            assert stop(monitor.process) == 0, monitor.log.read_text()[-2000:]


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def text(driver, selector: str) -> str:
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : ''", selector
    )


def enabled(driver, selector: str):
    """The element, once it is shown and enabled (None before)."""
    found = driver.find_elements("css selector", selector)
    return found[0] if found and found[0].is_displayed() and found[0].is_enabled() else None


def open_with_token(driver, monitor, user: str) -> None:
    driver.get(monitor.url)
    wait_until(lambda: text(driver, "#stream-status") == "live", timeout=60)
    wait_until(lambda: enabled(driver, "#token"), timeout=60).send_keys(TOKEN)
    driver.find_element("css selector", "#search-q").send_keys(user)
    driver.find_element("css selector", "#search button").click()
    wait_until(lambda: len(driver.find_elements("css selector", "#networks tbody tr[data-network]")) == 1, timeout=60)


def test_a_network_is_removed_from_its_row_after_a_second_click(world, browser):
    monitor, db, _ = world
    network_id = db.networks.insert_one({"user": BO, "service": "gist", "accessToken": "bo-secret-token-1"}).inserted_id
    open_with_token(browser, monitor, BO)
    row = f'#networks tbody tr[data-network="{network_id}"]'
    wait_until(lambda: enabled(browser, f'{row} [data-action="remove"]'), timeout=60).click()
    wait_until(lambda: text(browser, f'{row} [data-action="remove"]') == "confirm remove", timeout=60)
    assert db.networks.count_documents({"_id": network_id}) == 1  # one click removes nothing
    wait_until(lambda: enabled(browser, f'{row} [data-action="remove"]'), timeout=60).click()
    wait_until(
        lambda: text(browser, "#action-result").startswith(f"removed network {network_id} gist {BO}"), timeout=60
    )
    assert db.networks.count_documents({"_id": network_id}) == 0
    wait_until(lambda: not browser.find_elements("css selector", row), timeout=60)  # the search shown again
    assert browser.execute_script("return window.__violations") == [] and severe(browser) == []


def test_an_unauthorised_network_is_renewed_through_a_device_code_the_page_shows(world, browser):
    monitor, db, auth = world
    old = {"user": ANN, "service": "github", "accessToken": "ann-revoked-token-1", "accountId": "1", "page": 4}
    network_id = db.networks.insert_one({**old, "unauthorized": True, "mode": "initial"}).inserted_id
    open_with_token(browser, monitor, ANN)
    row = f'#networks tbody tr[data-network="{network_id}"]'
    wait_until(lambda: enabled(browser, f'{row} [data-action="renew"]'), timeout=60).click()
    code = wait_until(lambda: text(browser, "#connect-code"), timeout=60)
    link = browser.find_element("css selector", "#connect-link")
    assert link.get_attribute("href") == f"{auth.url}/device" and link.text == f"{auth.url}/device"
    assert "waiting" in text(browser, "#connect-outcome")
    (device,) = auth.store.devices.values()
    assert device["user_code"] == code
    requests.post(f"{auth.url}/device", data={"user_code": code, "decision": "allow"}, timeout=10)  # the person
    wait_until(lambda: text(browser, "#connect-outcome").startswith(f"done: network {network_id} renewed"), timeout=60)
    network = db.networks.find_one({"_id": network_id})
    assert "unauthorized" not in network and network["page"] == 4 and network["accessToken"] in auth.store.tokens
    assert text(browser, "#connect-code") == ""  # the code is gone once the flow ended
    secrets = [network["accessToken"], device["device_code"], *(t.refresh_token for t in auth.store.tokens.values())]
    page, logged = browser.page_source, monitor.log.read_text()
    assert "monitor: connect github for ann@example.com by monitor (127.0.0.1): network" in logged
    assert not [s for s in secrets if s and (s in page or s in logged)]
    assert browser.execute_script("return window.__violations") == [] and severe(browser) == []


class Served:
    """`Monitor` on a real socket, on an event loop of its own thread, its GitHub application the test's PKCE one."""

    def __init__(self, wire, auth):
        client = MongoClient(wire.uri, tz_aware=True)
        settings = load_settings(
            environ={"GITHUB_API_URL": auth.url, "GITHUB_CLIENT_ID": "public-app"}, env="test", read_dotenv=False
        )
        self.monitor = InProcess(client.get_default_database(), token=TOKEN, settings=settings, connect_timeout=60)
        self.monitor.connections.apps = lambda service, api: App(  # gist: the account may be ann's github already
            "gist", LOOPBACK, "GITHUB_CLIENT_ID", authorize_url=f"{auth.url}/authorize", token_url=f"{auth.url}/token"
        )
        self.bound = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self.main(),), daemon=True)

    async def main(self) -> None:
        self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()
        await self.monitor.run("127.0.0.1", 0, self.stop, self.ready)

    def ready(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/"
        self.bound.set()

    def __enter__(self) -> Served:
        self.thread.start()
        assert self.bound.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


def test_the_browser_flow_comes_back_to_the_monitor_and_the_page_says_the_network_was_added(world, browser):
    monitor, db, auth = world
    with Served(monitor.wire, auth) as served:
        browser.get(served.url)
        wait_until(lambda: text(browser, "#stream-status") == "live", timeout=60)
        wait_until(lambda: enabled(browser, "#token"), timeout=60).send_keys(TOKEN)
        wait_until(lambda: browser.execute_script("return document.querySelector('#connect-service').value"), 60)
        browser.execute_script("document.querySelector('#connect-service').value = 'gist'")
        browser.find_element("css selector", "#connect-user").send_keys("cy@example.com")
        page = browser.current_window_handle
        wait_until(lambda: enabled(browser, '#connect [data-action="connect"]'), timeout=60).click()
        wait_until(lambda: text(browser, "#connect-link") == "open the service’s page", timeout=60)
        assert browser.find_element("css selector", "#connect-link").get_attribute("href").startswith(auth.url)
        browser.find_element("css selector", "#connect-link").click()  # a new tab: the service's page
        wait_until(lambda: len(browser.window_handles) == 2, timeout=60)
        browser.switch_to.window(next(h for h in browser.window_handles if h != page))
        try:
            wait_until(lambda: enabled(browser, "#allow"), timeout=60).click()
            wait_until(lambda: "the monitor has the answer" in text(browser, "body"), timeout=60)
            assert browser.current_url.startswith(served.url + "connect/callback?")
        finally:
            browser.close()
            browser.switch_to.window(page)
        wait_until(lambda: text(browser, "#connect-outcome").startswith("done: network "), timeout=60)
        done = text(browser, "#connect-outcome")
        network = db.networks.find_one({"user": "cy@example.com", "service": "gist"})
        assert f"network {network['_id']} added" in done and network["accessToken"] in auth.store.tokens
        assert network["accessToken"] not in browser.page_source
        assert browser.execute_script("return window.__violations") == []
        assert [m for m in severe(browser) if not m.startswith(auth.url)] == []  # the service's page has no favicon
