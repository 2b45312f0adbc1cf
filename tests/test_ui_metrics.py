"""The app over the resilient ``Service``: per-session ledger, the Metrics tab, busy and
budget refusals, and the login and collection ACLs with a users file.

The first tests need no server (a ``Service`` over the fakes of ``tests.support.fakes``); the
others launch the app over the REAL retriever and store with the sample handbook and
talk to it through ``gradio_client``, as the other UI API tests do.
"""

import asyncio
import contextlib
import html
import re
import types

import httpx
import pytest
import yaml

from specrag.grounding.verifier import Verifier
from specrag.observability.audit import Auditor
from specrag.pipeline.engine import SpeculativeRAG
from specrag.pipeline.service import Service
from specrag.resilience.concurrency import AdmissionGate
from specrag.security import users as users_mod
from specrag.security.sessions import SESSIONS
from specrag.security.users import LOCAL, Principal, add_user, load_directory
from specrag.settings import Settings as _Settings
from specrag.testing import FakeGenerator
from specrag.ui import metrics
from specrag.ui.app import build, launch_options
from specrag.ui.auth import COOKIE_PREFIX
from specrag.ui.session import Engines, Options, stream
from tests.support.env import free_port, make_settings
from tests.support.fakes import (
    DRAFT_WRONG,
    HEAVY_ANSWER,
    FakeRetriever,
    ReverseReranker,
    WordScorer,
    handbook_engine,
    launch,
)

T = _Settings().verify.threshold  # the calibrated default

GOOD = "Employees receive 25 days of paid annual leave per year [1]."
EASY = "How many days of paid annual leave do employees get?"
HARD = "Can I fly premium economy to a client meeting in New York?"


class MeanScorer:  # context relevance for the audit: anything with predict(pairs)
    def predict(self, pairs):
        return [0.5 for _ in pairs]


class FullGate(AdmissionGate):
    """An admission gate with no room at all: every question is told 'busy'."""

    @contextlib.asynccontextmanager
    async def slot(self, user=""):
        raise self._busy("queue full")
        yield  # pragma: no cover


def fake_service(tmp_path, **values):
    s = make_settings(tmp_path / "data", **values)
    heavy = FakeGenerator("claude-sonnet-4-6", replies=["Pages are acknowledged in 15 minutes."])
    heavy.name = "anthropic"
    engine = SpeculativeRAG(s, retriever=FakeRetriever(),
                            draft=FakeGenerator("tiny-draft", replies=[GOOD]), heavy=heavy,
                            verifier=Verifier(s, scorer=WordScorer()), reranker=ReverseReranker())
    return Service(s, engine=engine)


def answer(engine, question="How much annual leave?", session="s", **kw):
    async def go():
        final = None
        async for ev in stream(engine, question, session, **kw):
            final = ev.answer if ev.kind == "final" else final
        return final

    return asyncio.run(go())


# -- no server ------------------------------------------------------------------------
def test_session_views_of_a_service_share_its_ledger_and_keep_settings_apart(tmp_path):
    base = fake_service(tmp_path)
    engines = Engines(base.settings, base)
    assert engines.view(Options(threshold=T)) is base  # nothing changed: the shared one
    strict = engines.view(Options(threshold=0.99, top_k=2))
    assert isinstance(strict, Service) and strict is not base
    assert strict.ledger is base.ledger and strict.gate is base.gate
    assert strict.budget is base.budget
    assert strict.engine.settings.verify.threshold == 0.99
    assert base.engine.settings.verify.threshold == T
    assert strict.engine.draft is base.engine.draft  # the same loaded parts
    harsh = answer(strict, session="strict")
    loose = answer(base, session="loose")
    assert harsh.verdict.threshold == 0.99 and loose.verdict.threshold == T
    assert loose.tier == "draft" and harsh.tier == "draft"  # 1.0 passes both
    sessions = {r["key"]: r for r in base.usage(by="session")}
    assert set(sessions) == {"strict", "loose"} and sessions["strict"]["questions"] == 1
    # a bare engine stays bare: no session argument, no ledger
    bare = fake_service(tmp_path / "bare").engine
    assert answer(bare).tier == "draft" and Engines(bare.settings, bare).service is None


def test_snapshot_and_rendering_of_usage_budget_and_audit(tmp_path):
    base = fake_service(tmp_path, **{"budget.session_usd": 5.0})
    base.engine.auditor = Auditor(base.settings, verifier=base.engine.verifier,
                                  reranker=MeanScorer(), rate=1.0, seed=1)
    engines = Engines(base.settings, base)
    answer(base, session="mine")
    answer(base, session="mine", policy="heavy-only")
    answer(base, session="other")
    base.engine.auditor.wait()
    assert base.warmer.wait(10)  # asked for after each question; the fake draft keeps none
    data = metrics.snapshot(engines, "mine")
    assert data["ledger"] and data["session"] == "mine"
    assert {r["key"] for r in data["sessions"]} == {"mine", "other"}
    assert {r["key"] for r in data["this_session"]} == {"fake/tiny-draft",
                                                        "anthropic/claude-sonnet-4-6"}
    assert data["budget"]["session_limit_usd"] == 5.0 and data["budget"]["session_spent_usd"] > 0
    assert data["audit"]["summary"]["samples"] == 3
    assert data["audit"]["recent"][0]["faithfulness"] is not None
    session_md, sessions, models, collections, audit_md, recent = metrics.render(data)
    assert session_md.startswith("**This session** (`mine`): **2** questions")
    assert "session budget $" in session_md and "of $5.0000" in session_md
    assert session_md.endswith("Draft prompts warmed ahead of questions: default: none "
                               "(the draft model keeps no prompt states)")
    warm = {"handbook": {"total": 32, "state_mb": 64.5, "skipped": ""}}
    assert metrics.warm_markdown(warm).endswith("handbook: 32 chunks, 64.5 MB")
    assert sessions[0][0] == "mine" and len(models) == 2 and collections[0][0] == "default"
    assert audit_md.startswith("**3** sampled answers, **3** scored · faithfulness **")
    assert len(recent) == 3 and recent[0][-1] == "How much annual leave?"
    bare = Engines(base.settings, base.engine)  # no Service: no ledger, the audit still shows
    assert metrics.session_markdown(metrics.snapshot(bare, "x")).startswith("No usage ledger")


def test_the_metrics_fallback_reads_the_sealed_audit_as_plaintext(tmp_path, monkeypatch):
    import base64
    import os

    monkeypatch.setenv("SPECRAG_ENCRYPTION_KEY", base64.b64encode(os.urandom(32)).decode())
    base = fake_service(tmp_path, **{"security.encrypt": True})
    base.engine.auditor = Auditor(base.settings, verifier=base.engine.verifier,
                                  reranker=MeanScorer(), rate=1.0)
    answer(base, question="How much annual leave?")
    base.engine.auditor.wait()
    raw = b"".join(p.read_bytes() for p in base.settings.data_path.glob("audit.db*"))
    assert b"annual leave" not in raw  # sealed on disk
    # an app whose engine has no auditor of its own shows the data directory's audit file
    bare = fake_service(tmp_path)  # the same data directory
    engines = Engines(base.settings, bare)
    assert bare.engine.auditor is None
    for data in (metrics.snapshot(engines, "x"),
                 metrics.snapshot(engines, "x", fallback=metrics.AuditStore.from_settings(
                     base.settings))):
        assert data["audit"]["recent"][0]["question"] == "How much annual leave?"


def test_warm_up_lends_the_engine_models_to_the_audit(tmp_path):
    base = fake_service(tmp_path)
    base.engine.auditor = Auditor(base.settings, rate=1.0)
    Engines(base.settings, base).warm_up()
    assert base.engine.auditor.verifier.scorer is not None  # the engine's, untraced
    assert type(base.engine.auditor.verifier) is Verifier
    assert base.engine.auditor.reranker is None  # the fake reranker cannot score relevance


def test_metrics_are_for_admins_when_users_are_configured(tmp_path):
    s = make_settings(tmp_path)
    assert metrics.allowed(s, LOCAL) and metrics.allowed(s, None)
    users = tmp_path / "users.yaml"
    users.write_text(yaml.safe_dump({"users": {
        "alice": {"role": "admin", "password": "$2b$04$" + "a" * 53},
        "bob": {"role": "editor", "password": "$2b$04$" + "b" * 53}}}))
    s = s.with_values(**{"security.users_file": str(users)})
    assert metrics.allowed(s, Principal("alice", "admin"))
    assert not metrics.allowed(s, Principal("bob", "admin"))  # the role comes from the file
    assert not metrics.allowed(s, None)


def plain(markdown: str) -> str:
    """A message as the page shows it: ``safe_markdown`` escapes undone."""
    return html.unescape(re.sub(r"\\(.)", r"\1", markdown))


def test_messages_shown_as_markdown_are_inert():
    shown = "user 'x' (viewer) may not read ![t](http://evil/p.png)"
    from specrag.security.sanitize import safe_markdown

    assert "![" not in safe_markdown(shown) and plain(safe_markdown(shown)) == shown


def _handler(demo, name):
    return next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == name)


def test_busy_service_shows_a_one_line_message_in_the_chat_turn(tmp_path):
    from specrag.ui.session import ChatSession

    service = fake_service(tmp_path)
    service.gate = FullGate()
    demo = build(service.settings, engine=service, sample=False)
    respond = _handler(demo, "respond")
    request = types.SimpleNamespace(username=None, session_hash="tab-1")

    async def run():
        return [out async for out in respond("How much annual leave?", "default",
                                             ChatSession(), "", T, 50, 4, 8, None, request)]

    last = asyncio.run(run())[-1]
    html = last[0]
    assert 'data-state="error"' in html
    error = html.split('<div class="sr-error">')[1].split("</div>")[0]
    assert error.startswith("specrag is busy (queue full") and "try again" in error
    assert "\n" not in error and last[2].points == []  # no answer, no chart point


def test_metrics_tab_is_shown_to_admins_only(tmp_path, monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)
    path = tmp_path / "users.yaml"
    add_user(path, "alice", "admin", "alice-pw-123")
    add_user(path, "bob", "editor", "bob-pw-1234")
    service = fake_service(tmp_path, **{"security.users_file": str(path)})
    demo = build(service.settings, engine=service, sample=False)
    on_load = _handler(demo, "on_load")

    directory = load_directory(path)

    def shown(user):
        token = f"token-of-{user}"  # a session the login gate would have recorded
        SESSIONS.issue(token, directory.users[user])
        request = types.SimpleNamespace(username=user, session_hash="tab-1",
                                        cookies={f"{COOKIE_PREFIX}x": token})
        return asyncio.run(on_load("default", request))[-1]["visible"]

    assert shown("alice") is True and shown("bob") is False
    local = build(make_settings(tmp_path / "local"), engine=fake_service(tmp_path / "l"),
                  sample=False)
    assert asyncio.run(_handler(local, "on_load")("default", types.SimpleNamespace(
        username=None, session_hash="tab-2")))[-1]["visible"] is True


# -- a launched app -------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory, embedder):
    settings = make_settings(tmp_path_factory.mktemp("ui-metrics") / "data",
                             **{"budget.session_usd": 0.0005, "budget.on_exceeded": "refuse"})
    service = Service(settings, engine=handbook_engine(settings, embedder, 0.0, 0.0))
    demo = build(settings, engine=service)
    assert demo.specrag_sample.wait(120)
    yield service, launch(demo)
    demo.close()


def client_for(url, **kw):
    from gradio_client import Client

    return Client(url, verbose=False, **kw)


@pytest.mark.slow
def test_chat_through_the_service_is_in_the_ledger_and_the_metrics_endpoint(served):
    service, url = served
    me, other = client_for(url), client_for(url)
    assert me.predict(EASY, "handbook", "", api_name="/chat")["tier"] == "draft"
    hard = me.predict(HARD, "handbook", "", api_name="/chat")
    assert hard["tier"] == "heavy" and hard["draft"] == DRAFT_WRONG
    assert hard["answer"] == HEAVY_ANSWER and hard["cost_usd"] > 0.0005
    data = me.predict(api_name="/metrics")
    assert data["ledger"] and data["session"] == me.session_hash
    mine = {r["key"]: r for r in data["this_session"]}
    assert set(mine) == {"fake/fake-draft", "anthropic/claude-sonnet-4-6"}
    assert mine["fake/fake-draft"]["questions"] == 2 and mine["fake/fake-draft"]["cost_usd"] == 0
    assert mine["anthropic/claude-sonnet-4-6"]["cost_usd"] == pytest.approx(hard["cost_usd"])
    assert [r["key"] for r in data["collections"]] == ["handbook"]
    assert data["budget"]["session_spent_usd"] == pytest.approx(hard["cost_usd"])
    assert me.session_hash in {r["key"] for r in data["sessions"]}
    theirs = other.predict(api_name="/metrics")  # another session: its own, and everyone's
    assert theirs["this_session"] == [] and theirs["budget"]["session_spent_usd"] == 0
    assert me.session_hash in {r["key"] for r in theirs["sessions"]}
    rows = service.ledger.rows(session=me.session_hash)
    assert {r["stage"] for r in rows} == {"draft", "heavy"} and len(rows) == 3


@pytest.mark.slow
def test_over_budget_and_busy_are_one_line_errors_from_chat(served, monkeypatch):
    from gradio_client.exceptions import AppError

    service, url = served
    spender = client_for(url)
    assert spender.predict(HARD, "handbook", "", api_name="/chat")["cost_usd"] > 0.0005
    with pytest.raises(AppError, match=r"^this session has used \$0\.\d+ of its \$0\.00 budget"):
        spender.predict(EASY, "handbook", "", api_name="/chat")
    fresh = client_for(url)  # the budget is per session: another one still gets answers
    assert fresh.predict(EASY, "handbook", "", api_name="/chat")["tier"] == "draft"
    monkeypatch.setattr(service, "gate", FullGate())
    with pytest.raises(AppError, match=r"^specrag is busy \(queue full.*try again"):
        fresh.predict(EASY, "handbook", "", api_name="/chat")


# -- a users file ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def secured(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("ui-users")
    path = root / "users.yaml"
    rounds, users_mod.BCRYPT_ROUNDS = users_mod.BCRYPT_ROUNDS, 4
    try:
        add_user(path, "alice", "admin", "alice-pw-123")
        add_user(path, "bob", "editor", "bob-pw-1234")
        add_user(path, "carol", "viewer", "carol-pw-123")
    finally:
        users_mod.BCRYPT_ROUNDS = rounds
    data = yaml.safe_load(path.read_text())
    data["collections"] = {"handbook": {"read": ["*"], "write": ["editor"]}}
    path.write_text(yaml.safe_dump(data))
    settings = make_settings(root / "data", **{"security.users_file": str(path)})
    demo = build(settings, engine=Service(settings, engine=handbook_engine(settings, embedder,
                                                                           0.0, 0.0)))
    assert demo.specrag_sample.wait(120)
    assert demo.specrag_sample.status == "ingested 7 sample files"  # as alice, the admin
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                share=False, quiet=True, **launch_options(settings))
    yield f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.mark.slow
def test_login_is_required(secured):
    with pytest.raises(Exception):
        client_for(secured)
    with pytest.raises(Exception):
        client_for(secured, auth=("bob", "wrong-password"))
    assert client_for(secured, auth=("bob", "bob-pw-1234")).predict(
        EASY, "handbook", "", api_name="/chat")["tier"] == "draft"


@pytest.mark.slow
def test_roles_and_collection_acls_through_the_api(secured, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    alice = client_for(secured, auth=("alice", "alice-pw-123"))
    bob = client_for(secured, auth=("bob", "bob-pw-1234"))
    carol = client_for(secured, auth=("carol", "carol-pw-123"))
    note = tmp_path / "salaries.md"
    note.write_text("# Salaries\n\nThe salary bands are reviewed every March.\n")
    summary, _, docs = alice.predict([handle_file(str(note))], "secret", api_name="/ingest")
    assert summary.startswith("1 stored") and [r[0] for r in docs["data"]] == ["salaries.md"]

    # a viewer may read the handbook but neither upload (refused at the upload itself)
    # nor delete
    with pytest.raises(httpx.HTTPStatusError, match="403"):
        carol.predict([handle_file(str(note))], "handbook", api_name="/ingest")
    with pytest.raises(AppError, match="user 'carol' \\(viewer\\) may not add to or delete "
                                       "from collection 'handbook'"):
        carol.predict("leave.md", "handbook", api_name="/delete")
    assert carol.predict(EASY, "handbook", "", api_name="/chat")["tier"] == "draft"

    # an editor may not read (nor answer from) a collection the ACL does not give him
    with pytest.raises(AppError, match="user 'bob' \\(editor\\) may not read or search "
                                       "collection 'secret'"):
        bob.predict("salary bands", "secret", "", api_name="/chat")
    with pytest.raises(AppError, match="may not read or search collection 'secret'"):
        bob.predict("salary bands", "secret", 3, api_name="/search")
    status, hits = alice.predict("salary bands", "secret", 3, api_name="/search")
    assert status.startswith("1 chunks") and hits["data"][0][2] == "salaries.md"
    with pytest.raises(AppError, match="may not add to or delete from collection"):
        bob.predict("salaries.md", "secret", api_name="/delete")

    # the metrics: admins only
    with pytest.raises(AppError, match="admins only"):
        bob.predict(api_name="/metrics")
    assert alice.predict(api_name="/metrics")["ledger"]
