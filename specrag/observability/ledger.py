"""The usage ledger: tokens and cost of every generation attempt, in SQLite.

One row per attempt (failed, cancelled and retried ones too: a stream cut after 200
tokens was billed), attributed to the user session, collection and question that
were current when it ran (``scope(...)``, a context variable set per question task).
The file is ``settings.data_path / budget.ledger_file`` in WAL mode, so ``specrag
usage`` can read it while the app writes; one connection behind a lock makes it
thread-safe. ``summary(by="session" | "collection" | "model" | "day" | "stage")`` and
``spent(session=..., day=...)`` are the API the app, the CLI and budgets use.

Costs come from ``costs.cost`` with ``generation.prices``; local models cost 0.
Days are UTC dates.

Deliberately not here: budget decisions (``budget``), rendering (``cli_usage``).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from specrag.generators.base import Usage
from specrag.pipeline import costs

BY = {"session": "session", "collection": "collection", "model": "backend || '/' || model",
      "day": "day", "stage": "stage"}
SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, day TEXT NOT NULL, session TEXT NOT NULL,
    collection TEXT NOT NULL, question_id TEXT NOT NULL, stage TEXT NOT NULL,
    backend TEXT NOT NULL, model TEXT NOT NULL, outcome TEXT NOT NULL, error TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    latency_ms REAL NOT NULL);
CREATE INDEX IF NOT EXISTS usage_session ON usage(session);
CREATE INDEX IF NOT EXISTS usage_day ON usage(day);
"""


@dataclass(frozen=True)
class Scope:
    session: str = "anonymous"
    collection: str = ""
    question_id: str = ""


_SCOPE: contextvars.ContextVar[Scope] = contextvars.ContextVar("specrag_ledger_scope",
                                                               default=Scope())


@contextlib.contextmanager
def scope(session: str = "anonymous", collection: str = "", question_id: str | None = None):
    """Attribute the generations made inside to this session/collection/question."""
    token = _SCOPE.set(Scope(session or "anonymous", collection or "",
                             question_id or uuid.uuid4().hex[:12]))
    try:
        yield _SCOPE.get()
    finally:
        _SCOPE.reset(token)


def current_scope() -> Scope:
    return _SCOPE.get()


def utc_day(ts: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(time.time() if ts is None else ts, dt.timezone.utc)
    return moment.date().isoformat()


class Ledger:
    def __init__(self, path: str | Path, prices: dict | None = None, clock=time.time):
        self.path = Path(path)
        self.prices = prices or {}
        self.clock = clock
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings) -> "Ledger":
        return cls(settings.data_path / settings.budget.ledger_file, settings.generation.prices)

    def warm_up(self) -> "Ledger":
        with self._lock:
            if self._db is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable on commit
                db.executescript(SCHEMA)
                db.row_factory = sqlite3.Row
                self._db = db
        return self

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- writing ------------------------------------------------------------------------
    def record_attempts(self, stage: str, attempts, where: Scope | None = None) -> int:
        """One row per attempt that reached a backend (skipped ones did not)."""
        where = where or current_scope()
        now = self.clock()
        rows = [(now, utc_day(now), where.session, where.collection, where.question_id, stage,
                 a.backend, a.model, a.outcome, a.error[:300], a.input_tokens, a.output_tokens,
                 costs.cost(Usage(a.backend, a.model, a.input_tokens, a.output_tokens), self.prices),
                 a.latency_ms) for a in attempts if a.outcome != "skipped"]
        if rows:
            self.warm_up()
            with self._lock:
                self._db.executemany(
                    "INSERT INTO usage (ts, day, session, collection, question_id, stage, backend, "
                    "model, outcome, error, input_tokens, output_tokens, cost_usd, latency_ms) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
                self._db.commit()
        return len(rows)

    # -- the observer protocol (``observe.ObservedGenerator``) ----------------------------
    def call_started(self, stage, gen, request):
        return current_scope()  # the scope of the task that started the call

    def call_finished(self, where: Scope, outcome) -> None:
        self.record_attempts(outcome.stage, outcome.attempts, where)

    # -- reading ------------------------------------------------------------------------
    def _query(self, sql: str, args=()) -> list[sqlite3.Row]:
        self.warm_up()
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    @staticmethod
    def _where(session=None, collection=None, day=None, since=None):
        conds, args = [], []
        for col, val, op in (("session", session, "="), ("collection", collection, "="),
                             ("day", day, "="), ("day", since, ">=")):
            if val is not None:
                conds.append(f"{col} {op} ?")
                args.append(val)
        return (" WHERE " + " AND ".join(conds)) if conds else "", args

    def summary(self, by: str = "session", *, session: str | None = None,
                collection: str | None = None, since: str | None = None) -> list[dict]:
        """Totals grouped ``by`` session | collection | model | day | stage, costliest first."""
        if by not in BY:
            raise ValueError(f"by must be one of {', '.join(BY)}, got '{by}'")
        where, args = self._where(session, collection, since=since)
        rows = self._query(
            f"SELECT {BY[by]} AS key, COUNT(DISTINCT question_id) AS questions, COUNT(*) AS attempts, "
            "SUM(outcome != 'ok' AND outcome != 'cancelled') AS failed, "
            "SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
            f"SUM(cost_usd) AS cost_usd FROM usage{where} GROUP BY key "
            "ORDER BY cost_usd DESC, key", args)
        return [dict(r) for r in rows]

    def spent(self, *, session: str | None = None, day: str | None = None) -> float:
        where, args = self._where(session=session, day=day)
        row = self._query(f"SELECT COALESCE(SUM(cost_usd), 0) AS c FROM usage{where}", args)
        return float(row[0]["c"])

    def rows(self, **filters) -> list[dict]:
        where, args = self._where(**filters)
        return [dict(r) for r in self._query(f"SELECT * FROM usage{where} ORDER BY id", args)]
