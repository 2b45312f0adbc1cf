"""The usage ledger: tokens and cost of every generation attempt, in SQLite.

One row per attempt (failed, cancelled and retried ones too: a stream cut after 200
tokens was billed), attributed to the session, the signed-in user (with a users file;
else empty), collection and question that were current when it ran (``scope(...)``, a
context variable set per question task).
The file is ``settings.data_path / budget.ledger_file`` in WAL mode, so ``specrag
usage`` can read it while the app writes; one connection behind a lock makes it
thread-safe. ``summary(by="session" | "user" | "collection" | "model" | "day" | "stage" |
"route")`` and ``spent(session=..., user=..., day=...)`` are the API the app, the CLI and
budgets use.

Two ways in: ``record_attempts`` writes and commits before it returns (durable: a
caller that reports a row as recorded may be killed the next instant). The observer
hook ``call_finished`` runs on the asyncio event loop, where a commit (an fsync, a
busy reader) must not stall every other answer, so it only hands the rows to one
background writer thread. Every read (``summary``, ``spent``, ``rows``) and
``close()`` first waits for that queue to drain, and so does interpreter exit: a
read always sees every finished call.

Costs come from ``costs.cost`` with ``generation.prices``; local models cost 0.
Days are UTC dates.

Deliberately not here: budget decisions (``budget``), rendering (``cli.usage``).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import datetime as dt
import logging
import queue
import sqlite3
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, replace
from pathlib import Path

from specrag.generators import costs
from specrag.generators.base import Usage

log = logging.getLogger(__name__)
WRITER_IDLE_S = 5.0  # an idle writer thread ends; the next finished call starts another

BY = {"session": "session", "user": "user", "collection": "collection",
      "model": "backend || '/' || model",
      "day": "day", "stage": "stage", "route": "route"}
SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, day TEXT NOT NULL, session TEXT NOT NULL,
    collection TEXT NOT NULL, question_id TEXT NOT NULL, stage TEXT NOT NULL,
    backend TEXT NOT NULL, model TEXT NOT NULL, outcome TEXT NOT NULL, error TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    latency_ms REAL NOT NULL, route TEXT NOT NULL DEFAULT '', route_p REAL,
    user TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS usage_session ON usage(session);
CREATE INDEX IF NOT EXISTS usage_day ON usage(day);
"""


@dataclass(frozen=True)
class Scope:
    session: str = "anonymous"
    collection: str = ""
    question_id: str = ""
    route: str = ""  # the router's decision for the question ("draft" | "heavy"; "": not routed)
    route_p: float | None = None  # its P(the draft will do)
    user: str = ""  # the signed-in user ("": no users file)


_SCOPE: contextvars.ContextVar[Scope] = contextvars.ContextVar("specrag_ledger_scope",
                                                               default=Scope())


@contextlib.contextmanager
def scope(session: str = "anonymous", collection: str = "", question_id: str | None = None,
          user: str = ""):
    """Attribute the generations made inside to this session/user/collection/question."""
    token = _SCOPE.set(Scope(session or "anonymous", collection or "",
                             question_id or uuid.uuid4().hex[:12], user=user or ""))
    try:
        yield _SCOPE.get()
    finally:
        _SCOPE.reset(token)


def current_scope() -> Scope:
    return _SCOPE.get()


def tag_route(route) -> None:
    """Record the router's decision in the current question's scope: the generations it
    makes after this carry it (called in the question's own task, so it ends with it)."""
    _SCOPE.set(replace(_SCOPE.get(), route=route.route, route_p=round(route.p_draft, 4)))


def utc_day(ts: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(time.time() if ts is None else ts, dt.timezone.utc)
    return moment.date().isoformat()


_OPEN: weakref.WeakSet = weakref.WeakSet()  # ledgers whose queued rows exit must flush


@atexit.register
def _flush_open_ledgers() -> None:
    for ledger in list(_OPEN):
        with contextlib.suppress(Exception):
            ledger.flush()


class Ledger:
    def __init__(self, path: str | Path, prices: dict | None = None, clock=time.time):
        self.path = Path(path)
        self.prices = prices or {}
        self.clock = clock
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._pending: queue.Queue = queue.Queue()  # row batches for the writer thread
        self._writer: threading.Thread | None = None
        self._writer_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings) -> "Ledger":
        return cls(settings.data_path / settings.budget.ledger_file, settings.generation.prices)

    def warm_up(self) -> "Ledger":
        with self._lock:
            self._connect()
        return self

    def _connect(self) -> sqlite3.Connection:
        """The connection, opened on first use; the caller holds ``_lock``."""
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable on commit
            db.executescript(SCHEMA)
            columns = {r[1] for r in db.execute("PRAGMA table_info(usage)")}
            if "route" not in columns:  # a ledger written before routing existed
                db.execute("ALTER TABLE usage ADD COLUMN route TEXT NOT NULL DEFAULT ''")
                db.execute("ALTER TABLE usage ADD COLUMN route_p REAL")
            if "user" not in columns:  # ... or before budgets were per user
                db.execute("ALTER TABLE usage ADD COLUMN user TEXT NOT NULL DEFAULT ''")
            db.execute("CREATE INDEX IF NOT EXISTS usage_user ON usage(user)")
            db.row_factory = sqlite3.Row
            self._db = db
        return self._db

    def close(self) -> None:
        """Write what is queued, then close the connection (a later write opens it again;
        an idle writer thread ends by itself)."""
        self.flush()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- writing ------------------------------------------------------------------------
    def record_attempts(self, stage: str, attempts, where: Scope | None = None) -> int:
        """One row per attempt that reached a backend (skipped ones did not), committed
        before this returns."""
        rows = self._rows(stage, attempts, where or current_scope())
        if rows:
            self._write(rows)
        return len(rows)

    def _rows(self, stage: str, attempts, where: Scope) -> list[tuple]:
        now = self.clock()
        return [(now, utc_day(now), where.session, where.collection, where.question_id, stage,
                 a.backend, a.model, a.outcome, a.error[:300], a.input_tokens, a.output_tokens,
                 costs.cost(Usage(a.backend, a.model, a.input_tokens, a.output_tokens), self.prices),
                 a.latency_ms, where.route, where.route_p, where.user)
                for a in attempts if a.outcome != "skipped"]

    def _write(self, rows: list[tuple]) -> None:
        with self._lock:
            db = self._connect()
            db.executemany(
                "INSERT INTO usage (ts, day, session, collection, question_id, stage, backend, "
                "model, outcome, error, input_tokens, output_tokens, cost_usd, latency_ms, route, "
                "route_p, user) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            db.commit()

    def _enqueue(self, rows: list[tuple]) -> None:
        # under _writer_lock, as the writer's decision to end: while rows are queued there
        # is always exactly one writer, so they are written, in order, and flush() returns
        with self._writer_lock:
            self._pending.put(rows)
            if self._writer is None:
                self._writer = threading.Thread(target=self._drain, daemon=True,
                                                name="specrag-ledger")
                self._writer.start()
                _OPEN.add(self)

    def _drain(self) -> None:
        """The writer thread: one batch (one call's attempts) per transaction, in order;
        it ends after ``WRITER_IDLE_S`` with nothing to write."""
        while True:
            try:
                rows = self._pending.get(timeout=WRITER_IDLE_S)
            except queue.Empty:
                with self._writer_lock:
                    if self._pending.empty():
                        self._writer = None
                        return
                continue
            try:
                self._write(rows)
            except Exception:  # noqa: BLE001 - the answer is given; keep the writer alive
                log.warning("usage ledger: %d rows not recorded", len(rows), exc_info=True)
            finally:
                self._pending.task_done()

    def flush(self) -> None:
        """Wait until every queued row is written (a no-op with nothing queued)."""
        self._pending.join()

    # -- the observer protocol (``observe.ObservedGenerator``) ----------------------------
    def call_started(self, stage, gen, request):
        return current_scope()  # the scope of the task that started the call

    def call_finished(self, where: Scope, outcome) -> None:
        # on the event loop: hand the rows over, never wait for SQLite here
        rows = self._rows(outcome.stage, outcome.attempts, where)
        if rows:
            self._enqueue(rows)

    # -- reading ------------------------------------------------------------------------
    def _query(self, sql: str, args=()) -> list[sqlite3.Row]:
        self.flush()  # reads see every finished call
        with self._lock:
            return self._connect().execute(sql, args).fetchall()

    @staticmethod
    def _where(session=None, collection=None, day=None, since=None, user=None):
        conds, args = [], []
        for col, val, op in (("session", session, "="), ("collection", collection, "="),
                             ("day", day, "="), ("day", since, ">="), ("user", user, "=")):
            if val is not None:
                conds.append(f"{col} {op} ?")
                args.append(val)
        return (" WHERE " + " AND ".join(conds)) if conds else "", args

    def summary(self, by: str = "session", *, session: str | None = None,
                collection: str | None = None, since: str | None = None) -> list[dict]:
        """Totals grouped ``by`` session | user | collection | model | day | stage | route,
        costliest first."""
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

    def spent(self, *, session: str | None = None, day: str | None = None,
              user: str | None = None) -> float:
        where, args = self._where(session=session, day=day, user=user)
        row = self._query(f"SELECT COALESCE(SUM(cost_usd), 0) AS c FROM usage{where}", args)
        return float(row[0]["c"])

    def rows(self, **filters) -> list[dict]:
        where, args = self._where(**filters)
        return [dict(r) for r in self._query(f"SELECT * FROM usage{where} ORDER BY id", args)]
