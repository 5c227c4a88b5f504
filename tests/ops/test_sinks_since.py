"""`collector sinks replay NAME --since DATE`: any text is a UTC datetime or argparse's usage error (exit 2, one
`error:` line, the text clipped and escaped), never a traceback — a zone that moves a date out of the calendar in
UTC (0001-01-01T00:00+01:00, 9999-12-31T23:30-01:00), garbage, huge years, control characters."""

from __future__ import annotations

import argparse
import io
from datetime import UTC, datetime, timedelta

import mongomock
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector import cli
from collector.cli.sinks import since_arg
from collector.engine import store

from helpers import examples

FAST = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EDGES = ["0001-01-01T00:00+01:00", "9999-12-31T23:30-01:00", "0001-01-01T00:00:00+23:59:59.999999", "99999-01-01"]
YEARS = st.sampled_from([1, 2, 1969, 1970, 2026, 9998, 9999]) | st.integers(min_value=1, max_value=9999)
OFFSETS = st.integers(min_value=-(24 * 3600 - 1), max_value=24 * 3600 - 1)


def iso_offset(seconds: int) -> str:
    sign, seconds = ("-" if seconds < 0 else "+"), abs(seconds)
    return f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@st.composite
def zoned(draw) -> str:
    """An ISO 8601 date and time with a UTC offset, at or near the edges of the calendar."""
    year, month = draw(YEARS), draw(st.sampled_from([1, 2, 12]))
    day = draw(st.sampled_from([1, 28] if month == 2 else [1, 31]))
    hour, minute = draw(st.sampled_from([0, 23])), draw(st.sampled_from([0, 30, 59]))
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}{iso_offset(draw(OFFSETS))}"


def usage_error_or_utc(text: str) -> None:
    try:
        at = since_arg(text)
    except argparse.ArgumentTypeError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    assert at.tzinfo is UTC


@pytest.mark.parametrize("text", EDGES)
def test_the_calendar_edges_are_usage_errors_or_dates(text):
    usage_error_or_utc(text)


def test_a_zone_moving_a_date_out_of_the_calendar_says_so():
    for text in ("0001-01-01T00:00+01:00", "9999-12-31T23:30-01:00"):
        with pytest.raises(argparse.ArgumentTypeError, match="out of the years 1 to 9999"):
            since_arg(text)
    assert since_arg("0001-01-01T00:30-00:15") == datetime(1, 1, 1, 0, 45, tzinfo=UTC)
    assert since_arg("9999-12-31T23:30+01:00") == datetime(9999, 12, 31, 22, 30, tzinfo=UTC)


@FAST
@given(zoned())
def test_any_zoned_date_is_a_utc_date_or_a_usage_error(text):
    usage_error_or_utc(text)


@FAST
@given(st.text(max_size=60) | st.from_regex(r"\d{1,6}-\d\d-\d\d(T\d\d:\d\d([+-]\d\d:\d\d)?)?", fullmatch=True))
def test_any_text_is_a_utc_date_or_a_usage_error(text):
    usage_error_or_utc(text)


@pytest.mark.parametrize("text", [*EDGES[:2], "x" * 5000, "\x1b[2J2026-01-01", "2026-02-30", "+10000-01-01"])
def test_the_command_says_one_usage_line_and_exits_2(monkeypatch, tmp_path, text):
    client = mongomock.MongoClient("mongodb://localhost:27017/likeastore_test", tz_aware=True)
    monkeypatch.setattr(store, "MongoClient", lambda uri, **options: client)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTOR_ENV", "test")
    monkeypatch.setenv("SINKS", "search")
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    with pytest.raises(SystemExit) as exit:
        cli.main(["sinks", "replay", "search", "--since", text])
    errors = [line for line in err.getvalue().splitlines() if "error:" in line]
    assert exit.value.code == 2 and out.getvalue() == ""
    assert len(errors) == 1 and "invalid date" in errors[0] and len(errors[0]) < 300, err.getvalue()
    assert "Traceback" not in err.getvalue() and "\x1b" not in err.getvalue()
    assert not client.get_default_database().sinks.find_one({"_id": "search"})


def test_a_date_years_ahead_is_in_the_future_not_a_crash():
    assert since_arg("9999-12-31T23:59:59") - datetime.now(UTC) > timedelta(days=365 * 7000)
