"""``specrag users logout NAME --keys`` and ``users add NAME --keys``: a reset that also
revokes the user's API keys, through the real CLI entry point and users file."""

import json

import pytest

from specrag.cli.main import main
from specrag.security import api_keys
from specrag.security import users as users_mod
from specrag.security.users import add_user, load_directory


@pytest.fixture
def users_file(tmp_path, monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)
    monkeypatch.setenv("SPECRAG_PASSWORD", "new-pw-123456")
    path = tmp_path / "users.yaml"
    add_user(path, "bob", "editor", "bob-pw-12345")
    add_user(path, "carol", "viewer", "carol-pw-1234")
    return path


def _cli(tmp_path, users_file, *args) -> int:
    return main(["--data-dir", str(tmp_path / "data"), "users", *args, "--file", str(users_file)])


def _works(users_file, key) -> bool:
    return api_keys.principal_for_key(load_directory(users_file), key) is not None


def test_logout_with_keys_ends_sessions_and_every_key_of_that_user_only(users_file, tmp_path,
                                                                         capsys):
    _, bob1 = api_keys.issue(users_file, "bob")
    _, bob2 = api_keys.issue(users_file, "bob")
    _, carol = api_keys.issue(users_file, "carol")
    epoch = load_directory(users_file).users["bob"].session_epoch
    assert _cli(tmp_path, users_file, "logout", "bob", "--keys", "--json") == 0
    assert json.loads(capsys.readouterr().out) == {"logged_out": True, "keys_revoked": 2}
    assert not _works(users_file, bob1) and not _works(users_file, bob2)
    assert _works(users_file, carol)
    assert load_directory(users_file).users["bob"].session_epoch == epoch + 1


def test_logout_without_keys_still_leaves_them(users_file, tmp_path, capsys):
    _, bob = api_keys.issue(users_file, "bob")
    assert _cli(tmp_path, users_file, "logout", "bob") == 0
    assert "revoked" not in capsys.readouterr().out
    assert _works(users_file, bob)


def test_a_new_password_with_keys_revokes_them(users_file, tmp_path, capsys):
    _, bob = api_keys.issue(users_file, "bob")
    assert _cli(tmp_path, users_file, "add", "bob", "--role", "editor", "--keys") == 0
    assert "revoked 1 API key" in capsys.readouterr().out
    assert not _works(users_file, bob)
    assert load_directory(users_file).authenticate("bob", "new-pw-123456") is not None
    _, again = api_keys.issue(users_file, "bob")  # a new key after the reset works
    assert _works(users_file, again)


def test_a_new_password_without_keys_keeps_them(users_file, tmp_path):
    _, bob = api_keys.issue(users_file, "bob")
    assert _cli(tmp_path, users_file, "add", "bob", "--role", "editor") == 0
    assert _works(users_file, bob)


def test_logout_keys_of_an_unknown_user_is_an_error(users_file, tmp_path, capsys):
    assert _cli(tmp_path, users_file, "logout", "nobody", "--keys") == 1
    assert "no user 'nobody'" in capsys.readouterr().out
