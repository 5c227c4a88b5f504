"""A connector's `entry_shape` (msgspec decoding of only the fields `map` reads) is an optimisation only: for any
page, the items, the skipped count and the page's refusal are those the whole-JSON path gives."""

from __future__ import annotations

import json

import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.sdk import Job
from collector.sdk.connector import loads
from collector.sdk.errors import BadResponse
from collector.settings import settings_for_tests
from connectors.github import GitHubConnector

from helpers import T0, examples

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.just("2026-05-01T10:00:00Z"),
    st.just("not a date"),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
owners = st.one_of(
    values,
    st.fixed_dictionaries({}, optional={"login": values, "html_url": values, "avatar_url": values, "id": values}),
)
repos = st.one_of(
    values,
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.one_of(st.integers(min_value=1, max_value=10**6), values),
            "html_url": st.one_of(st.just("https://github.com/o/r"), values),
            "full_name": st.one_of(st.just("o/r"), values),
            "name": values,
            "description": values,
            "created_at": values,
            "owner": owners,
            "extra": values,
        },
    ),
)
entries = st.one_of(values, st.fixed_dictionaries({}, optional={"starred_at": values, "repo": repos, "other": values}))


def outcome(connector: GitHubConnector, decoded) -> tuple:
    connector.skipped, connector.skip_reason = 0, None
    try:
        items = connector.map_entries(decoded, connector.map)
    except BadResponse as error:
        return ("refused", error.message)
    return ("items", items, connector.skipped)


def response_of(body: bytes) -> requests.Response:
    response = requests.Response()
    response.status_code, response._content, response.url = 200, body, "https://api.github.test/user/starred"
    return response


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(entries, max_size=6))
def test_a_page_decoded_to_the_entry_shape_maps_exactly_as_the_whole_json(page):
    body = json.dumps(page).encode()
    connector = GitHubConnector(settings_for_tests(), http=None)  # type: ignore[arg-type]
    job = Job(network={"accessToken": "t"}, mode="initial", now=T0)
    shaped, _ = connector.parse_entries(job, response_of(body))
    assert outcome(connector, shaped) == outcome(connector, loads(body))


def test_an_entry_only_the_standard_library_reads_is_skipped_alone_not_the_page():
    good = {
        "starred_at": "2026-05-01T10:00:00Z",
        "repo": {"id": 1, "html_url": "https://github.com/o/r", "full_name": "o/r"},
    }
    body = ("[" + json.dumps(good) + ', {"starred_at": "\\ud800", "repo": {"id": 2, "html_url": 3}}]').encode()
    connector = GitHubConnector(settings_for_tests(), http=None)  # type: ignore[arg-type]
    job = Job(network={"accessToken": "t"}, mode="initial", now=T0)
    data, _ = connector.parse_entries(job, response_of(body))
    items = connector.map_entries(data, connector.map)
    assert [item["itemId"] for item in items] == ["1"] and connector.skipped == 1


def test_a_usual_page_is_decoded_to_the_fields_map_reads_only():
    from collector.devtools.fakeapi import make_stars

    page = make_stars(3)
    body = json.dumps(page).encode()
    connector = GitHubConnector(settings_for_tests(), http=None)  # type: ignore[arg-type]
    job = Job(network={"accessToken": "t"}, mode="initial", now=T0)
    shaped, _ = connector.parse_entries(job, response_of(body))
    assert set(shaped[0]["repo"]) == {"id", "html_url", "full_name", "name", "description", "created_at", "owner"}
    assert set(shaped[0]["repo"]["owner"]) == {"login", "html_url", "avatar_url"}  # of GitHub's ~18 owner fields
    assert outcome(connector, shaped) == outcome(connector, loads(body))
