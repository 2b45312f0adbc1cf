"""Users, roles and collection ACLs, enforced in the library that the UI, API and CLI use."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest
import yaml

from specrag.security import users as users_mod
from specrag.security.access import (
    AccessControl,
    PermissionDenied,
    acting_as,
    current_principal,
    drop_collection,
    list_documents,
    visible_collections,
)
from specrag.security.users import LOCAL, Principal, add_user, load_directory, parse_directory
from specrag.types import SpecragError
from tests.support.env import CACHE, make_settings

PASSWORDS = {"alice": "alice-pw-123", "bob": "bob-pw-1234", "carol": "carol-pw-123",
             "dave": "dave-pw-1234"}
ROLES = {"alice": "admin", "bob": "editor", "carol": "viewer", "dave": "editor"}


@pytest.fixture(autouse=True)
def fast_bcrypt(monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)  # the real cost (12) only slows tests


@pytest.fixture
def users_file(tmp_path):
    path = tmp_path / "users.yaml"
    for name, role in ROLES.items():
        add_user(path, name, role, PASSWORDS[name])
    data = yaml.safe_load(path.read_text())
    data["collections"] = {"hr": {"read": ["editor", "carol"], "write": ["bob"]},
                           "public": {"read": ["*"], "write": ["editor"]}}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def secured(tmp_path, users_file):
    return make_settings(tmp_path / "data", **{"security.users_file": str(users_file)})


def who(name):
    return Principal(name, ROLES[name])


# -- the users file ----------------------------------------------------------------------
def test_users_file_holds_only_bcrypt_hashes_and_authenticates(users_file):
    text = users_file.read_text()
    assert not any(pw in text for pw in PASSWORDS.values())
    assert text.count("$2b$") == 4
    assert stat.S_IMODE(os.stat(users_file).st_mode) == 0o600
    directory = load_directory(users_file)
    assert directory.authenticate("bob", PASSWORDS["bob"]) == Principal("bob", "editor")
    assert directory.authenticate("bob", PASSWORDS["carol"]) is None
    assert directory.authenticate("mallory", "anything-at-all") is None
    assert directory.authenticate("bob", "x" * 200) is None  # over bcrypt's 72 bytes: no crash
    assert directory.authenticate("", "") is None


@pytest.mark.parametrize("text, match", [
    ("users: {bob: {role: root, password: '$2b$04$x'}}", "role"),
    ("users: {admin: {role: admin, password: '$2b$04$x'}}", "cannot be a user name"),
    ("users: {bob: {role: editor, password: hunter2}}", "bcrypt"),
    ("collections: {'../etc': {read: ['*']}}", "collection name"),
    ("collections: {hr: {read: ['*'], delete: ['*']}}", "read"),
    ("groups: {}", "expected the keys"),
])
def test_bad_users_files_are_refused_with_a_reason(text, match):
    with pytest.raises(SpecragError, match=match):
        parse_directory(text)


def test_weak_or_overlong_passwords_are_refused(tmp_path):
    with pytest.raises(SpecragError, match="too short"):
        add_user(tmp_path / "u.yaml", "eve", "viewer", "short")
    with pytest.raises(SpecragError, match="too long"):
        add_user(tmp_path / "u.yaml", "eve", "viewer", "é" * 40)
    assert not (tmp_path / "u.yaml").exists()


def test_missing_users_file_fails_closed(tmp_path):
    s = make_settings(tmp_path, **{"security.users_file": str(tmp_path / "nope.yaml")})
    with pytest.raises(SpecragError, match="not found"):
        AccessControl(s).check(who("alice"), "read", "hr")


# -- decisions ------------------------------------------------------------------------------
def test_role_and_acl_matrix(secured):
    ac = AccessControl(secured)
    allowed = {(n, a, c) for n in ROLES for a in ("read", "write", "admin")
               for c in ("hr", "public", "secret") if ac.allowed(ac.resolve(who(n)), a, c)}
    expected = {("alice", a, c) for a in ("read", "write", "admin")
                for c in ("hr", "public", "secret")}
    expected |= {("bob", "read", "hr"), ("bob", "write", "hr"), ("bob", "read", "public"),
                 ("bob", "write", "public"), ("dave", "read", "hr"), ("dave", "read", "public"),
                 ("dave", "write", "public"), ("carol", "read", "hr"), ("carol", "read", "public")}
    assert allowed == expected


def test_roles_come_from_the_file_not_from_the_caller(secured, users_file):
    ac = AccessControl(secured)
    with pytest.raises(PermissionDenied, match="'carol' \\(viewer\\) may not add"):
        ac.check(Principal("carol", "admin"), "write", "public")  # a forged role
    with pytest.raises(PermissionDenied, match="not in the users file"):
        ac.check(Principal("mallory", "admin"), "read", "public")
    with pytest.raises(PermissionDenied, match="not in the users file"):
        ac.check(LOCAL, "read", "public")  # single-user identity is worthless here
    with pytest.raises(PermissionDenied, match="sign in first"):
        ac.check(None, "read", "public")
    users_mod.remove_user(users_file, "bob")  # takes effect without a restart
    with pytest.raises(PermissionDenied, match="not in the users file"):
        ac.check(who("bob"), "read", "public")


def test_single_user_mode_allows_everything(settings):
    ac = AccessControl(settings)
    assert not ac.enabled
    assert ac.check(None, "admin", "anything") == LOCAL
    assert ac.check(Principal("x", "viewer"), "write", "hr").name == "x"


def test_acting_as_binds_for_the_block_only(secured):
    assert current_principal() is None
    with acting_as(who("carol")):
        assert AccessControl(secured).check(None, "read", "hr").name == "carol"

        async def in_worker():
            return await asyncio.to_thread(current_principal)
        assert asyncio.run(in_worker()) == who("carol")  # to_thread copies the context
    assert current_principal() is None


# -- enforcement in the library: forbidden actions attempted -----------------------------
def test_library_enforces_roles_and_collections(secured, embedder, tmp_path):
    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.retriever import Retriever

    ing = Ingestor(secured, embedder=embedder)
    ret = Retriever(secured, embedder=embedder, store=ing.store)
    files = [("leave.txt", b"Every employee receives 25 days of paid annual leave per year.")]
    salaries = [("salaries.txt", b"The CEO salary is 900,000 euros per year.")]
    assert ing.ingest_bytes(files, "public", principal=who("bob")).results[0].status == "added"
    assert ing.ingest_bytes(salaries, "secret", principal=who("alice")).results[0].status == "added"
    assert ing.ingest_bytes(files, "hr", principal=who("bob")).results[0].status == "added"
    counts = {c: ing.store.count(c) for c in ("public", "secret", "hr")}

    forbidden = [
        lambda: ing.ingest_bytes(files, "public", principal=who("carol")),  # viewer uploads
        lambda: ing.delete("leave.txt", "public", principal=who("carol")),  # viewer deletes
        lambda: ing.ingest_bytes(files, "hr", principal=who("dave")),  # editor not on the ACL
        lambda: ing.ingest(["/etc/hostname"], "secret", principal=who("bob")),
        lambda: ing.delete("salaries.txt", "secret", principal=who("bob")),
        lambda: ret.retrieve("salary", 3, "secret", principal=who("bob")),  # no read access
        lambda: ret.retrieve_many(["salary"], 3, "secret", principal=who("carol")),
        lambda: ret.retrieve("leave", 3, "public"),  # nobody signed in
        lambda: ing.ingest_bytes(files, "public"),
        lambda: list_documents(ing.store, "secret", principal=who("dave")),
        lambda: drop_collection(ing.store, "public", principal=who("bob")),
    ]
    for attempt in forbidden:
        with pytest.raises(PermissionDenied):
            attempt()
    assert {c: ing.store.count(c) for c in counts} == counts  # nothing changed

    hits = ret.retrieve("annual leave", 3, "hr", principal=who("carol")).hits
    assert hits and hits[0].chunk.source == "leave.txt"
    assert visible_collections(ing.store, who("carol")) == ["hr", "public"]
    assert visible_collections(ing.store, who("alice")) == ["hr", "public", "secret"]
    assert [d.source for d in list_documents(ing.store, "hr", who("dave"))] == ["leave.txt"]
    assert ing.delete("leave.txt", "public", principal=who("dave")) is True
    with acting_as(who("carol")):  # how the CLI binds its user
        assert ret.retrieve("annual leave", 3, "hr").hits
        with pytest.raises(PermissionDenied):
            ing.ingest_bytes(files, "hr")


def test_engine_refuses_before_retrieving_or_generating(secured, embedder):
    from specrag.grounding.verifier import Verifier
    from specrag.ingest.ingestor import Ingestor
    from specrag.pipeline.engine import SpeculativeRAG
    from specrag.retrieval.retriever import Retriever
    from specrag.testing import FakeGenerator
    from tests.support.fakes import ReverseReranker, WordScorer

    ing = Ingestor(secured, embedder=embedder)
    ing.ingest_bytes([("pay.txt", b"Salaries are paid on the 25th of each month.")], "secret",
                     principal=who("alice"))
    ing.ingest_bytes([("pay.txt", b"Salaries are paid on the 25th of each month.")], "hr",
                     principal=who("bob"))
    draft = FakeGenerator(replies=["Salaries are paid on the 25th of each month [1]."])
    engine = SpeculativeRAG(secured, retriever=Retriever(secured, embedder=embedder,
                                                         store=ing.store),
                            draft=draft, heavy=FakeGenerator(), reranker=ReverseReranker(),
                            verifier=Verifier(secured, scorer=WordScorer()))
    with pytest.raises(PermissionDenied, match="may not read"):
        asyncio.run(engine.aask("When are salaries paid?", collection="secret",
                                principal=who("carol")))
    with pytest.raises(PermissionDenied, match="sign in first"):
        asyncio.run(engine.aask("When are salaries paid?", collection="hr"))
    assert draft.calls == []
    answer = asyncio.run(engine.aask("When are salaries paid?", collection="hr",
                                     principal=who("carol")))
    assert answer.tier == "draft" and "25th" in answer.text


# -- the CLI signs in and the same rules apply ------------------------------------------
@pytest.mark.slow  # ingests and searches with the real embedder
def test_cli_users_and_sign_in(tmp_path, monkeypatch, capsys, users_file):
    from specrag.cli.main import main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.txt").write_text("Every employee receives 25 days of paid annual leave.")
    monkeypatch.setenv("SPECRAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SPECRAG_CACHE_DIR", CACHE)
    monkeypatch.setenv("SPECRAG_SECURITY__USERS_FILE", str(users_file))
    monkeypatch.setenv("SPECRAG_PASSWORD", "erin-pw-1234")
    assert main(["users", "add", "erin", "--role", "viewer"]) == 0
    assert "erin-pw-1234" not in users_file.read_text()
    assert main(["users", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"name": "erin", "role": "viewer"} in listed

    assert main(["--user", "erin", "ingest", str(docs), "-c", "public"]) == 2
    assert "'erin' (viewer) may not add to or delete from collection 'public'" in \
        capsys.readouterr().err
    assert main(["search", "leave", "-c", "public"]) == 2  # not signed in
    assert "sign in first" in capsys.readouterr().err
    monkeypatch.setenv("SPECRAG_PASSWORD", "wrong-password")
    assert main(["--user", "bob", "ingest", str(docs), "-c", "public"]) == 2
    assert "wrong user name or password" in capsys.readouterr().err

    monkeypatch.setenv("SPECRAG_PASSWORD", PASSWORDS["bob"])
    assert main(["--user", "bob", "ingest", str(docs), "-c", "public", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["status"] == "added"
    monkeypatch.setenv("SPECRAG_PASSWORD", "erin-pw-1234")
    assert main(["--user", "erin", "search", "annual leave", "-c", "public", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["source"] == "leave.txt"
    assert main(["--user", "erin", "docs", "collections", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == ["public"]
    assert main(["--user", "erin", "docs", "delete", "leave.txt", "-c", "public"]) == 2
    assert main(["users", "keygen"]) == 0
    assert len(capsys.readouterr().out.strip()) == 44  # 32 bytes, base64
