"""Fixtures every test may use, the hypothesis profiles, and what the whole session shares.

Hypothesis profiles: the inner loop (`python -m pytest -m "not system"`, any -m expression containing "not system")
loads the "fast" profile, in which each property test runs a tenth of its examples (`helpers.examples(n)`); every
other run keeps hypothesis's own profile ("default", or "ci" where a CI variable is set) and the full counts. An
explicit `--hypothesis-profile NAME` always wins.
"""

from __future__ import annotations

import functools
import logging
import os

import mongomock
import pytest
import responses
from hypothesis import settings as hypothesis_settings

from collector.settings import settings_for_tests

from helpers import API, scheduling

# what the header says the whole run takes (README, CONTRIBUTING): measured with `-n auto` on two cores
SUITE_SIZE = "about 3,100 tests, about 3¼ minutes with -n auto on two cores"

# the "fast" profile: max_examples a tenth of hypothesis's usual 100, which helpers.examples(n) scales every test by
hypothesis_settings.register_profile("fast", parent=hypothesis_settings.default, max_examples=10)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: three workers a core (the cores this process may use). Most of the suite's time is spent waiting
    on real processes, servers and sockets, not computing: serially it runs at about 45% of one core, and with two
    workers a core at about two thirds of the cores. As with xdist's own rule, PYTEST_XDIST_AUTO_NUM_WORKERS wins
    when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return 3 * len(os.sched_getaffinity(0))


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (pyproject's addopts) as tests/helpers/scheduling.py keeps it: a module marked
    `xdist_group` runs on one worker whatever the pytest version, and the costliest work is sent first."""
    return scheduling.make_scheduler(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On xdist's workers, the costliest tests first (helpers.scheduling.rank)."""
    scheduling.sort_costliest_first(items)


def pytest_report_header(config):
    return [
        f"the whole suite: {SUITE_SIZE}; the system tests start real servers (an OpenSearch-compatible one, "
        "Typesense, headless Chromium) and real collector processes",
    ]


def pytest_configure(config):
    inner_loop = "not system" in " ".join((config.option.markexpr or "").split())
    if inner_loop and not config.getoption("--hypothesis-profile", None):
        hypothesis_settings.load_profile("fast")


@pytest.fixture(autouse=True, scope="session")
def connectors_discovered_once():
    """The `likeastore.connectors` entry points read once a session, not once per Collector: what is installed does
    not change while the tests run, and reading every distribution's metadata was most of a kit test's time."""
    from collector.engine import registry

    patch = pytest.MonkeyPatch()
    patch.setattr(registry, "entry_points", functools.cache(registry.entry_points))
    yield
    patch.undo()


@pytest.fixture(autouse=True, scope="session")
def test_servers_write_no_stderr():
    """An in-process test server (http.server, socketserver) prints a request's failure to sys.stderr, from its
    own thread: a handler still at work when its test ended (a client gone, a slow answer) wrote its traceback into
    whichever test this worker ran next, which then found it in its captured standard error. Logged instead."""
    import socketserver

    def handle_error(self, request, client_address):
        logging.getLogger("tests.servers").debug(
            "a test server's request from %s failed", client_address, exc_info=True
        )

    patch = pytest.MonkeyPatch()
    patch.setattr(socketserver.BaseServer, "handle_error", handle_error)
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def secret_values_of_this_test_only():
    """The process-wide set of secret values to mask, put back as it was before each test. A value a network held
    stays masked for a while after it is let go of (by design), so a fuzzed token such as "initial" would mask that
    word in the logs of whichever test runs next."""
    from collector.sdk.redaction import SECRETS

    state = SECRETS.snapshot()
    yield
    SECRETS.restore(state)


@pytest.fixture(autouse=True)
def logging_left_as_found():
    """A test that runs a process's start-up in this process (daemon/logs.py's setup_logging) leaves its handler on
    the root logger, writing to that test's captured standard error, which is closed when the test ends, and the
    root's level and what records collect changed: taken away after each test, so that no later test of this worker
    process finds "--- Logging error ---" in its own output (pytest's own capturing handlers are left to pytest)."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in ("apscheduler", "pymongo", "collector")}
    flags = {name: getattr(logging, name) for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")}
    yield
    for name, was in flags.items():
        setattr(logging, name, was)
    for handler in root.handlers[:]:
        if handler not in before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
    root.setLevel(level)
    for name, was in levels.items():
        logging.getLogger(name).setLevel(was)


@pytest.fixture
def db():
    return mongomock.MongoClient(tz_aware=True)["likeastore_test"]


@pytest.fixture
def settings():
    return settings_for_tests(github_api_url=API)


@pytest.fixture
def http_mock():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def cli_db(monkeypatch, tmp_path):
    """The database the command line connects to: mongomock, injected where the CLI makes its client."""
    from collector.engine import store

    client = mongomock.MongoClient("mongodb://localhost:27017/likeastore_test", tz_aware=True)
    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: client)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    return client.get_default_database()
