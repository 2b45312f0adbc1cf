"""Login throttling, session liveness and upload ownership as plain objects (fast: no server).

The same rules are exercised over HTTP in test_login_gate; here the clock is a number
the test moves, so limits that take minutes to decay are checked in microseconds.
"""

import pytest

from specrag.security import users as users_mod
from specrag.security.access import PermissionDenied
from specrag.security.sessions import SessionRegistry
from specrag.security.throttle import (
    MAX_NAME_DELAY_S,
    PER_ADDRESS,
    PER_NAME,
    PER_PAIR,
    LoginThrottle,
    Refused,
)
from specrag.security.uploads import UPLOAD_TTL_S, UploadRegistry
from specrag.security.users import add_user, end_sessions, load_directory, parse_directory
from specrag.types import SpecragError


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def fail(throttle, address, name, times):
    for _ in range(times):
        throttle.begin(address, name)
        throttle.finish(address, name, False)


def test_the_address_limit_trips_then_decays():
    clock = Clock()
    t = LoginThrottle(clock=clock)
    for i in range(int(PER_ADDRESS.capacity)):  # every name new: only the address adds up
        t.begin("10.0.0.9", f"user{i}")
        t.finish("10.0.0.9", f"user{i}", False)
    with pytest.raises(Refused, match="from this address") as refused:
        t.begin("10.0.0.9", "someone-else")
    assert refused.value.retry_after == pytest.approx(PER_ADDRESS.leak_s)
    t.begin("10.0.0.8", "someone-else")  # another address is not affected
    clock.now += PER_ADDRESS.leak_s  # one failure leaked away: one more try
    t.begin("10.0.0.9", "someone-else")
    with pytest.raises(Refused):
        t.begin("10.0.0.9", "and-another")
    clock.now += PER_ADDRESS.capacity * PER_ADDRESS.leak_s  # all of it, once quiet
    fail(t, "10.0.0.9", "fresh", int(PER_PAIR.capacity) - 1)


def test_the_pair_limit_is_sooner_and_a_success_refunds_it():
    clock = Clock()
    t = LoginThrottle(clock=clock)
    fail(t, "10.0.0.1", "bob", int(PER_PAIR.capacity) - 1)
    t.begin("10.0.0.1", "bob")
    t.finish("10.0.0.1", "bob", True)  # the real bob, after typos
    fail(t, "10.0.0.1", "bob", int(PER_PAIR.capacity))  # a fresh allowance
    with pytest.raises(Refused, match="as 'bob'"):
        t.begin("10.0.0.1", "bob")
    clock.now += PER_PAIR.leak_s
    t.begin("10.0.0.1", "bob")


def test_a_stranger_only_slows_a_name_down_and_briefly():
    t = LoginThrottle(clock=Clock())
    for i in range(200):  # a crowd of addresses guessing bob's password
        fail(t, f"10.1.{i // 250}.{i % 250}", "bob", 1)
    delay = t.begin("192.168.1.5", "bob")  # bob himself, from home: let in, a bit later
    assert 0 < delay <= MAX_NAME_DELAY_S
    t.finish("192.168.1.5", "bob", True)
    assert t.begin("192.168.1.6", "carol") == 0  # nobody else is slowed


def test_the_name_slow_down_decays_too():
    clock = Clock()
    t = LoginThrottle(clock=clock)
    for i in range(int(PER_NAME.capacity) + 3):
        fail(t, f"10.2.0.{i}", "bob", 1)
    assert t.begin("10.3.0.1", "bob") > 0
    clock.now += (PER_NAME.capacity + 5) * PER_NAME.leak_s
    assert t.begin("10.3.0.2", "bob") == 0


def test_a_burst_is_charged_before_any_password_is_checked():
    t = LoginThrottle(clock=Clock())
    for _ in range(int(PER_PAIR.capacity)):  # eight concurrent requests: none finished yet
        t.begin("10.0.0.1", "bob")
    with pytest.raises(Refused):
        t.begin("10.0.0.1", "bob")


@pytest.fixture
def users_file(tmp_path, monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)
    path = tmp_path / "users.yaml"
    add_user(path, "bob", "editor", "bob-pw-1234")
    add_user(path, "carol", "viewer", "carol-pw-123")
    return path


def test_sessions_end_with_a_new_password_a_new_epoch_or_the_user(users_file):
    reg = SessionRegistry()
    for token, name in (("t-bob", "bob"), ("t-carol", "carol")):
        reg.issue(token, load_directory(users_file).users[name])
    assert reg.user_of("t-bob", load_directory(users_file)) == "bob"
    assert reg.user_of("forged", load_directory(users_file)) is None
    assert end_sessions(users_file, "bob") == 1 and end_sessions(users_file, "nobody") is None
    assert reg.user_of("t-bob", load_directory(users_file)) is None  # the epoch moved
    assert reg.user_of("t-carol", load_directory(users_file)) == "carol"
    add_user(users_file, "carol", "viewer", "carol-pw-123")  # same password, new salt
    assert reg.user_of("t-carol", load_directory(users_file)) is None
    reg.issue("t-bob2", load_directory(users_file).users["bob"])
    add_user(users_file, "bob", "editor", "bob-pw-5678")
    assert load_directory(users_file).users["bob"].session_epoch == 1  # kept by a reset
    assert reg.user_of("t-bob2", load_directory(users_file)) is None


def test_a_bad_session_epoch_is_refused():
    entry = 'users: {bob: {role: editor, password: "$2b$04$x", session_epoch: %s}}'
    assert parse_directory(entry % 3).users["bob"].session_epoch == 3
    for bad in ("-1", "yes", "1.5", "'2'"):
        with pytest.raises(SpecragError, match="session_epoch"):
            parse_directory(entry % bad)


def test_uploads_are_claimed_only_by_their_owner_and_expire(tmp_path):
    clock = Clock()
    reg = UploadRegistry(clock=clock)
    mine, theirs = tmp_path / "a" / "mine.txt", tmp_path / "b" / "theirs.txt"
    reg.bind(mine, "session:me")
    reg.bind(theirs, "session:them")
    with pytest.raises(PermissionDenied, match="theirs.txt: not a file this session"):
        reg.claim([str(mine), str(theirs)], "session:me")
    assert reg.owner_of(mine) == "session:me"  # a refused claim takes nothing
    with pytest.raises(PermissionDenied, match="elsewhere.txt"):
        reg.claim([str(tmp_path / "elsewhere.txt")], "session:me")  # never uploaded
    assert reg.claim([str(tmp_path / "a" / ".." / "a" / "mine.txt")], "session:me") == [
        str(tmp_path / "a" / ".." / "a" / "mine.txt")]
    assert reg.owner_of(mine) is None
    clock.now += UPLOAD_TTL_S + 1
    assert reg.expired() == [theirs] and reg.owner_of(theirs) is None
