"""`collector networks add`: credentials from standard input or a file (never the command line), checked with the
service's one identity call, written in the likeastore schema due now; a second network of the user and service,
or of the account under another user, refused unless --replace; a replace keeps the walk and clears
`unauthorized`. Through cli.main on mongomock (the `cli_db` fixture), the service through `responses`."""

from __future__ import annotations

import io
import json
import logging
import sys
from datetime import timedelta

import pytest

from collector import cli, run_once
from collector.engine.store import Store
from collector.ops import accounts
from collector.sdk import utcnow
from collector.settings import settings_for_tests

from helpers import T0

ME = "https://api.github.com/user"
TOKEN = "ghp_NEWtoken_SECRET_0123456789"
OTHER = "ghp_OTHERtoken_SECRET_987654"
OCTOCAT = {"login": "octocat", "id": 583231, "name": "The Octocat"}


@pytest.fixture
def stdin(monkeypatch):
    def give(data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))

    return give


def add(*extra: str, user="ann@x.test", service="github") -> int:
    return cli.main(["networks", "add", "--user", user, "--service", service, *extra])


def test_a_token_on_standard_input_becomes_a_network_due_now(cli_db, http_mock, stdin, capsys):
    http_mock.get(ME, json=OCTOCAT)
    stdin(f"\n  {TOKEN}  \n\n")
    before = utcnow()
    assert add() == 0
    out, err = capsys.readouterr()
    doc = cli_db.networks.find_one()
    assert out.startswith(f"added network {doc['_id']}: github account octocat for ann@x.test, due now")
    assert TOKEN not in out + err and len(http_mock.calls) == 1
    assert http_mock.calls[0].request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert {k: doc[k] for k in ("user", "service", "accessToken", "accountId", "accountName", "mode", "errors")} == {
        "user": "ann@x.test",
        "service": "github",
        "accessToken": TOKEN,
        "accountId": "583231",
        "accountName": "octocat",
        "mode": "initial",
        "errors": 0,
    }
    assert before - timedelta(seconds=1) <= doc["scheduledTo"] <= utcnow()
    assert Store(cli_db).count_due("initial", utcnow()) == 1


def test_the_fields_a_service_takes_come_as_name_value_lines_json_or_a_file(
    cli_db, http_mock, stdin, tmp_path, monkeypatch
):
    monkeypatch.setenv("ALLOW_PRIVATE_HOSTS", "true")  # no name resolution of the instance in the sandbox
    http_mock.get(
        "https://mastodon.example/api/v1/accounts/verify_credentials",
        json={"id": "14715", "username": "trwnh", "acct": "trwnh", "display_name": "infinite love"},
    )
    http_mock.get("https://www.googleapis.com/youtube/v3/channels", json={"items": [{"id": "UC1", "snippet": {}}]})
    http_mock.get("https://oauth.reddit.com/api/v1/me", json={"id": "1w72", "name": "spez"})
    stdin(f"# ann's mastodon\ninstanceUrl = https://mastodon.example\n{TOKEN}\n")
    assert add(service="mastodon") == 0
    stdin(json.dumps({"accessToken": TOKEN, "refreshToken": "1//refresh_SECRET_abc"}))
    assert add(service="youtube") == 0
    path = tmp_path / "reddit.token"
    path.write_text(f"accessToken={TOKEN}\nrefreshToken=reddit_refresh_SECRET\n")
    assert add("--from-file", str(path), service="reddit") == 0
    docs = {d["service"]: d for d in cli_db.networks.find()}
    assert docs["mastodon"]["instanceUrl"] == "https://mastodon.example"
    assert docs["mastodon"]["accountId"] == "14715@mastodon.example"
    assert docs["youtube"]["refreshToken"] == "1//refresh_SECRET_abc" and docs["youtube"]["accountId"] == "UC1"
    assert docs["reddit"]["username"] == "spez" and docs["reddit"]["refreshToken"] == "reddit_refresh_SECRET"


def test_a_second_network_of_the_user_and_service_is_refused_naming_the_first(cli_db, http_mock, stdin, capsys):
    http_mock.get(ME, json=OCTOCAT)
    stdin(TOKEN)
    assert add() == 0
    first = cli_db.networks.find_one()
    capsys.readouterr()
    stdin(OTHER)
    assert add() == 1
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        f"collector: ann@x.test has a github network already: {first['_id']} (--replace gives it these credentials)"
    ]
    assert cli_db.networks.count_documents({}) == 1 and cli_db.networks.find_one()["accessToken"] == TOKEN
    assert OTHER not in out + err


def test_the_same_account_under_another_user_is_refused_unless_replace(cli_db, http_mock, stdin, capsys):
    http_mock.get(ME, json=OCTOCAT)
    stdin(TOKEN)
    assert add() == 0
    first = cli_db.networks.find_one()
    stdin(OTHER)
    assert add(user="bob@x.test") == 1
    assert f"connected under another user already: {first['_id']}" in capsys.readouterr().err
    stdin(OTHER)
    assert add("--replace", user="bob@x.test") == 0
    out = capsys.readouterr().out
    assert f"also connected under another user: {first['_id']}" in out
    assert cli_db.networks.find_one({"_id": first["_id"]}) == first  # ann's is untouched
    assert cli_db.networks.count_documents({"user": "bob@x.test"}) == 1


def walked(db, **fields):
    doc = {
        "user": "ann@x.test",
        "service": "github",
        "accessToken": "ghp_OLD_SECRET_token_1",
        "refreshToken": "old_refresh_SECRET",
        "accessTokenExpiresAt": T0,
        "accountId": "583231",
        "mode": "normal",
        "page": 7,
        "sinceLikedAt": T0,
        "etag": '"abc"',
        "unauthorized": True,
        "disabled": True,
        "errors": 1,
        "lastError": {"kind": "unauthorized", "message": "401 Bad credentials", "at": T0},
        "scheduledTo": T0,
        **fields,
    }
    doc["_id"] = db.networks.insert_one(doc).inserted_id
    return doc


def test_a_replace_keeps_the_walk_and_clears_unauthorized(cli_db, http_mock, stdin, capsys):
    old = walked(cli_db)
    http_mock.get(ME, json=OCTOCAT)
    stdin(TOKEN)
    assert add("--replace") == 0
    assert capsys.readouterr().out.startswith(f"gave network {old['_id']} its new credentials: github account")
    doc = cli_db.networks.find_one({"_id": old["_id"]})
    assert doc["accessToken"] == TOKEN and doc["mode"] == "normal" and doc["page"] == 7 and doc["etag"] == '"abc"'
    for gone in ("unauthorized", "disabled", "lastError", "refreshToken", "accessTokenExpiresAt"):
        assert gone not in doc, gone
    assert doc["errors"] == 0 and doc["scheduledTo"] > T0


def test_a_replace_keeps_an_error_that_is_not_the_tokens(db, http_mock):
    old = walked(db, unauthorized=None, errors=3, lastError={"kind": "transient", "message": "503"})
    http_mock.get(ME, json=OCTOCAT)
    now = utcnow()
    accounts.add_network(
        db, user="ann@x.test", service="github", credentials={"accessToken": TOKEN}, replace=True, now=now,
        settings=settings_for_tests(),
    )  # fmt: skip
    doc = db.networks.find_one({"_id": old["_id"]})
    assert doc["errors"] == 3 and doc["lastError"]["kind"] == "transient"


def test_a_replace_with_another_accounts_token_starts_the_walk_again(db, http_mock):
    old = walked(db)
    http_mock.get(ME, json={"login": "hubot", "id": 1})
    added = accounts.add_network(
        db, user="ann@x.test", service="github", credentials={"accessToken": TOKEN}, replace=True, now=T0,
        settings=settings_for_tests(),
    )  # fmt: skip
    doc = db.networks.find_one({"_id": old["_id"]})
    assert added.replaced and "another account than before" in added.note
    assert doc["mode"] == "initial" and doc["accountId"] == "1" and doc["accountName"] == "hubot"
    assert not {"page", "sinceLikedAt", "etag"} & set(doc)


@pytest.mark.parametrize("lease_in, refused", [(timedelta(minutes=5), True), (timedelta(minutes=-5), False)])
def test_a_replace_waits_for_a_collector_that_runs_the_network(db, http_mock, lease_in, refused):
    old = walked(db, leaseOwner="box-1", leaseUntil=T0 + lease_in)
    http_mock.get(ME, json=OCTOCAT)
    kwargs = {"user": "ann@x.test", "service": "github", "credentials": {"accessToken": TOKEN}, "replace": True}
    if refused:
        with pytest.raises(accounts.NetworkInFlight, match="being run by box-1: nothing changed"):
            accounts.add_network(db, **kwargs, now=T0, settings=settings_for_tests())
        assert db.networks.find_one({"_id": old["_id"]}) == old
    else:
        assert accounts.add_network(db, **kwargs, now=T0, settings=settings_for_tests()).replaced


def test_a_refused_token_writes_nothing_and_is_never_shown_or_logged(cli_db, http_mock, stdin, capsys, caplog):
    http_mock.get(ME, json={"message": f"Bad credentials {TOKEN}"}, status=401)
    stdin(TOKEN)
    with caplog.at_level(logging.DEBUG):
        assert add() == 1
    out, err = capsys.readouterr()
    said = [line for line in err.splitlines() if line.startswith("collector:")]  # (other tests' log handlers aside)
    assert len(said) == 1 and said[0].startswith("collector: github refused the token (401 Bad credentials ***")
    assert TOKEN not in out + err + caplog.text and cli_db.networks.count_documents({}) == 0


@pytest.mark.parametrize(
    "given, said",
    [
        (b"", "github needs accessToken"),
        (b"\n\n  \n", "github needs accessToken"),
        (b"ghp_abc def", "accessToken must be one word of visible ASCII"),
        (b"ghp_\x1b[2Jabc", "accessToken must be one word of visible ASCII"),
        (b"\xff\xfe\x00token", "standard input is not UTF-8 text"),
        (b"x" * (64 * 1024 + 1), "standard input holds more than 64 KiB"),
        (b"a" * 9000, "accessToken must be at most 8192 characters"),
        (b"first_token\nsecond_token", "more than one bare line"),
        (b'{"accessToken": 123}', "accessToken must be a string"),
        (b'{"accessToken": "t", "password": "p"}', "github takes accessToken; not password"),
        (b"[1, 2]", "accessToken must be one word"),
        (b'{"accessToken": ', "is not a JSON object"),
    ],
)
def test_hostile_input_is_one_line_and_no_request(cli_db, http_mock, stdin, capsys, given, said):
    stdin(given)
    assert add() == 1
    out, err = capsys.readouterr()
    assert said in err and len(err.strip().splitlines()) == 1 and not out
    assert len(http_mock.calls) == 0 and cli_db.networks.count_documents({}) == 0


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--service", "friendfeed"], "unknown service 'friendfeed'"),
        (["--user", "not-an-email"], "--user must be the person's email"),
        (["--user", "ann @x.test"], "--user must be the person's email"),
        (["--from-file", "/nonexistent/token"], "cannot read file /nonexistent/token: No such file or directory"),
    ],
)
def test_a_bad_service_user_or_file_is_one_line(cli_db, http_mock, stdin, capsys, argv, said):
    stdin(TOKEN)
    base = {"--user": "ann@x.test", "--service": "github"}
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        base[flag] = value
    assert cli.main(["networks", "add", *(x for kv in base.items() for x in kv)]) == 1
    assert said in capsys.readouterr().err and len(http_mock.calls) == 0


def test_a_service_whose_app_key_is_missing_says_which_setting(cli_db, http_mock, stdin, capsys):
    stdin(f"{TOKEN}\naccessTokenSecret=flickr_secret_SECRET")
    assert add(service="flickr") == 1
    assert "setting FLICKR_API_KEY is not set" in capsys.readouterr().err and len(http_mock.calls) == 0


def test_the_command_line_takes_no_token(capsys):
    with pytest.raises(SystemExit):
        cli.main(["networks", "add", "--user", "ann@x.test", "--service", "github", "--token", TOKEN])
    assert "unrecognized arguments" in capsys.readouterr().err


def test_an_added_network_is_collected_by_the_next_pass(db, http_mock):
    settings = settings_for_tests(github_api_url="https://api.github.test")
    http_mock.get("https://api.github.test/user", json=OCTOCAT)
    star = {"starred_at": "2026-05-01T10:00:00Z", "repo": {"id": 1, "full_name": "o/r", "html_url": "https://x/o/r"}}
    http_mock.get("https://api.github.test/user/starred", json=[star])
    accounts.add_network(
        db, user="ann@x.test", service="github", credentials={"accessToken": TOKEN}, now=T0, settings=settings
    )
    report = run_once(db, "initial", settings, now=T0 + timedelta(seconds=1))
    assert report.by_status == {"ok": 1} and db.items.count_documents({"user": "ann@x.test"}) == 1


def test_a_network_whose_user_is_not_the_email_itself_is_nobodys(db, http_mock):
    """MongoDB's equality matches an array by its elements: a network of `user: ["ann@x.test"]` neither blocks
    Ann's network nor is replaced by it."""
    odd = db.networks.insert_one({"user": ["ann@x.test"], "service": "github", "accessToken": "x"}).inserted_id
    http_mock.get(ME, json=OCTOCAT)
    added = accounts.add_network(
        db, user="ann@x.test", service="github", credentials={"accessToken": TOKEN}, replace=True, now=T0,
        settings=settings_for_tests(),
    )  # fmt: skip
    assert not added.replaced and added.network_id != odd
    assert db.networks.find_one({"_id": odd})["accessToken"] == "x"


def test_an_account_name_with_terminal_controls_is_printed_escaped(cli_db, http_mock, stdin, capsys):
    http_mock.get(ME, json={"id": 9, "login": "\x1b]0;owned\x07\x1b[2Jeve"})
    stdin(TOKEN)
    assert add() == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "eve" in out


@pytest.mark.parametrize(
    "instance, said",
    [
        ("http://mastodon.example", "must be an https URL"),
        ("mastodon.example", "must be an https URL"),
        ("https://user:pw@mastodon.example", "plain https://host URL"),
        ("https://127.0.0.1", "non-public"),
    ],
)
def test_an_instance_that_is_not_a_public_https_address_is_refused_before_any_request(
    cli_db, http_mock, stdin, capsys, instance, said
):
    stdin(f"{TOKEN}\ninstanceUrl={instance}\n")
    assert add(service="mastodon") == 1
    assert said in capsys.readouterr().err and len(http_mock.calls) == 0
