"""sinks/docs.py: a stored item as a destination receives it — JSON-ready, its id as text, no bookkeeping — and
a huge or hostile item refused with a reason, never a crash (named test_as_doc: tests/test_docs.py holds the
docs' own tests)."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from bson import Decimal128, ObjectId
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from collector.engine.store import item_key
from collector.sinks.docs import MAX_BYTES, MAX_DEPTH, DocRefused, as_doc

from helpers import examples


def test_an_item_becomes_json_ready_without_its_id_and_marker():
    oid = item_key("ann@example.com", "github", "1")
    other = ObjectId()
    item = {
        "_id": oid,
        "sinkPending": True,
        "title": "a",
        "date": datetime(2026, 6, 1, 12, 0, 0, 123456, tzinfo=UTC),
        "naive": datetime(2026, 6, 1, 12, 0),
        "local": datetime(2026, 6, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))),
        "day": date(2026, 6, 1),
        "ref": other,
        "raw": b"\x00\xff",
        "price": Decimal128("1.50"),
        "nan": math.nan,
        "nested": {"_id": other, "tags": ("x", "y"), "at": [datetime(2026, 1, 1, tzinfo=UTC)]},
        "userData": {"name": "Ann"},
        "big": 2**62,
    }
    doc = as_doc(item)
    assert doc.id == str(oid) and len(doc.id) == 24
    assert "_id" not in doc.body and "sinkPending" not in doc.body
    assert doc.body["date"] == "2026-06-01T12:00:00.123Z"
    assert doc.body["naive"] == doc.body["local"] == "2026-06-01T12:00:00.000Z"
    assert doc.body["day"] == "2026-06-01"
    assert doc.body["ref"] == str(other) and doc.body["raw"] == "00ff" and doc.body["price"] == "1.50"
    assert doc.body["nan"] is None
    assert doc.body["nested"] == {"_id": str(other), "tags": ["x", "y"], "at": ["2026-01-01T00:00:00.000Z"]}
    json.dumps(doc.body, allow_nan=False)  # strict JSON
    assert item["_id"] == oid and item["sinkPending"] is True  # the item itself is left as it was


def test_ids_other_than_object_ids_are_text_and_a_missing_or_odd_one_is_refused():
    assert as_doc({"_id": "abc", "x": 1}).id == "abc"
    assert as_doc({"_id": 42}).id == "42"
    assert as_doc({"_id": b"\x01\x02"}).id == "0102"
    for bad in ({"x": 1}, {"_id": {"a": 1}}, {"_id": ""}, {"_id": "x" * 5000}, {"_id": None}):
        with pytest.raises(DocRefused):
            as_doc(bad)


def test_a_huge_item_is_refused_not_sent():
    with pytest.raises(DocRefused, match="larger than"):
        as_doc({"_id": 1, "text": "x" * (MAX_BYTES + 1)})
    with pytest.raises(DocRefused, match="larger than"):
        as_doc({"_id": 1, "many": {f"k{i}": i for i in range(MAX_BYTES // 8)}})
    with pytest.raises(DocRefused, match="larger than"):
        as_doc({"_id": 1, "raw": b"\x00" * (MAX_BYTES + 1)})
    as_doc({"_id": 1, "text": "x" * (MAX_BYTES // 2)})  # large but within the bound


def test_a_deep_or_cyclic_item_is_refused_not_a_recursion_error():
    deep: dict = {"_id": 1}
    inner = deep
    for _ in range(MAX_DEPTH + 5):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(DocRefused, match="deeper"):
        as_doc(deep)
    cyclic: dict = {"_id": 1}
    cyclic["self"] = cyclic
    with pytest.raises(DocRefused):
        as_doc(cyclic)
    endless: list = []
    endless.append(endless)
    with pytest.raises(DocRefused):
        as_doc({"_id": 1, "list": endless})


def test_a_value_without_text_or_an_enormous_integer_is_handled():
    class Broken:
        def __str__(self):
            raise RuntimeError("no")

    with pytest.raises(DocRefused, match="no text"):
        as_doc({"_id": 1, "x": Broken()})
    with pytest.raises(DocRefused):
        as_doc({"_id": 1, "x": 10**5000})  # its text is longer than Python writes
    assert as_doc({"_id": 1, "x": 10**30}).body["x"] == str(10**30)


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=50),
    st.binary(max_size=20),
    st.datetimes(timezones=st.just(UTC)),
    st.builds(ObjectId),
)
values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
)


@hypothesis_settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(st.text(max_size=10), values, max_size=8), st.one_of(st.builds(ObjectId), st.text()))
def test_any_item_gives_strict_json_or_a_refusal(fields, oid):
    item = {**fields, "_id": oid}
    try:
        doc = as_doc(item)
    except DocRefused as exc:
        assert str(exc)
        return
    text = json.dumps({"id": doc.id, "body": doc.body}, allow_nan=False)
    assert json.loads(text)["id"] == doc.id
    assert "_id" not in doc.body and "sinkPending" not in doc.body
