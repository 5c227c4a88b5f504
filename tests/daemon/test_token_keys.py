"""The keys that seal tokens at rest: TOKEN_KEY, TOKEN_KEY_FILE (first line the key, further lines old keys),
TOKEN_KEYS_OLD. A bad one stops the program with one line naming the setting, never the key; the keys are masked
in --check-config and hidden from the logs."""

from __future__ import annotations

import base64
import json

import pytest

from collector import cli
from collector.engine.store.sealing import Keys
from collector.settings import SettingsError, load_settings


def key(seed: int, urlsafe: bool = True, padded: bool = True) -> str:
    raw = bytes((seed + k * 7) % 256 for k in range(32))
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    return text if padded else text.rstrip("=")


K1, K2, K3 = key(1), key(2, urlsafe=False), key(3, padded=False)


def load(tmp_path, **environ):
    return load_settings(environ=environ, cwd=tmp_path, read_dotenv=False)


@pytest.mark.parametrize("text", [K1, K2, K3, key(250, urlsafe=False, padded=False), f"  {K1}  "])
def test_a_key_is_32_bytes_in_either_base64_alphabet_padded_or_not(tmp_path, text):
    settings = load(tmp_path, TOKEN_KEY=text)
    assert settings.token_key == text.strip()
    assert Keys.from_settings(settings).current is not None


@pytest.mark.parametrize(
    "bad",
    ["short", "A" * 42, "A" * 45, K1[:-2] + "!!", base64.b64encode(b"x" * 31).decode(), "Zm9v" * 11, K1 + "," + K2],
)
def test_a_bad_key_stops_with_one_line_naming_the_setting_never_the_key(tmp_path, bad):
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, TOKEN_KEY=bad)
    text = str(caught.value)
    assert text.startswith("setting TOKEN_KEY: ") and "\n" not in text and "32 random bytes" in text
    assert bad not in text and (len(bad) < 8 or bad[:8] not in text)


def test_old_keys_are_a_list_and_a_bad_one_is_named_by_its_place(tmp_path):
    settings = load(tmp_path, TOKEN_KEY=K1, TOKEN_KEYS_OLD=f"{K2}, {K3}\n{K2}")
    assert settings.token_keys_old == f"{K2},{K3}"
    keys = Keys.from_settings(settings)
    assert len(keys.old) == 2 and keys.current is not None and keys.current.kid not in {k.kid for k in keys.old}
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, TOKEN_KEYS_OLD=f"{K2},nope-not-a-key")
    assert str(caught.value).startswith("setting TOKEN_KEYS_OLD: ") and "key 2 must be" in str(caught.value)
    assert K2 not in str(caught.value)


def test_the_key_file_gives_the_key_and_the_old_ones(tmp_path):
    path = tmp_path / "token.key"
    path.write_text(f"# the collector's token key\n\n{K1}\n  {K2}  \n# an old one\n{K3}\n")
    settings = load(tmp_path, TOKEN_KEY_FILE=str(path), TOKEN_KEYS_OLD=key(9))
    assert settings.token_key == K1 and settings.token_keys_old == f"{K2},{K3},{key(9)}"
    assert {K1, K2, K3, key(9)} <= set(settings.secrets())  # the file's keys are hidden from the logs too
    assert len(Keys.from_settings(settings).old) == 3


@pytest.mark.parametrize(
    "content, words",
    [
        ("", "holds no key"),
        ("# only a comment\n\n", "holds no key"),
        (f"{K1}\nnot-a-key\n", "line 2 of"),
        (b"\xff\xfe" + K1.encode(), "not UTF-8"),
        ("\n".join(key(k) for k in range(40)), "more than 32 keys"),
    ],
)
def test_a_key_file_that_cannot_be_used_is_one_line_naming_it(tmp_path, content, words):
    path = tmp_path / "token.key"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, TOKEN_KEY_FILE=str(path))
    text = str(caught.value)
    assert text.startswith("setting TOKEN_KEY_FILE: ") and words in text and "\n" not in text
    assert K1 not in text


def test_a_key_file_missing_or_not_a_file_or_beside_token_key_is_refused(tmp_path):
    for path, words in ((tmp_path / "absent", "cannot read"), (tmp_path, "cannot read")):
        with pytest.raises(SettingsError) as caught:
            load(tmp_path, TOKEN_KEY_FILE=str(path))
        assert str(caught.value).startswith("setting TOKEN_KEY_FILE: ") and words in str(caught.value)
    (tmp_path / "k").write_text(K1)
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, TOKEN_KEY_FILE=str(tmp_path / "k"), TOKEN_KEY=K2)
    assert "not both" in str(caught.value) and K2 not in str(caught.value)


def test_check_config_masks_the_keys_and_shows_the_file_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "token.key").write_text(f"{K1}\n{K2}\n")
    monkeypatch.setenv("TOKEN_KEY_FILE", str(tmp_path / "token.key"))
    monkeypatch.setenv("TOKEN_KEYS_OLD", K3)
    assert cli.main(["--check-config"]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)
    assert shown["TOKEN_KEY"] == shown["TOKEN_KEYS_OLD"] == "***"
    assert shown["TOKEN_KEY_FILE"] == str(tmp_path / "token.key")
    assert not any(k in out or k.rstrip("=") in out for k in (K1, K2, K3))


def test_check_config_stops_on_a_bad_key_with_status_2_and_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    secret = "c2VjcmV0LWJ1dC10b28tc2hvcnQtZm9yLWEta2V5"
    monkeypatch.setenv("TOKEN_KEY", secret)
    assert cli.main(["--check-config"]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line]
    assert len(lines) == 1 and "TOKEN_KEY" in lines[0]
    assert secret not in captured.err + captured.out


def test_no_key_is_the_default(tmp_path):
    settings = load(tmp_path)
    assert (settings.token_key, settings.token_key_file, settings.token_keys_old) == ("", "", "")
    assert not Keys.from_settings(settings)
