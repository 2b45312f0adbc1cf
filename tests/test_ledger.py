"""The SQLite usage ledger: every attempt recorded per session/collection/model; budgets; CLI."""

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
import types

import pytest

from specrag.cli.main import main
from specrag.observability.budget import Budget, BudgetExceeded
from specrag.observability.ledger import Ledger, scope
from specrag.pipeline.service import Service
from specrag.resilience.attempts import Attempt
from specrag.resilience.failover import FallbackGenerator
from specrag.resilience.retry import RetryingGenerator, RetryPolicy
from tests.support.env import make_settings
from tests.support.resilience import (
    HEAVY_TEXT,
    Scripted,
    Sleeps,
    err,
    fake_engine,
    in_memory_telemetry,
)

PRICES = {"claude-sonnet-4-6": [3.0, 15.0]}


def ledger(tmp_path):
    return Ledger(tmp_path / "ledger.sqlite3", PRICES).warm_up()


def attempt(backend="anthropic", model="claude-sonnet-4-6", inp=1000, out=100, outcome="ok"):
    return Attempt(backend, model, "" if outcome == "ok" else "boom", latency_ms=12.0,
                   outcome=outcome, input_tokens=inp, output_tokens=out)


def test_rows_summaries_and_spend(tmp_path):
    led = ledger(tmp_path)
    with scope("alice", "hr"):
        led.record_attempts("heavy", [attempt(outcome="error", out=5), attempt()])
        led.record_attempts("draft", [attempt("llama-cpp", "qwen-0.5b")])
    with scope("bob", "eng"):
        led.record_attempts("heavy", [attempt(), Attempt("openai", "b", "circuit open",
                                                         outcome="skipped")])
    one = (1000 * 3 + 100 * 15) / 1e6
    by_session = {r["key"]: r for r in led.summary("session")}
    assert by_session["alice"]["attempts"] == 3 and by_session["alice"]["failed"] == 1
    assert by_session["alice"]["questions"] == 1
    assert by_session["alice"]["cost_usd"] == pytest.approx(one + (1000 * 3 + 5 * 15) / 1e6)
    assert by_session["bob"]["attempts"] == 1  # a skipped backend was never called
    by_model = {r["key"]: r for r in led.summary("model")}
    assert by_model["llama-cpp/qwen-0.5b"]["cost_usd"] == 0  # local models are free
    assert {r["key"] for r in led.summary("collection")} == {"hr", "eng"}
    assert led.spent(session="bob") == pytest.approx(one)
    assert led.summary("session", collection="eng")[0]["key"] == "bob"
    with pytest.raises(ValueError, match="by must be one of"):
        led.summary("person")


def test_wal_mode_and_concurrent_writers(tmp_path):
    led = ledger(tmp_path)

    def write(i):
        with scope(f"s{i % 4}", "c"):
            for _ in range(50):
                led.record_attempts("heavy", [attempt()])

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r["attempts"] for r in led.summary("session")) == 400
    db = sqlite3.connect(tmp_path / "ledger.sqlite3")  # another reader, as the CLI is
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT COUNT(*) FROM usage").fetchone()[0] == 400


class SlowConnection:
    """A connection whose writes take a second, as a busy disk or a long reader would."""

    def __init__(self, db):
        self.db, self.writes = db, 0

    def executemany(self, *args):
        time.sleep(1.0)
        self.writes += 1
        return self.db.executemany(*args)

    def __getattr__(self, name):
        return getattr(self.db, name)


def test_call_finished_does_not_wait_for_sqlite_and_reads_see_the_row(tmp_path):
    led = ledger(tmp_path)
    led._db = SlowConnection(led._db)
    outcome = types.SimpleNamespace(stage="heavy", attempts=(attempt(), attempt()))

    async def on_the_loop():
        where = led.call_started("heavy", None, {})
        t0 = time.perf_counter()
        led.call_finished(where, outcome)  # as ObservedGenerator calls it, on the loop
        return time.perf_counter() - t0

    with scope("alice", "hr"):
        took = asyncio.run(on_the_loop())
    assert took < 0.5  # the 1 s write happens on the writer thread
    rows = led.summary("session")  # waits for the queue: the row is there
    assert rows[0]["key"] == "alice" and rows[0]["attempts"] == 2 and led._db.writes == 1
    led.call_finished(led.call_started("heavy", None, {}), outcome)
    led.close()  # writes what is queued first
    assert len(Ledger(tmp_path / "ledger.sqlite3").rows()) == 4


def test_rows_queued_at_exit_are_written(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    child = (
        "import sys, types\n"
        "from specrag.observability.ledger import Ledger, scope\n"
        "from specrag.resilience.attempts import Attempt\n"
        "led = Ledger(sys.argv[1])\n"
        "outcome = types.SimpleNamespace(stage='heavy', attempts=[Attempt('anthropic', 'm')])\n"
        "with scope('exit', 'c'):\n"
        "    for _ in range(3):\n"
        "        led.call_finished(led.call_started('heavy', None, {}), outcome)\n")
    subprocess.run([sys.executable, "-c", child, str(path)], check=True, timeout=120)
    assert [r["session"] for r in Ledger(path).rows()] == ["exit"] * 3


def failing_then_ok_heavy():
    primary = Scripted("anthropic", "claude-sonnet-4-6",
                       [err(529), ("Pages are", err(None, msg="cut")), HEAVY_TEXT])
    return FallbackGenerator([RetryingGenerator(primary, RetryPolicy(max_attempts=3),
                                                sleep=Sleeps())])


def test_service_records_each_attempt_per_session_and_collection(tmp_path):
    s = make_settings(tmp_path, **{"generation.prices": PRICES})
    tel, spans, _ = in_memory_telemetry(s)
    svc = Service(s, fake_engine(s, heavy=failing_then_ok_heavy()), telemetry=tel)
    answer = asyncio.run(svc.aask("How much annual leave?", session="carol", collection="handbook"))
    assert answer.text == HEAVY_TEXT
    rows = svc.ledger.rows(session="carol")
    got = [(r["stage"], r["backend"], r["outcome"], r["collection"]) for r in rows]
    assert got == [("draft", "fake", "ok", "handbook"),
                   ("heavy", "anthropic", "error", "handbook"),
                   ("heavy", "anthropic", "error", "handbook"),
                   ("heavy", "anthropic", "ok", "handbook")]
    assert rows[2]["output_tokens"] == 2 and rows[2]["cost_usd"] > 0  # the cut stream was billed
    assert len({r["question_id"] for r in rows}) == 1
    # spans and ledger agree on the attempts
    chats = [sp for sp in spans.get_finished_spans() if sp.name.startswith("chat ")]
    assert len(chats) == len(rows)
    assert svc.usage("session")[0]["key"] == "carol"


def test_budget_degrades_to_draft_only_then_refuses(tmp_path):
    s = make_settings(tmp_path, **{"generation.prices": PRICES, "budget.session_usd": 0.00001})
    svc = Service(s, fake_engine(s))
    first = asyncio.run(svc.aask("How much annual leave?", session="dave"))
    assert first.tier == "heavy" and first.cost_usd > 0.00001
    second = asyncio.run(svc.aask("How much annual leave?", session="dave"))
    assert second.policy == "draft-only" and second.tier == "draft"
    other = asyncio.run(svc.aask("How much annual leave?", session="erin"))
    assert other.tier == "heavy"  # budgets are per session
    assert svc.budget_status("dave")["session_spent_usd"] == pytest.approx(first.cost_usd)

    refusing = Service(s.with_values(**{"budget.on_exceeded": "refuse"}), fake_engine(s),
                       ledger=svc.ledger)
    with pytest.raises(BudgetExceeded, match="this session has used"):
        asyncio.run(refusing.aask("How much annual leave?", session="dave"))


def test_daily_budget_counts_all_sessions(tmp_path):
    s = make_settings(tmp_path, **{"budget.day_usd": 0.01})
    led = ledger(tmp_path)
    with scope("x", "c"):
        led.record_attempts("heavy", [attempt(inp=4000)])  # $0.0135
    decision = Budget(s, led).check("someone-else", "lazy")
    assert decision.degraded and decision.policy == "draft-only"
    assert "daily budget" in decision.reason


def test_usage_command(tmp_path, capsys):
    data = tmp_path / "data"
    led = Ledger(data / "ledger.sqlite3", PRICES).warm_up()
    with scope("alice", "hr"):
        led.record_attempts("heavy", [attempt()])
    led.close()
    assert main(["--data-dir", str(data), "usage", "--by", "model"]) == 0
    out = capsys.readouterr().out
    assert "anthropic/claude-sonnet-4-6" in out and "0.0045" in out
    assert main(["--data-dir", str(data), "usage", "--json", "--session", "alice"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["key"] == "alice" and rows[0]["input_tokens"] == 1000
