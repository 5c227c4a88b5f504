"""A real headless Chromium for the monitor's page: Debian's `chromium` driven through its `chromedriver` by
Selenium (no browser download: Selenium Manager is never asked). Where the browser is missing the tests skip,
unless REQUIRE_CHROMIUM is set (.ci/run sets it and installs both): there a missing browser fails."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
# recorded before any script of the page runs: every CSP violation, and every script the page was made to run
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
    e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def binaries() -> tuple[str, str] | None:
    browser = next((path for name in CHROMIUM if (path := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def require() -> tuple[str, str]:
    found = binaries()
    if found is None:
        if os.environ.get("REQUIRE_CHROMIUM"):
            raise AssertionError("chromium and chromedriver are required here (Debian: chromium chromium-driver)")
        pytest.skip("no chromium/chromedriver (apt-get install chromium chromium-driver); .ci/run requires them")
    return found


@contextmanager
def chromium(width: int = 1400, height: int = 1800) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = require()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # chromedriver's profile and chromium's singleton socket go to TMPDIR, and chromium leaves the socket's folder
    # behind (org.chromium.Chromium.*): a temporary folder of their own, removed once the browser has quit
    with tempfile.TemporaryDirectory(prefix="chromium-", ignore_cleanup_errors=True) as own:
        service = Service(executable_path=driver_path, env={**os.environ, "TMPDIR": own})
        driver = webdriver.Chrome(service=service, options=options)
        try:
            driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
            yield driver
        finally:
            driver.quit()


def severe(driver: Any) -> list[str]:
    """The browser's console errors (a script error, a refused resource, a CSP report)."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
