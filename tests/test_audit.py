import asyncio
import sqlite3

from specrag.observability.audit import Auditor
from tests.support.env import make_settings
from tests.support.fakes import engine


class MeanScorer:
    def predict(self, pairs):
        return [0.25 if "leave" in p else 0.75 for _, p in pairs]


def test_sampled_answers_are_stored_and_scored_in_the_background(tmp_path):
    # three draft chunks, so the context relevance is a mean over more than one
    eng, _, _ = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].",
                       **{"retrieval.draft_k": 3})
    auditor = Auditor(eng.settings, verifier=eng.verifier, reranker=MeanScorer(), rate=1.0, seed=1)
    eng.auditor = auditor
    for _ in range(3):
        asyncio.run(eng.aask("How much annual leave?"))
    auditor.wait()
    rows = auditor.store.recent()
    assert len(rows) == 3
    row = rows[0]
    assert row["question"] == "How much annual leave?" and row["tier"] == "draft"
    assert row["accepted"] == 1 and row["faithfulness"] == 1.0
    assert 0.25 < row["context_relevance"] < 0.75  # a mean of per-chunk relevance
    assert auditor.store.summary()["samples"] == 3 and auditor.store.summary()["scored"] == 3
    # persisted: a fresh connection sees the same rows
    with sqlite3.connect(eng.settings.data_path / "audit.db") as db:
        assert db.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 3


def test_sampling_rate_is_respected(tmp_path):
    s = make_settings(tmp_path)
    auditor = Auditor(s, rate=0.05, seed=7)

    class A:  # the few fields the auditor reads
        question, text, tier, policy, accepted = "q", "a", "draft", "lazy", True
        heavy = draft = verdict = None
        timings_ms = {}

    kept = sum(auditor.maybe_record(A()) is not None for _ in range(2000))
    assert 60 <= kept <= 140  # 5% of 2000 = 100
    assert Auditor(s, rate=0.0).maybe_record(A()) is None


def test_audit_cli_reads_the_store(tmp_path, capsys, monkeypatch):
    from specrag.cli.main import main

    eng, _, _ = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].")
    eng.auditor = Auditor(eng.settings, verifier=eng.verifier, rate=1.0)
    asyncio.run(eng.aask("How much annual leave?"))
    eng.auditor.wait()
    assert main(["--data-dir", str(eng.settings.data_path), "audit"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 samples, 1 scored; faithfulness 1.00") and "[draft]" in out


def test_audit_text_is_sealed_on_disk_when_encryption_is_on(tmp_path, monkeypatch):
    import base64
    import os

    monkeypatch.setenv("SPECRAG_ENCRYPTION_KEY", base64.b64encode(os.urandom(32)).decode())
    eng, _, _ = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].",
                       **{"security.encrypt": True})
    eng.auditor = Auditor(eng.settings, verifier=eng.verifier, rate=1.0)
    asyncio.run(eng.aask("How much annual leave?"))
    eng.auditor.wait()
    raw = b"".join(p.read_bytes() for p in eng.settings.data_path.glob("audit.db*"))
    assert b"annual leave" not in raw and b"25 days" not in raw  # nothing readable on disk
    row = eng.auditor.store.recent()[0]
    assert row["question"] == "How much annual leave?" and "25 days" in row["final"]
    assert row["faithfulness"] == 1.0  # scored from the plaintext in memory
