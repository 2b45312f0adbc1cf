"""Budgets per signed-in user: with a users file, ``budget.session_usd`` counts what the
user spent across all their sessions (web tabs, API keys), so opening a new session does
not buy a new allowance; without one, each session has its own as before.

A real ``Service`` and SQLite ledger over the fake engine (heavy tier priced like Claude).
"""

import asyncio

import pytest

from specrag.observability.budget import Budget, BudgetExceeded
from specrag.observability.ledger import Ledger, scope
from specrag.pipeline.service import Service
from specrag.resilience.attempts import Attempt
from specrag.security.users import Principal
from tests.support.env import make_settings
from tests.support.limits import users_file
from tests.support.resilience import fake_engine

PRICES = {"claude-sonnet-4-6": [3.0, 15.0]}
BOB, CAROL = Principal("bob", "viewer"), Principal("carol", "viewer")


def service(tmp_path, **values):
    s = make_settings(tmp_path / "data", **{
        "security.users_file": users_file(tmp_path / "users.yaml", bob="viewer", carol="viewer"),
        "generation.prices": PRICES, "budget.session_usd": 0.00001, **values})
    return Service(s, fake_engine(s))


def ask(svc, who, session):
    return asyncio.run(svc.aask("How much annual leave?", session=session, principal=who))


def test_two_sessions_of_one_user_share_one_budget(tmp_path):
    svc = service(tmp_path)
    first = ask(svc, BOB, "web-1")
    assert first.tier == "heavy" and first.cost_usd > 0.00001
    again = ask(svc, BOB, "web-2")  # a new browser session: still bob's budget
    assert again.policy == "draft-only" and again.tier == "draft"
    via_key = ask(svc, BOB, "api:bob")
    assert via_key.policy == "draft-only"
    other = ask(svc, CAROL, "web-3")  # carol has her own
    assert other.tier == "heavy"
    status = svc.budget_status("web-2", principal=BOB)
    assert status["user"] == "bob" and status["session_spent_usd"] == pytest.approx(first.cost_usd)
    by_user = {r["key"]: r["cost_usd"] for r in svc.usage(by="user")}
    assert by_user["bob"] == pytest.approx(first.cost_usd)
    assert by_user["carol"] == pytest.approx(other.cost_usd)


def test_a_refusing_budget_names_the_user_not_the_session(tmp_path):
    svc = service(tmp_path, **{"budget.on_exceeded": "refuse"})
    ask(svc, BOB, "web-1")
    with pytest.raises(BudgetExceeded, match="bob has used"):
        ask(svc, BOB, "web-2")
    assert ask(svc, CAROL, "web-1").tier == "heavy"  # the same session id, another user


def test_the_ledger_books_each_row_to_its_user(tmp_path):
    led = Ledger(tmp_path / "ledger.sqlite3", PRICES).warm_up()
    spend = Attempt("anthropic", "claude-sonnet-4-6", "", latency_ms=1.0, outcome="ok",
                    input_tokens=1000, output_tokens=100)
    for session in ("tab-1", "tab-2"):
        with scope(session, "hr", user="bob"):
            led.record_attempts("heavy", [spend])
    with scope("tab-3", "hr"):  # no users file: no user
        led.record_attempts("heavy", [spend])
    one = (1000 * 3 + 100 * 15) / 1e6
    assert led.spent(user="bob") == pytest.approx(2 * one)
    assert led.spent(session="tab-1") == pytest.approx(one)
    s = make_settings(tmp_path, **{"budget.session_usd": 1.5 * one, "budget.on_exceeded": "refuse"})
    with pytest.raises(BudgetExceeded):
        Budget(s, led).check("tab-9", None, user="bob")
    assert not Budget(s, led).check("tab-1", None).degraded  # per session: under the limit
