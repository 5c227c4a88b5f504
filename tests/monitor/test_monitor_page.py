"""The monitor's page in a real headless Chromium, against real processes: an initial and a normal collector and
`collector monitor`, on the MongoDB stand-in and the fake GitHub API. The page goes live without a reload, its
charts fill, hostile text stays text, actions need the token and then pause the fleet, and an outage of the
database is said and recovered from. The last test measures that no text is cut at three widths and leaves
screenshots of each in build/screenshots/ of the checkout (or the folder SCREENSHOTS names; SCREENSHOT_TO copies the
one at 1280 px, for the docs)."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pymongo import MongoClient

from collector.devtools.demofleet import keep_starring, seed, users
from collector.devtools.fakeapi import FakeGitHub, FakeServer
from collector.devtools.mongowire import WireServer

from helpers import free_port
from helpers.browser import chromium, require, severe
from helpers.proc import get, start, stop, wait_until, write_env

# one worker runs this module's tests: its module-scoped fixture is set up once (--dist loadgroup)
pytestmark = [
    pytest.mark.system,
    pytest.mark.xdist_group("monitor_page"),
]
TOKEN = "browser-test-token-0123456789"
SCRIPTED = '<img src=x onerror="window.pwned=1">'
HOSTILE_USER = SCRIPTED + "@evil.test"
HOSTILE_SERVICE = "<script>window.pwned=2</script>"
HOSTILE_MESSAGE = '</td><svg onload="window.pwned=3"><b>bold</b>'
FAILING_REASON = 'refused: 302: redirect not followed: POST hooks.example/in <img src=y onerror="window.pwned=4">'


class Fleet:
    def __init__(self, tmp, wire, api, fake, db):
        self.tmp, self.wire, self.api, self.fake, self.db = tmp, wire, api, fake, db
        self.port = free_port()
        common = {
            "MONGODB_URI": wire.uri,
            "GITHUB_API_URL": api,
            "HEARTBEAT_SECONDS": 1,
            "LOOP_IDLE_PAUSE": 1,
            "NORMAL_INTERVAL": 1,
            "INITIAL_INTERVAL": 0,
            "MONITOR_TOKEN": TOKEN,
            "LOG_LEVEL": "INFO",
        }
        env = write_env(tmp / "fleet.env", **common)
        self.processes = [
            start(["--mode", "initial", "--instance-id", "box-initial"], env, tmp / "initial.log"),
            start(["--mode", "normal", "--instance-id", "box-normal"], env, tmp / "normal.log"),
            start(["monitor", "--port", str(self.port)], env, tmp / "monitor.log"),
        ]
        self.url = f"http://127.0.0.1:{self.port}/"
        wait_until(lambda: get(self.port, "/healthz")[0], timeout=60)  # the page is opened once the monitor serves


def serving(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    require()
    tmp = tmp_path_factory.mktemp("fleet")
    fake = FakeGitHub(latency=0.05)
    stop_starring = threading.Event()
    with WireServer() as wire, FakeServer(fake) as api:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        people = users(8)
        seed(db, fake, people)
        db.networks.insert_one(
            {
                "user": HOSTILE_USER,
                "service": "github",
                "accessToken": "hostile-secret-token-1",
                "mode": "normal",
                "errors": 2,
                "scheduledTo": datetime(2026, 1, 1, tzinfo=UTC),
                "disabled": True,
                "lastError": {"kind": "<i>kind</i>", "message": HOSTILE_MESSAGE, "at": datetime.now(UTC)},
            }
        )
        db.networks.insert_one({"user": "mallory@evil.test", "service": HOSTILE_SERVICE, "accessToken": "x" * 20})
        now = datetime.now(UTC)
        db.sinks.insert_one(  # a sink whose every delivery is refused, as the sink service records it
            {
                "_id": "hooks",
                "kind": "webhook",
                "stats": {"backlog": 3, "lagSeconds": 12.5},
                "counts": {"delivered": 4, "deadLettered": 1},
                "failing": {"since": now - timedelta(minutes=10), "at": now, "reason": FAILING_REASON},
            }
        )
        threading.Thread(target=keep_starring, args=(fake, [p[0] for p in people], stop_starring), daemon=True).start()
        running = Fleet(tmp, wire, api, fake, db)
        try:
            wait_until(lambda: serving(running.url), timeout=60)  # a page opened before would fail to load
            yield running
        finally:
            stop_starring.set()
            codes = [stop(p) for p in running.processes]
            assert codes == [0, 0, 0], [
                (tmp / f).read_text()[-2000:] for f in ("initial.log", "normal.log", "monitor.log")
            ]


@pytest.fixture(scope="module")
def shared_browser():
    with chromium() as driver:
        yield driver


@pytest.fixture
def browser(shared_browser):
    """The module's one browser, its console read empty first: what a test finds there is its own page's, not what
    a test before it (one that failed before reading it) left."""
    severe(shared_browser)
    return shared_browser


def text(driver, selector: str) -> str:
    return (
        driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null", selector
        )
        or ""
    )


def count(driver, selector: str) -> int:
    return driver.execute_script("return document.querySelectorAll(arguments[0]).length", selector)


def points(driver, series: str) -> int:
    return int(
        driver.execute_script(
            "const l = document.querySelector(`svg.chart[data-series='${arguments[0]}'] polyline[data-instance='*']`);"
            "return l ? Number(l.getAttribute('data-points') || 0) : 0",
            series,
        )
    )


def rate(driver, name: str) -> float:
    """An aggregated rate as the page shows it ("5.96/s")."""
    shown = re.match(r"[\d.]+", text(driver, f'#rates [data-rate="{name}"]'))
    return float(shown.group()) if shown else 0.0


def open_page(driver, fleet) -> None:
    driver.get(fleet.url)
    driver.execute_script("window.notReloaded = true")
    wait_until(lambda: text(driver, "#stream-status") == "live", timeout=60)


def test_the_fleet_and_its_rates_appear_and_change_without_a_reload(fleet, browser):
    open_page(browser, fleet)
    rows = '#fleet tbody tr[data-instance="{}"]'
    wait_until(
        lambda: count(browser, rows.format("box-initial")) and count(browser, rows.format("box-normal")), timeout=60
    )
    uptime = text(browser, rows.format("box-normal") + " .uptime")
    wait_until(lambda: rate(browser, "runs") > 0, timeout=60)
    wait_until(lambda: text(browser, rows.format("box-normal") + " .uptime") != uptime, timeout=60)
    first = points(browser, "runs")
    wait_until(lambda: points(browser, "runs") >= first + 3, timeout=60)
    assert count(browser, "svg.chart[data-series='runs'] polyline[data-instance='box-normal']") == 1
    assert points(browser, "requests") > 0
    assert "normal" in text(browser, rows.format("box-normal") + " .mode")
    assert count(browser, '#work-modes tbody tr[data-mode="normal"]') == 1
    assert browser.execute_script("return window.notReloaded") is True
    assert browser.execute_script("return window.__violations") == []
    assert severe(browser) == []


def test_hostile_text_is_shown_literally_and_runs_nothing(fleet, browser):
    open_page(browser, fleet)
    wait_until(lambda: HOSTILE_MESSAGE in text(browser, "#errors"), timeout=60)
    assert HOSTILE_USER in text(browser, "#errors") and "<i>kind</i>" in text(browser, "#errors")
    wait_until(lambda: HOSTILE_SERVICE in text(browser, "#work-services"), timeout=60)
    browser.find_element("css selector", "#search-q").send_keys(HOSTILE_USER)
    browser.find_element("css selector", "#search button, #search [type=submit]").click()
    wait_until(lambda: count(browser, "#networks tbody tr[data-network]") == 1, timeout=60)
    browser.find_element("css selector", "#networks tbody tr[data-network]").click()
    wait_until(lambda: HOSTILE_MESSAGE in text(browser, "#network-detail"), timeout=60)
    detail = text(browser, "#network-detail")
    assert "hostile-secret-token-1" not in detail and "***" in detail
    assert browser.execute_script("return window.pwned") is None
    assert count(browser, "#errors img, #errors svg, #errors script, #errors b, #network-detail img") == 0
    assert browser.execute_script("return window.__violations") == []
    assert severe(browser) == []


def test_a_failing_sink_shows_since_when_and_why_as_text(fleet, browser):
    open_page(browser, fleet)
    row = "#sinks tbody tr"
    wait_until(lambda: "hooks" in text(browser, row), timeout=60)
    shown = text(browser, row)
    assert "FAILING" in shown and FAILING_REASON in shown  # the reason literally, never as markup
    assert count(browser, "#sinks img, #sinks script") == 0 and browser.execute_script("return window.pwned") is None
    assert browser.execute_script("return document.querySelector('#sinks-none').hidden") is True
    assert severe(browser) == []


def click(driver, selector: str) -> None:
    """Click once the button can be clicked: the page enables its actions only after its first snapshot, which may
    come after the stream says live (a click on a disabled button does nothing)."""
    element = wait_until(lambda: (e := driver.find_element("css selector", selector)).is_enabled() and e, timeout=60)
    element.click()


def acted(driver, selector: str) -> str:
    """Click an action as a person does: the last result cleared, the button clicked, the page's answer waited for; an
    action whose request failed (a loaded machine's connection cut) is clicked again, as a person would. What the
    page says of it."""
    for _ in range(3):
        driver.execute_script("document.querySelector('#action-result').textContent = ''")
        click(driver, selector)
        said = wait_until(lambda: text(driver, "#action-result"), timeout=60)
        if not said.startswith("request failed"):
            return said
    raise AssertionError(f"the action {selector!r} failed three times: {said}")


def searched(driver, query: str) -> str:
    """Search as a person does: the box cleared, the words typed, the button clicked, the answer waited for; a
    search whose request failed (a loaded machine's connection cut) is asked again, as a person would. What the
    page says of it."""
    for _ in range(3):
        box = driver.find_element("css selector", "#search-q")
        box.clear()
        box.send_keys(query)
        driver.execute_script("document.querySelector('#search-status').textContent = ''")
        click(driver, "#search button, #search [type=submit]")
        said = wait_until(lambda: (t := text(driver, "#search-status")) not in ("", "searching…") and t, timeout=60)
        if not said.startswith("search failed"):
            return said
    raise AssertionError(f"the search for {query!r} failed three times: {said}")


def test_actions_are_refused_without_the_token_and_with_it_pause_the_collectors(fleet, browser):
    open_page(browser, fleet)
    click(browser, '[data-action="pause"]')
    wait_until(lambda: "refused" in text(browser, "#action-result"), timeout=60)
    assert fleet.db.control.count_documents({}) == 0
    browser.find_element("css selector", "#token").send_keys(TOKEN)
    browser.find_element("css selector", "#act-reason").send_keys("browser test")
    click(browser, '[data-action="pause"]')
    wait_until(
        lambda: text(browser, "#action-result").startswith("paused mode every mode, service every service"),
        timeout=60,
    )
    pause = fleet.db.control.find_one({"_id": "pause:*:*"})
    assert pause["reason"] == "browser test" and pause["by"] == "monitor (127.0.0.1)"
    # within a few heartbeats no collector claims, and what ran was saved
    wait_until(lambda: fleet.db.networks.count_documents({"leaseOwner": {"$exists": True}}) == 0, timeout=60)
    before = fleet.fake.requests
    time.sleep(3)
    assert fleet.fake.requests == before
    wait_until(lambda: "browser test" in text(browser, "#pauses"), timeout=60)
    click(browser, '[data-action="resume"]')
    wait_until(lambda: text(browser, "#action-result").startswith("resumed"), timeout=60)
    wait_until(lambda: fleet.fake.requests > before + 4, timeout=60)
    assert fleet.db.control.count_documents({}) == 0
    # a network found by its user, enabled from its row: the same change as `collector networks enable`
    searched(browser, HOSTILE_USER)
    wait_until(lambda: count(browser, "#networks tbody tr[data-network]") == 1, timeout=60)
    said = acted(browser, '#networks tbody tr[data-network] [data-action="enable"]')
    assert "cleared disabled" in said, said
    assert fleet.db.networks.find_one({"user": HOSTILE_USER}).get("disabled") is None
    refused = [m for m in severe(browser) if "403" not in m]
    assert refused == [] and browser.execute_script("return window.__violations") == []


def test_the_page_says_when_the_monitor_loses_the_database_and_recovers(fleet, browser):
    open_page(browser, fleet)
    wait_until(lambda: text(browser, "#db-status") == "database: ok", timeout=60)
    wait_until(lambda: count(browser, "#fleet tbody tr[data-instance]") >= 2, timeout=60)  # figures shown first
    fleet.wire.stop()
    try:
        wait_until(lambda: "unreachable" in text(browser, "#db-status"), timeout=60)
        assert browser.execute_script("return document.querySelector('#db-status').classList.contains('bad')")
        assert count(browser, "#fleet tbody tr[data-instance]") >= 2  # the last figures stay
    finally:
        fleet.wire.start()
    wait_until(lambda: text(browser, "#db-status") == "database: ok", timeout=60)
    first = points(browser, "runs")
    wait_until(lambda: points(browser, "runs") > first, timeout=60)
    wait_until(lambda: rate(browser, "runs") > 0, timeout=90)
    assert browser.execute_script("return window.notReloaded") is True


# Every piece of text the page holds in a box of its own, measured: a placeholder wider than its input, a label,
# header, button, caption or note whose text is wider than its box (cut, or hidden by an ellipsis), and anything
# wider than the window (the page would scroll sideways; a table scrolls inside its own box, which is fine).
CUT = """
const cut = [];
const ruler = document.createElement('canvas').getContext('2d');
const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
  + ' "' + (e.placeholder || e.textContent).trim().slice(0, 40) + '"';
for (const e of document.querySelectorAll('input[placeholder]')) {
  if (!e.offsetParent) continue;
  const s = getComputedStyle(e);
  ruler.font = s.font;
  const room = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
  if (ruler.measureText(e.placeholder).width > room + 0.5) cut.push('placeholder of ' + name(e));
}
const boxes = 'label, th, button, select, h1, h2, h3, figcaption span, .pill, .legend li, .legend .name, '
  + 'p.note, #search-status, dt, .kinds';
for (const e of document.querySelectorAll(boxes)) {
  if (!e.offsetParent) continue;
  if (e.scrollWidth > e.clientWidth + 1) cut.push('text of ' + name(e));
}
const wide = document.documentElement.scrollWidth;
if (wide > window.innerWidth + 1) cut.push('the page is ' + wide + ' px wide in a ' + window.innerWidth + ' px window');
return cut;
"""
WIDTHS = (1920, 1280, 390)  # two common screens and a phone
SHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"  # the checkout's, git-ignored (docs/monitor.md)


def test_nothing_is_cut_at_common_widths_and_on_a_phone(fleet, browser, tmp_path):
    """Screenshots of the whole page at each width go to build/screenshots/ of the checkout (SCREENSHOTS names another
    folder), for a person to look at: monitor-1920.png, monitor-1280.png, monitor-390.png."""
    folder = Path(os.environ.get("SCREENSHOTS") or SHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    open_page(browser, fleet)
    wait_until(lambda: count(browser, "#fleet tbody tr[data-instance]") >= 2, timeout=60)
    wait_until(lambda: count(browser, "svg.chart.collecting") == 0, timeout=90)  # lines to look at
    browser.find_element("css selector", "#search-q").send_keys("demo.likeastore")
    click(browser, "#search button")
    wait_until(lambda: "network" in text(browser, "#search-status"), timeout=60)
    cut = {}
    try:
        for width in WIDTHS:
            browser.set_window_size(width, 1000)
            height = browser.execute_script("return document.documentElement.scrollHeight")
            browser.set_window_size(width, height + 40)
            shot = tmp_path / f"monitor-{width}.png"  # taken whole, then renamed into place: never half a picture
            assert browser.save_screenshot(str(shot))
            shutil.copyfile(shot, part := folder / f".{shot.name}.{os.getpid()}.part")
            part.replace(folder / shot.name)
            cut[width] = browser.execute_script(CUT)
    finally:
        browser.set_window_size(1400, 1800)
    if os.environ.get("SCREENSHOT_TO"):  # the docs' picture: the page at 1280 px
        shutil.copyfile(folder / "monitor-1280.png", os.environ["SCREENSHOT_TO"])
    assert cut == {width: [] for width in WIDTHS}
    assert severe(browser) == []
