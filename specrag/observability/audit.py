"""Quality audit of live traffic: sample answered questions, score them in the background.

``Auditor(settings).maybe_record(answer, collection)`` stores a ``audit.sample_rate``
fraction of answers (question, context chunk ids, draft, verdict, final answer,
timings) in SQLite under the data directory and queues them for scoring by a single
background thread: faithfulness (specrag's verifier over the final answer and the
chunks it was written from) and context relevance (the reranker's mean P(relevant)
for the question and those chunks). ``summary()`` and ``recent()`` feed ``specrag
audit`` and the app's metrics view. Writes are one transaction each (WAL mode), so
a crash loses at most the sample in flight and never corrupts the file. A sample's
question, context and answer hold document text: ``forget(chunk_ids)`` deletes the
samples that cite removed chunks (the store calls it on delete and replacement), with
SQLite's ``secure_delete`` on and the WAL truncated, so their bytes leave the file.

Deliberately not here: acting on scores (alerting, re-answering).
"""

from __future__ import annotations

import json
import queue
import random
import sqlite3
import threading
import time
from pathlib import Path

from specrag.security.crypto import DataFiles

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
  id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, collection TEXT, question TEXT,
  context_ids TEXT, context TEXT, draft TEXT, verdict_score REAL, accepted INTEGER,
  final TEXT, tier TEXT, policy TEXT, timings TEXT,
  faithfulness REAL, context_relevance REAL, scored_at REAL)
"""


SEALED_COLUMNS = ("question", "context", "draft", "final")  # document and user text
AUDIT_FILE = "audit.db"  # under data_dir


class AuditStore:
    def __init__(self, path: str | Path, files=None):
        self.path = Path(path)
        # with ``security.encrypt`` on, text columns are AES-GCM sealed (security.crypto)
        self.files = files
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    @classmethod
    def from_settings(cls, settings) -> "AuditStore":
        """The data directory's audit store, sealing and unsealing as ``security.encrypt``
        says: the one way the auditor, ``specrag audit`` and the app open it (a store
        opened without the key would show ciphertext)."""
        return cls(settings.data_path / AUDIT_FILE, DataFiles(settings))

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA secure_delete=ON")  # deleted samples are zeroed on disk
            self._db.execute(SCHEMA)
        return self._db

    def add(self, row: dict) -> int:
        if self.files is not None:
            row = {k: (self.files.seal(v) if k in SEALED_COLUMNS and isinstance(v, str) else v)
                   for k, v in row.items()}
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._lock:
            cur = self._conn().execute(f"INSERT INTO samples ({cols}) VALUES ({marks})",
                                       list(row.values()))
            return cur.lastrowid

    def score(self, sample_id: int, faithfulness: float | None, relevance: float | None) -> None:
        with self._lock:
            self._conn().execute("UPDATE samples SET faithfulness=?, context_relevance=?, "
                                 "scored_at=? WHERE id=?",
                                 (faithfulness, relevance, time.time(), sample_id))

    def recent(self, limit: int = 20) -> list[dict]:
        with self._lock:
            cur = self._conn().execute("SELECT * FROM samples ORDER BY id DESC LIMIT ?", (limit,))
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
        if self.files is not None:
            rows = [{k: (self.files.unseal(v) if k in SEALED_COLUMNS else v) for k, v in r.items()}
                    for r in rows]
        return rows

    def forget(self, chunk_ids) -> int:
        """Delete the samples whose context cites any of ``chunk_ids``; how many went."""
        wanted = set(chunk_ids)
        with self._lock:
            db = self._conn()
            rows = db.execute("SELECT id, context_ids FROM samples").fetchall()
            gone = [(i,) for i, ids in rows if wanted.intersection(_ids(ids))]
            if gone:
                db.execute("BEGIN")
                db.executemany("DELETE FROM samples WHERE id = ?", gone)
                db.execute("COMMIT")
                # the WAL still holds the old pages until a checkpoint truncates it
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return len(gone)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def summary(self) -> dict:
        with self._lock:
            n, scored, faith, rel, acc = self._conn().execute(
                "SELECT COUNT(*), COUNT(scored_at), AVG(faithfulness), AVG(context_relevance), "
                "AVG(accepted) FROM samples").fetchone()
        return {"samples": n, "scored": scored, "faithfulness": faith,
                "context_relevance": rel, "acceptance_rate": acc}


def _ids(context_ids: str | None) -> list[str]:
    try:
        ids = json.loads(context_ids or "[]")
    except ValueError:
        return []
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


class Auditor:
    def __init__(self, settings, verifier=None, reranker=None, rate: float | None = None,
                 seed: int | None = None):
        self.settings = settings
        self.rate = settings.audit.sample_rate if rate is None else rate
        self.store = AuditStore.from_settings(settings)
        self.verifier = verifier
        self.reranker = reranker
        self._rng = random.Random(seed)
        self._queue: queue.Queue = queue.Queue(maxsize=1000)
        self._worker: threading.Thread | None = None

    def maybe_record(self, answer, collection: str = "") -> int | None:
        """Store the answer with probability ``rate``; returns its sample id or None."""
        if self.rate <= 0 or self._rng.random() >= self.rate:
            return None
        chunks = answer.heavy.chunks if answer.heavy else (answer.draft.chunks if answer.draft else ())
        sample_id = self.store.add({
            "ts": time.time(), "collection": collection, "question": answer.question,
            "context_ids": json.dumps([c.id for c in chunks]),
            "context": json.dumps([c.text for c in chunks]),
            "draft": answer.draft.text if answer.draft else None,
            "verdict_score": answer.verdict.score if answer.verdict else None,
            "accepted": int(answer.accepted), "final": answer.text, "tier": answer.tier,
            "policy": answer.policy, "timings": json.dumps(answer.timings_ms)})
        try:
            self._queue.put_nowait((sample_id, answer.question, answer.text,
                                    [c.text for c in chunks]))
        except queue.Full:  # scoring is best effort; the sample stays, unscored
            return sample_id
        self._start()
        return sample_id

    def _start(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, daemon=True, name="specrag-audit")
            self._worker.start()

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=5)
            except queue.Empty:
                return  # idle: the thread ends, the next sample starts a new one
            self.score_one(*item)
            self._queue.task_done()

    def score_one(self, sample_id: int, question: str, final: str, context: list[str]) -> None:
        faith = rel = None
        if context and final:
            if self.verifier is not None:
                verdict = self.verifier.verify(final, context)
                faith = None if verdict.abstained else verdict.score
            if self.reranker is not None:
                scores = self.reranker.predict([(question, c) for c in context])
                rel = float(sum(scores) / len(scores))
        self.store.score(sample_id, faith, rel)

    def wait(self, timeout: float = 30.0) -> None:
        """Block until queued samples are scored (for tests and shutdown)."""
        deadline = time.time() + timeout
        while self._queue.unfinished_tasks and time.time() < deadline:
            time.sleep(0.05)
