"""An id is an id, never a query: every command that takes an id or a name, given a query in its place (a document
with `$` keys at any depth, a regular expression, code, a DBRef — as JSON or Extended JSON), refuses it in one line
(exit 2 for an id) and changes nothing in any collection; a string holding `$` is a string; legitimate ids
(ObjectId hex, integers, strings, plain documents, Extended JSON values) still act on their network, and only on it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from bson import ObjectId, json_util
from hypothesis import given, settings
from hypothesis import strategies as st

from collector import cli
from collector.devtools.fakeapi import make_stars
from collector.ops import ids
from collector.sdk import utcnow

from helpers import TOKEN, GitHubStub, add_network, examples

QUERIES = [
    '{"$ne": null}',
    '{"$gt": ""}',
    '{"$regex": "."}',
    '{"$regex": "^a", "$options": "i"}',
    '{"$regularExpression": {"pattern": ".*", "options": ""}}',
    '{"$where": "true"}',
    '{"$in": [1, 2, 3]}',
    '{"$exists": true}',
    '{"$expr": {"$eq": [1, 1]}}',
    '{"a": {"$ne": 1}}',
    '{"s": "github", "i": {"$gt": 0}}',
    '{"a": {"b": [{"c": {"$lt": 9}}]}}',
    '[{"$ne": null}]',
    '[1, {"x": [{"$exists": true}]}]',
    '{"\\u0024ne": null}',  # "$ne" spelt as a JSON escape
    '{"$code": "function () { return true }"}',
    '{"$ref": "networks", "$id": 1}',
    '{"$minKey": 1}',
]
STRINGS = ["$ne", "a$b", '"{\\"$ne\\": null}"', "$where", '"$gt"']  # strings holding "$": ids that are text


def snapshot(db) -> dict[str, list]:
    """Every document of every collection, and the indexes: what must not change when a command refuses."""
    return {name: [list(db[name].find()), sorted(db[name].index_information())] for name in db.list_collection_names()}


@pytest.fixture
def fleet(cli_db):
    now = utcnow().replace(microsecond=0)
    docs = [
        add_network(cli_db, user="ada@x.test", disabled=True, errors=3, mode="normal", page=4),
        add_network(cli_db, _id=7, user="bob@x.test", disabled=True, errors=1, mode="normal", cursor="c"),
        add_network(cli_db, _id="abc", user="cy@x.test", disabled=True, errors=2, mode="normal"),
        add_network(cli_db, _id={"s": "github", "i": 7}, user="dee@x.test", disabled=True, errors=5, mode="normal"),
        add_network(cli_db, _id="$ne", user="eve@x.test", disabled=True, errors=1, mode="normal"),
        add_network(cli_db, user="fay@x.test", scheduledTo=now + timedelta(hours=1), mode="normal", etag="e"),
    ]
    cli_db.sinks.insert_one({"_id": "hook", "kind": "webhook", "createdAt": now})
    cli_db.control.insert_one({"_id": "pause:*:github", "mode": "*", "service": "github", "at": now})
    return docs


@pytest.mark.parametrize("query", QUERIES)
def test_parse_id_refuses_a_query_whatever_its_spelling(query):
    with pytest.raises(ids.NotAnId) as refused:
        ids.parse_id(query)
    line = str(refused.value)
    assert "is a query, not an id" in line and "\n" not in line and len(line) < 300


KEYS = st.text(alphabet="ab$._ ", min_size=1, max_size=4).filter(lambda k: not k.startswith("$"))
PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**62), 2**62), st.text(max_size=6), st.builds(ObjectId)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, min_size=1, max_size=3),
    max_leaves=10,
)
OPERATORS = st.sampled_from(["$ne", "$gt", "$regex", "$where", "$in", "$exists", "$expr", "$", "$$x"])


def hide(value, operator: str, path: list[int]):
    """`value` with `{operator: 1}` put somewhere inside it (the path's numbers pick where)."""
    if not path:
        return {operator: 1}
    if isinstance(value, list) and value:
        at = path[0] % len(value)
        return [hide(v, operator, path[1:]) if i == at else v for i, v in enumerate(value)]
    if isinstance(value, dict):
        key = sorted(value)[path[0] % len(value)]
        return {**value, key: hide(value[key], operator, path[1:])}
    return [value, {"x": {operator: 1}}]


@settings(max_examples=examples(300), deadline=None)
@given(value=PLAIN, operator=OPERATORS, path=st.lists(st.integers(0, 5), max_size=5))
def test_an_operator_hidden_anywhere_in_a_value_is_refused_and_the_plain_value_is_an_id(value, operator, path):
    text = json_util.dumps(value, json_options=ids.ID_JSON)
    if isinstance(value, (dict, list)):  # (a scalar prints in its own form: a string as it is, and so on)
        assert ids.parse_id(text) == value
    with pytest.raises(ids.NotAnId):
        ids.parse_id(json_util.dumps(hide(value, operator, path), json_options=ids.ID_JSON))


@pytest.mark.parametrize(
    "value",
    [ObjectId(), 0, -12, 2**40, "abc", "a b", "$ne", "123", "6b0eef6be1dc6017ccd542b3", {"s": "github", "i": 7}, 1.5],
)
def test_a_printed_id_reads_back_to_the_same_value_and_passes_as_plain(value):
    assert ids.parse_id(ids.format_id(value)) == value
    assert ids.equal(value) == {"$eq": value}


@pytest.mark.parametrize("value", ["@", "ann@x.test", "a@b@c"])
def test_a_string_id_holding_an_at_sign_is_printed_so_that_it_reads_back_as_an_id_not_an_email(value):
    from collector.ops.networks import key_filter

    printed = ids.format_id(value)
    assert printed.startswith('"') and key_filter(printed) == {"_id": {"$eq": value}}
    assert key_filter(value) == {"user": {"$eq": value}}  # typed bare, an address is a user's


def test_extended_json_values_are_ids_and_what_is_no_json_is_an_admin_error():
    oid = ObjectId()
    assert ids.parse_id(json.dumps({"$oid": str(oid)})) == oid
    assert ids.parse_id(json.dumps({"a": {"$oid": str(oid)}, "n": {"$numberLong": "5"}})) == {"a": oid, "n": 5}
    for broken in ('{"$oid": "zz"}', '{"$oid": {"$ne": null}}', "{", "[1,"):
        with pytest.raises(ids.AdminError) as bad:
            ids.parse_id(broken)
        assert not isinstance(bad.value, ids.NotAnId) and "is not valid JSON" in str(bad.value)
    for query in ({"$ne": 1}, [{"a": {"$gt": 0}}], {"a\x00": 1}):
        with pytest.raises(ids.NotAnId):
            ids.equal(query)


@pytest.mark.parametrize(
    "verb", [["show"], ["enable"], ["enable", "--force"], ["reset"], ["run"], ["run", "--dry-run"]]
)
def test_every_networks_command_refuses_a_query_as_an_id_and_changes_nothing(fleet, cli_db, capsys, verb):
    before = snapshot(cli_db)
    for query in QUERIES:
        assert cli.main(["networks", verb[0], query, *verb[1:]]) == 2, query
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1, (query, captured)
        assert captured.err.startswith("collector: id ") and "is a query, not an id" in captured.err
    assert snapshot(cli_db) == before


def test_a_query_among_good_ids_stops_the_whole_change_before_any_write(fleet, cli_db, capsys):
    before = snapshot(cli_db)
    for verb in ("enable", "reset"):
        assert cli.main(["networks", verb, str(fleet[0]["_id"]), '{"$ne": null}', "7"]) == 2
        assert "is a query, not an id" in capsys.readouterr().err
    assert snapshot(cli_db) == before


@pytest.mark.parametrize("text", STRINGS)
def test_a_string_holding_a_dollar_is_a_string_id(fleet, cli_db, capsys, text):
    before = snapshot(cli_db)
    code = cli.main(["networks", "show", text])
    out = capsys.readouterr().out
    if ids.parse_id(text) == "$ne":  # the one network whose id is that string
        assert code == 0 and json.loads(out)["user"] == "eve@x.test"
    else:
        assert code == 1 and out == ""
    assert snapshot(cli_db) == before


@pytest.mark.parametrize(
    "key, user",
    [
        (lambda docs: str(docs[0]["_id"]), "ada@x.test"),
        (lambda docs: json.dumps({"$oid": str(docs[0]["_id"])}), "ada@x.test"),
        (lambda docs: "7", "bob@x.test"),
        (lambda docs: '{"$numberLong": "7"}', "bob@x.test"),
        (lambda docs: "abc", "cy@x.test"),
        (lambda docs: '"abc"', "cy@x.test"),
        (lambda docs: ids.format_id({"s": "github", "i": 7}), "dee@x.test"),
        (lambda docs: '"$ne"', "eve@x.test"),
    ],
)
def test_legitimate_ids_act_on_their_network_and_only_on_it(fleet, cli_db, capsys, key, user):
    text = key(fleet)
    assert cli.main(["networks", "show", text]) == 0
    assert json.loads(capsys.readouterr().out)["user"] == user
    others = [d for d in cli_db.networks.find() if d["user"] != user]
    assert cli.main(["networks", "enable", text]) == 0
    assert capsys.readouterr().out.count("cleared") == 1
    assert cli.main(["networks", "reset", text]) == 0
    assert capsys.readouterr().out.count("-> initial") == 1
    mine = cli_db.networks.find_one({"user": user})
    assert mine["mode"] == "initial" and "disabled" not in mine and mine["errors"] == 0
    assert [d for d in cli_db.networks.find() if d["user"] != user] == others


def test_a_users_networks_are_found_by_the_email_as_text(fleet, cli_db, capsys):
    for text in ("$ne@x.test", "ada@x.test.*", "^ada@x.test", "ada@x"):
        assert cli.main(["networks", "show", text]) == 1
        assert "no network of user" in capsys.readouterr().err
    assert cli.main(["networks", "show", "ada@x.test"]) == 0


def test_list_filters_compare_their_values_as_text(fleet, cli_db, capsys):
    for flag in ("--user", "--service"):
        for value in ('{"$ne": null}', "$ne", ".*", "^github"):
            assert cli.main(["networks", "list", flag, value, "--json"]) == 0
            assert json.loads(capsys.readouterr().out) == []
    before = snapshot(cli_db)
    for kind in ('{"$ne": null}', ".*", "$exists"):
        assert cli.main(["networks", "enable", "--service", "github", "--kind", kind]) == 0
        assert capsys.readouterr().out.strip() == "no network to enable"
    assert cli.main(["networks", "enable", "--service", '{"$ne": null}']) == 0
    assert snapshot(cli_db) == before


def test_run_by_a_compound_id_runs_that_network_alone(cli_db, http_mock, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.test")
    GitHubStub(http_mock, stars=make_stars(120, seed=3), clock=utcnow())
    target = add_network(cli_db, _id={"s": "github", "i": 7}, user="dee@x.test")
    decoy = add_network(cli_db, _id={"s": "github", "i": 8}, user="zed@x.test")
    assert cli.main(["networks", "run", ids.format_id(target["_id"])]) == 0
    assert "saved: 100 new items, state saved" in capsys.readouterr().out
    assert cli_db.networks.find_one({"_id": target["_id"]})["page"] == 2
    assert cli_db.networks.find_one({"_id": decoy["_id"]}) == decoy
    assert {i["user"] for i in cli_db.items.find()} == {"dee@x.test"} and TOKEN


SINK_VERBS = [
    ["pause"],
    ["pause", "--reason", "x"],
    ["resume"],
    ["forget"],
    ["status"],
    ["status", "--json"],
    ["replay", "--since", "2026-01-01"],
]


@pytest.mark.parametrize("verb", SINK_VERBS)
def test_every_sinks_command_takes_a_name_as_text_only(fleet, cli_db, capsys, verb):
    before = snapshot(cli_db)
    for name in [*QUERIES, "~service", "$ne", ".*", "hoo.*"]:
        assert cli.main(["sinks", verb[0], name, *verb[1:]]) == 1, name
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and "no sink" in captured.err
    assert snapshot(cli_db) == before
    if verb[0] == "pause":
        assert cli.main(["sinks", "pause", "hook"]) == 0
        assert cli_db.sinks.find_one({"_id": "hook"})["paused"]["by"]


@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_a_pause_names_a_service_as_text_and_never_the_wildcard(fleet, cli_db, capsys, verb):
    before = snapshot(cli_db)
    for extra in ([], ["--mode", "initial"], ["--mode", "normal"]):
        assert cli.main([verb, "--service", "*", *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "'*' is not a service's name" in captured.err
    assert snapshot(cli_db) == before
    if verb == "pause":
        for name in ('{"$ne": null}', ".*", "$exists"):
            assert cli.main(["pause", "--service", name]) == 0
        shown = {d["_id"]: d["service"] for d in cli_db.control.find()}
        assert shown == {
            "pause:*:github": "github",
            'pause:*:{"$ne": null}': '{"$ne": null}',
            "pause:*:.*": ".*",
            "pause:*:$exists": "$exists",
        }
    else:
        assert cli.main(["resume", "--service", '{"$ne": null}']) == 1
        assert "no pause for" in capsys.readouterr().out
        assert snapshot(cli_db) == before
