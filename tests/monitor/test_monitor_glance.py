"""The monitor at a glance, in a real headless Chromium against a real `collector monitor` on the MongoDB stand-in
(no collector runs: the page's empty tables and its search are what is looked at, and the charts are drawn from
points the test chooses through the page's own `monitorCharts`).

- every empty table says what its emptiness means, and a table with rows says nothing;
- the search finds a user by any part of the address, a service by its name, a network by its id, says how many,
  and says when it stopped at its bound; the user's text is a literal, never a pattern;
- a chart's scale follows the last two minutes: a burst before them is clipped at the top and marked, not
  flattening the rest; with little history the chart says how much instead of drawing a spike;
- every collector in the legend has a line of its colour, drawn so that one equal to another still shows."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId
from pymongo import MongoClient

from collector.devtools.mongowire import WireServer
from collector.monitor.reading import FOUND

from helpers import free_port
from helpers.browser import chromium, require, severe
from helpers.proc import start, stop, wait_until, write_env

# one worker runs this module's tests: its module-scoped fixture is set up once (--dist loadgroup)
pytestmark = [
    pytest.mark.system,
    pytest.mark.xdist_group("monitor_glance"),
]
BULK = FOUND + 12  # more networks of one kind than a search lists
LONE = ObjectId("6b1409bff748deff706137e3")  # fixed: test ids must be the same in every xdist worker
EMPTY = {
    "fleet": "no collector",
    "pauses": "no pause in force",
    "sinks": "no sink",
    "behind": "no network behind",
    "renewals": "no network waits for re-authorisation",
    "errors": "no error",
}


def up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/networks?q=x", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def monitor(tmp_path_factory):
    require()
    tmp = tmp_path_factory.mktemp("glance")
    later = datetime.now(UTC) + timedelta(days=30)  # nothing due: no network behind
    with WireServer() as wire:
        db = MongoClient(wire.uri, tz_aware=True).get_default_database()
        common = {"mode": "normal", "scheduledTo": later, "accessToken": "glance-secret-token"}
        db.networks.insert_many(
            [{"user": f"bulk{n:03d}@many.test", "service": "gist", **common} for n in range(BULK)]
            + [
                {"_id": LONE, "user": "Ada.Lovelace@engine.test", "service": "github", **common},
                {"_id": 42, "user": "bob@x.test", "service": "stackoverflow", **common},
                {"_id": "net-7", "user": "cy+tag@x.test", "service": "github", **common},
            ]
        )
        port = free_port()
        env = write_env(tmp / "monitor.env", MONGODB_URI=wire.uri, LOG_LEVEL="INFO")
        process = start(["monitor", "--port", str(port)], env, tmp / "monitor.log")
        try:
            wait_until(lambda: up(port), timeout=60)
            yield f"http://127.0.0.1:{port}/", tmp
        finally:
            assert stop(process) == 0, (tmp / "monitor.log").read_text()[-2000:]


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def text(driver, selector: str) -> str:
    return js(driver, "const e = document.querySelector(arguments[0]); return e ? e.textContent : ''", selector)


def shown(driver, selector: str) -> bool:
    return js(driver, "const e = document.querySelector(arguments[0]); return !!e && !e.hidden", selector)


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait_until(lambda: text(driver, "#stream-status") == "live", timeout=60)
    wait_until(lambda: text(driver, "#updated").startswith("updated"), timeout=60)


def search(driver, query: str) -> str:
    box = driver.find_element("css selector", "#search-q")
    box.clear()
    box.send_keys(query)
    js(driver, "document.querySelector('#search-status').textContent = ''")
    driver.find_element("css selector", "#search button").click()
    wait_until(lambda: text(driver, "#search-status") not in ("", "searching…"), timeout=60)
    return text(driver, "#search-status")


def users(driver) -> list[str]:
    return js(driver, "return [...document.querySelectorAll('#networks tbody td.user')].map(td => td.textContent)")


def test_the_monitor_says_its_address_at_info(monitor):
    _, tmp = monitor
    lines = [line for line in (tmp / "monitor.log").read_text().splitlines() if "serving on" in line]
    assert lines and all("INFO" in line and "WARNING" not in line for line in lines), lines


def test_every_empty_table_says_what_its_emptiness_means(monitor, browser):
    url, _ = monitor
    open_page(browser, url)
    wait_until(lambda: all(shown(browser, f"#{t}-none") for t in EMPTY), timeout=60)
    for table, meaning in EMPTY.items():
        assert text(browser, f"#{table}-none").startswith(meaning), table
        assert js(browser, f"return document.querySelectorAll('#{table} tbody tr').length") == 0
    wait_until(lambda: "gist" in text(browser, "#work-services"), timeout=60)
    for table in ("work-services", "work-modes"):  # rows: nothing said
        assert not shown(browser, f"#{table}-none"), table
    assert shown(browser, "#networks-none") and "address" in text(browser, "#networks-none")
    notes = js(browser, "return [...document.querySelectorAll('table')].map(t => t.id)")
    explained = js(browser, "return [...document.querySelectorAll('p.note[id$=\"-none\"]')].map(p => p.id)")
    assert {f"{t}-none" for t in notes if t not in ("nd-document",)} <= set(explained), (notes, explained)
    assert severe(browser) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("lovelace", ["Ada.Lovelace@engine.test"]),  # the middle of an address, case ignored
        ("ENGINE.TEST", ["Ada.Lovelace@engine.test"]),
        ("+tag@", ["cy+tag@x.test"]),  # the user's text is a literal: "+" repeats nothing
        ("bulk007", ["bulk007@many.test"]),
        ("stackoverflow", ["bob@x.test"]),  # a service by its name
        ("42", ["bob@x.test", "bulk042@many.test"]),  # an id (an integer) first, then addresses that hold it
        (str(LONE), ["Ada.Lovelace@engine.test"]),  # an ObjectId
        ("net-7", ["cy+tag@x.test"]),  # a string id
    ],
)
def test_search_finds_users_by_any_part_services_by_name_networks_by_id(monitor, browser, query, expected):
    url, _ = monitor
    if not js(browser, "return !!document.querySelector('#search-q')"):
        open_page(browser, url)
    status = search(browser, query)
    assert users(browser) == expected, (query, status)
    assert status == (f"{len(expected)} networks" if len(expected) > 1 else "1 network"), status
    assert not shown(browser, "#networks-none")


def test_search_says_when_it_stopped_at_its_bound_and_when_nothing_matched(monitor, browser):
    url, _ = monitor
    open_page(browser, url)
    assert search(browser, "many.test") == f"first {FOUND} of more: narrow the search"
    assert len(users(browser)) == FOUND
    assert search(browser, "gist") == f"first {FOUND} of more: narrow the search"  # a service's name
    assert search(browser, "github") == "2 networks"
    assert sorted(users(browser)) == ["Ada.Lovelace@engine.test", "cy+tag@x.test"]
    for literal in (".*", "bulk00.", "^bulk", "[a-z]+", "a|b"):  # patterns match only themselves
        assert search(browser, literal) == "0 networks", literal
        assert shown(browser, "#networks-none") and literal in text(browser, "#networks-none")
    with urllib.request.urlopen(url + "api/networks?" + urllib.parse.urlencode({"q": "bulk0"}), timeout=10) as r:
        answer = json.loads(r.read())
    assert (len(answer["networks"]), answer["more"], answer["bound"], answer["slow"]) == (FOUND, True, FOUND, False)
    assert "glance-secret-token" not in json.dumps(answer)


def points(spans: list[tuple[float, float]], collectors=("a", "b")) -> list[dict]:
    """A point a second from t=1000: each (seconds, value) span in turn, the value split evenly among `collectors`."""
    out, t = [], 1000
    for seconds, value in spans:
        for _ in range(int(seconds)):
            share = value / len(collectors)
            by = {c: {"runs": share, "errors": 0} for c in collectors}
            out.append({"t": t, "total": {"runs": value, "errors": 0}, "by": by})
            t += 1
    return out


DRAWN = """
window.monitorCharts.draw(arguments[0]);
const chart = document.querySelector(`svg.chart[data-series='${arguments[1]}']`);
const t = (sel) => chart.querySelector(sel).textContent;
return {top: t('text.ymax'), peak: t('text.peak'), young: t('text.young'),
        collecting: chart.classList.contains('collecting'),
        clipped: Number(chart.querySelector('path.clip').getAttribute('data-clipped') || 0),
        line: getComputedStyle(chart.querySelector('polyline')).visibility};
"""


@pytest.mark.parametrize(
    ("spans", "top", "peak"),
    [
        ([(60, 400), (600, 3)], "5/s", "▲ peak 400/s, clipped"),  # a start-up burst, then ten calm minutes
        ([(30, 40), (200, 0.8), (120, 1.9)], "2/s", "▲ peak 40.0/s, clipped"),
        ([(300, 7), (200, 8)], "10/s", ""),  # steady: nothing clipped
        ([(100, 2), (400, 0)], "1/s", "▲ peak 2.00/s, clipped"),  # all quiet now: the lowest scale
    ],
)
def test_a_charts_scale_follows_the_last_minutes_and_clips_an_older_burst_with_a_mark(
    browser, monitor, spans, top, peak
):
    url, _ = monitor
    open_page(browser, url)
    drawn = js(browser, DRAWN, points(spans), "runs")
    assert (drawn["top"], drawn["peak"], drawn["collecting"], drawn["young"]) == (top, peak, False, "")
    assert (drawn["clipped"] > 0) == bool(peak)
    scale = js(browser, "return window.monitorCharts.scale(arguments[0], arguments[1])", [[0, 50], [500, 3]], 600)
    assert scale == {"top": 5, "peak": 50, "clipped": True}


@pytest.mark.parametrize("seconds", [0, 1, 12, 29])
def test_a_chart_with_little_history_says_so_instead_of_a_spike(browser, monitor, seconds):
    url, _ = monitor
    open_page(browser, url)
    drawn = js(browser, DRAWN, points([(seconds + 1, 90)]), "runs")
    assert drawn["collecting"] is True and drawn["young"] == f"collecting: {seconds} s of history"
    assert drawn["line"] == "hidden"
    drawn = js(browser, DRAWN, points([(seconds + 31, 90)]), "runs")
    assert drawn["collecting"] is False and drawn["young"] == "" and drawn["line"] == "visible"


TICKS = """
window.monitorCharts.draw(arguments[0]);
const ticks = [...document.querySelectorAll("svg.chart[data-series='requests'] text.tlabel")].map(t => t.textContent);
const total = document.querySelector("svg.chart[data-series='runs'] polyline[data-instance='*']");
return [ticks, Math.min(...total.getAttribute('points').split(' ').map(p => Number(p.split(',')[0])))];
"""


@pytest.mark.parametrize(
    ("seconds", "ticks"),
    [
        (45, ["-90 s", "-60 s", "-30 s", "now"]),
        (150, ["-3 min", "-2 min", "-1 min", "now"]),
        (400, ["-9 min", "-6 min", "-3 min", "now"]),
        (800, ["-15 min", "-10 min", "-5 min", "now"]),
        (2000, ["-15 min", "-10 min", "-5 min", "now"]),
    ],
)
def test_a_young_history_fills_the_chart_rather_than_squeezing_against_its_right_edge(browser, monitor, seconds, ticks):
    url, _ = monitor
    open_page(browser, url)
    # drawn and read in one script: a snapshot of the live stream cannot come in between
    shown, left = js(browser, TICKS, points([(seconds + 1, 5)]))
    assert shown == ticks
    assert left <= 320 / 2  # the oldest point at the middle of the chart or left of it, not at its right edge


LINES = """
window.monitorCharts.draw(arguments[0]);
const out = [];
for (const li of document.querySelectorAll('#legend li[data-instance]')) {
  const id = li.getAttribute('data-instance');
  const swatch = getComputedStyle(li.querySelector('.sw')).backgroundColor;
  for (const chart of document.querySelectorAll('svg.chart')) {
    const line = chart.querySelector(`polyline[data-instance='${CSS.escape(id)}']`);
    const style = line && getComputedStyle(line);
    out.push({id, swatch, stroke: style && style.stroke, width: style ? parseFloat(style.strokeWidth) : 0,
              visible: !!style && style.visibility === 'visible' && style.display !== 'none' && style.opacity !== '0',
              order: line ? [...line.parentNode.children].indexOf(line) + (id === '*' ? -100 : 0) : null,
              series: chart.getAttribute('data-series')});
  }
}
return out;
"""


@pytest.mark.parametrize("collectors", [("box-1",), ("a", "b"), ("n1", "n2", "n3", "n4", "n5")])
def test_every_series_in_the_legend_has_a_visible_line_of_its_colour_even_under_an_equal_one(
    browser, monitor, collectors
):
    url, _ = monitor
    open_page(browser, url)
    lines = js(browser, LINES, points([(120, 3)], collectors))  # every collector equal; errors flat at zero
    assert {line["id"] for line in lines} == {"*", *collectors}
    for line in lines:
        assert line["visible"] and line["width"] > 0, line
        assert line["stroke"] == line["swatch"], line  # the legend's colour is the line's
    for series in ("runs", "errors"):
        drawn = sorted((line for line in lines if line["series"] == series), key=lambda line: line["order"])
        widths = [line["width"] for line in drawn]  # bottom first: the total, then each collector, thinner
        assert all(a > b for a, b in zip(widths[:4], widths[1:4], strict=False)), (series, widths)
    colours = {line["stroke"] for line in lines if line["series"] == "runs"}
    assert len(colours) == len(collectors) + 1  # no two alike, the total's neither
