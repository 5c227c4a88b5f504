"""Connectors are found through the likeastore.connectors entry-point group; the connector tutorial's example
(docs/connectors/tutorial.md) really works."""

from __future__ import annotations

import re
import sys
import types
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from collector import run_once
from collector.engine import registry as registry_module
from collector.engine.registry import GROUP, Registry
from collector.sdk.errors import UnknownService
from connectors.github import GitHubConnector

from helpers import T0, add_network, network

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "connectors" / "tutorial.md"


def readme_example_module() -> types.ModuleType:
    """The tutorial's connector module (its first python block), as an importable module."""
    code = re.search(r"```python[^\n]*\n(.*?)```", TUTORIAL.read_text(), re.S).group(1)
    module = types.ModuleType("readme_example")
    exec(compile(code, str(TUTORIAL), "exec"), module.__dict__)
    return module


@pytest.fixture
def third_party(monkeypatch):
    """Install the tutorial's example as a third-party package would: a module plus an entry point."""
    module = readme_example_module()
    monkeypatch.setitem(sys.modules, "readme_example", module)
    point = EntryPoint(name="example", value="readme_example:ExampleConnector", group=GROUP)
    real = registry_module.entry_points

    def entry_points(group):
        return list(real(group=group)) + [point]

    monkeypatch.setattr(registry_module, "entry_points", entry_points)
    return module


def test_builtin_github_is_found_through_its_entry_point():
    registry = Registry()
    assert "github" in registry.names()
    assert registry.get("github") is GitHubConnector
    assert registry.is_builtin("github")


def test_readme_connector_registered_by_entry_point_collects(db, settings, http_mock, third_party):
    http_mock.get(
        "https://api.example.test/me/likes?page=1",
        json={"likes": [{"id": 7, "url": "https://example.test/7", "title": "Seven"}]},
    )
    http_mock.get("https://api.example.test/me/likes?page=2", json={"likes": []})
    registry = Registry()
    assert "example" in registry.names() and not registry.is_builtin("example")
    doc = add_network(db, service="example", accessToken="example-token-123")
    for _ in range(2):
        run_once(db, "initial", settings, now=T0, registry=registry)
    assert network(db, doc)["mode"] == "normal"
    item = db.items.find_one({"type": "example"})
    assert (item["itemId"], item["source"], item["title"]) == ("7", "https://example.test/7", "Seven")


def test_readme_connector_garbage_body_is_a_clear_error(db, settings, http_mock, third_party):
    http_mock.get("https://api.example.test/me/likes?page=1", json=["not", "an", "object"])
    doc = add_network(db, service="example", accessToken="example-token-123")
    run_once(db, "initial", settings, now=T0, registry=Registry())
    assert "expected {'likes'" in network(db, doc)["lastError"]["message"]


def test_unknown_service_is_a_clear_error():
    with pytest.raises(UnknownService, match="unknown service 'orkut'"):
        Registry().get("orkut")


def test_a_plugin_that_fails_to_import_is_an_error_on_its_networks(db, settings, monkeypatch):
    point = EntryPoint(name="broken", value="no_such_module_anywhere:Connector", group=GROUP)
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [point])
    doc = add_network(db, service="broken")
    report = run_once(db, "initial", settings, now=T0, registry=Registry())
    assert report.tasks == 1
    message = network(db, doc)["lastError"]["message"]
    assert "connector 'broken' failed to load" in message and "ModuleNotFoundError" in message


def test_a_plugin_that_is_not_a_connector_is_rejected(monkeypatch):
    point = EntryPoint(name="odd", value="json:dumps", group=GROUP)
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [point])
    with pytest.raises(UnknownService, match="not a Connector subclass"):
        Registry().get("odd")
