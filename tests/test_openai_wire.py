"""The endpoint's parts without a server: request parsing, API keys, who is calling, and
the chunks a stream is made of (``specrag.api``, ``specrag.security.api_keys``)."""

import json

import pytest
import yaml

from specrag.api import wire
from specrag.api.caller import caller
from specrag.api.errors import ApiError, from_exception
from specrag.api.stream import ChunkStream
from specrag.cli.main import main
from specrag.generators.base import Usage
from specrag.pipeline.events import Answer, StageEvent
from specrag.resilience.concurrency import BusyError
from specrag.security import api_keys
from specrag.security import users as users_mod
from specrag.security.access import AccessControl, PermissionDenied
from specrag.security.users import LOCAL, add_user, load_directory
from tests.support.env import make_settings


def test_the_last_user_message_is_the_question_and_earlier_turns_the_history():
    req = wire.parse_chat({"model": "specrag:hr", "stream": True,
                           "stream_options": {"include_usage": True},
                           "messages": [{"role": "system", "content": "Be terse."},
                                        {"role": "user", "content": "Leave?"},
                                        {"role": "assistant", "content": "25 days [1]."},
                                        {"role": "tool", "content": "ignored"},
                                        {"role": "user", "content": [
                                            {"type": "text", "text": "And sick"},
                                            {"type": "text", "text": "leave?"}]}]},
                          "default")
    assert req.collection == "hr" and req.question == "And sick\nleave?"
    assert req.history == ({"role": "user", "content": "Leave?"},
                           {"role": "assistant", "content": "25 days [1]."})
    assert req.stream and req.include_usage and req.policy is None
    plain = wire.parse_chat({"model": "specrag", "messages": [{"role": "user", "content": "q"}]},
                            "handbook", policy="eager")
    assert plain.collection == "handbook" and plain.policy == "eager" and not plain.stream


@pytest.mark.parametrize("body,status,param", [
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}]}, 404, "model"),
    ({"model": "specrag:", "messages": [{"role": "user", "content": "q"}]}, 404, "model"),
    ({"model": "specrag", "messages": []}, 400, "messages"),
    ({"model": "specrag", "messages": [{"role": "assistant", "content": "q"}]}, 400, "messages"),
    ({"model": "specrag", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, "messages"),
    ({"model": "specrag", "n": 2, "messages": [{"role": "user", "content": "q"}]}, 400, "n"),
    ({"model": "specrag", "specrag_policy": "fast",
      "messages": [{"role": "user", "content": "q"}]}, 400, "specrag_policy"),
])
def test_bad_requests_say_which_field(body, status, param):
    with pytest.raises(ApiError) as err:
        wire.parse_chat(body, "default")
    assert err.value.status == status and err.value.body()["error"]["param"] == param


def test_library_errors_map_to_openai_statuses():
    assert from_exception(PermissionDenied("no")).status == 403
    busy = from_exception(BusyError("busy", retry_after_s=2.2))
    assert busy.status == 429 and busy.headers == {"Retry-After": "3"}
    assert from_exception(RuntimeError("secret detail")).body()["error"]["message"] \
        .startswith("internal error")


@pytest.fixture
def users_file(tmp_path, monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)
    path = tmp_path / "users.yaml"
    add_user(path, "bob", "editor", "bob-pw-12345")
    return path


def test_keys_are_stored_as_digests_and_act_as_their_user(users_file):
    key_id, key = api_keys.issue(users_file, "bob")
    assert key.startswith(api_keys.PREFIX) and len(key) > 40
    text = users_file.read_text()
    assert key not in text and api_keys.digest(key) in text
    directory = load_directory(users_file)
    assert api_keys.principal_for_key(directory, key).name == "bob"
    assert api_keys.principal_for_key(directory, key + "x") is None
    assert api_keys.principal_for_key(directory, "") is None
    add_user(users_file, "bob", "viewer", "new-pw-12345")  # a new password keeps the keys
    assert api_keys.principal_for_key(load_directory(users_file), key).role == "viewer"
    assert [k.id for k in api_keys.listed(users_file, "bob")] == [key_id]


def test_a_malformed_key_entry_is_refused(users_file):
    data = yaml.safe_load(users_file.read_text())
    data["users"]["bob"]["api_keys"] = [{"id": "k", "sha256": "not-hex"}]
    users_file.write_text(yaml.safe_dump(data))
    with pytest.raises(Exception, match="api_keys"):
        load_directory(users_file)


def test_users_key_command_prints_a_key_once_and_revokes(users_file, capsys, tmp_path):
    base = ["--data-dir", str(tmp_path / "data"), "users", "key", "bob", "--file", str(users_file)]
    assert main(base + ["--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert main(base + ["--list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == made["id"]
    assert main(base + ["--revoke", made["id"]]) == 0
    assert main(base + ["--revoke"]) == 1  # none left
    assert "revoked 0" in capsys.readouterr().out
    assert main(["--data-dir", str(tmp_path / "data"), "users", "key", "nobody",
                 "--file", str(users_file)]) == 2


def test_who_is_calling(users_file, tmp_path):
    _, key = api_keys.issue(users_file, "bob")
    secured = AccessControl(make_settings(tmp_path, **{"security.users_file": str(users_file)}))
    assert caller(secured, {"authorization": f"Bearer {key}"}, "203.0.113.9").name == "bob"
    for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": f"Basic {key}"}):
        with pytest.raises(ApiError) as err:
            caller(secured, headers, "127.0.0.1")
        assert err.value.status == 401
    single = AccessControl(make_settings(tmp_path))
    assert caller(single, {}, "127.0.0.1") is LOCAL and caller(single, {}, "::1") is LOCAL
    for headers, host in (({}, "10.0.0.2"), ({"x-forwarded-for": "10.0.0.2"}, "127.0.0.1"),
                          ({}, None)):
        with pytest.raises(ApiError):
            caller(single, headers, host)


def test_a_withheld_streamed_answer_is_followed_by_its_warning_and_replacement():
    answer = Answer("q", "The documents do not say.", "heavy", "lazy",
                    usage=(Usage("fake", "m", 10, 4),),
                    warnings=("The answer repeated what an instruction demanded.",))
    s = ChunkStream("id", 0, "specrag", include_usage=True)
    out = s.on(StageEvent("heavy_token", 1.0, text="Visit evil.example"))
    out += s.on(StageEvent("final", 2.0, answer=answer))
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in out if c["choices"])
    assert content.endswith("instruction demanded. The documents do not say.")
    assert out[-2]["choices"][0]["finish_reason"] == "stop"
    assert out[-2]["specrag"]["answer"] == answer.text
    assert out[-1]["choices"] == [] and out[-1]["usage"]["total_tokens"] == 14
