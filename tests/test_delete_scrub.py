"""Deleted text leaves the disk (issue 47): after ``specrag docs delete`` (or a replacement)
no file under DATA_DIR holds the removed text: not Chroma's log (``embeddings_queue``),
not the free pages of ``chroma.sqlite3``, not the keyword index or its WAL, not the audit
samples that cited it. Real Chroma, real SQLite, the real CLI; hand-made vectors except
for the replacement test, which ingests through the real embedder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from specrag.cli.main import main
from specrag.observability.audit import AuditStore
from specrag.retrieval.store import Store
from specrag.types import Chunk, DocumentInfo
from tests.support.env import make_settings

C = "default"
MARKER = "zqxjvmarker7319"  # in the deleted document's text only
KEPT = "walrusfeeding"  # in the document that stays
Q = [1.0, 0.0, 0.0, 0.0]


def holding(root: Path, text: str) -> list[str]:
    """Files under ``root`` whose bytes contain ``text`` (sqlite files and free pages too)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and text.encode() in p.read_bytes())


def put(store: Store, doc_id: str, version: str, texts: list[str]) -> list[Chunk]:
    chunks = [Chunk(id=f"{doc_id}:{version}:{i:05d}", doc_id=doc_id, source=f"{doc_id}.md",
                    text=t, index=i, start=0, end=len(t), content_hash=f"h{i}", version=version)
              for i, t in enumerate(texts)]
    store.begin(C, [(doc_id, f"{doc_id}.md", version)])
    store.add_chunks(C, chunks, [[1.0, 0.1 * (i + 1), 0.0, 0.0] for i in range(len(chunks))])
    store.commit(C, [DocumentInfo(doc_id=doc_id, source=f"{doc_id}.md", version=version,
                                  chunks=len(chunks), size_bytes=1, format="markdown",
                                  ingested_at=0.0)])
    return chunks


def sample(settings, chunks: list[Chunk], answer: str) -> None:
    AuditStore.from_settings(settings).add({
        "ts": 0.0, "collection": C, "question": "what is it?",
        "context_ids": json.dumps([c.id for c in chunks]),
        "context": json.dumps([c.text for c in chunks]), "final": answer})


def texts(n: int, word: str) -> list[str]:
    return [f"paragraph {i} of the plan mentions {word} twice: {word}." for i in range(n)]


def delete_with_the_cli(data: Path, doc: str, capsys) -> None:
    assert main(["--data-dir", str(data), "docs", "delete", doc]) == 0
    assert f"deleted {doc}" in capsys.readouterr().out


def test_a_deleted_document_leaves_no_bytes_under_the_data_dir(tmp_path, capsys):
    data = tmp_path / "data"
    settings = make_settings(data)
    store = Store(settings).warm_up()
    secret = put(store, "secret", "v1", texts(40, MARKER))
    kept = put(store, "kept", "k1", texts(3, KEPT))
    sample(settings, secret[:2], f"It is {MARKER}.")
    sample(settings, kept, "Walruses.")
    before = holding(data, MARKER)
    assert "chroma/chroma.sqlite3" in before and "keyword/default.sqlite3" in before
    assert "audit.db" in before or "audit.db-wal" in before

    delete_with_the_cli(data, "secret.md", capsys)

    assert holding(data, MARKER) == []
    # what stays is whole and still found, through the same open client
    assert [h.chunk.doc_id for h in store.query(C, [Q], 10)[0]] == ["kept"] * 3
    assert {h.chunk.doc_id for h in store.query_both(C, KEPT, Q, 10)[1]} == {"kept"}
    assert [r["final"] for r in AuditStore.from_settings(settings).recent()] == ["Walruses."]
    assert KEPT.encode() in (data / "chroma" / "chroma.sqlite3").read_bytes()


def test_collections_made_before_get_their_log_purged_too(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = Path("data")  # relative, as ``--data-dir data`` gives it
    # as earlier versions made them: Chroma's default index sync (every 1,000 writes)
    old = chromadb.PersistentClient(path=str(data / "chroma"),
                                    settings=ChromaSettings(anonymized_telemetry=False))
    for name in ("specrag_chunks_default", "specrag_docs_default"):
        old.get_or_create_collection(name, embedding_function=None,
                                     configuration={"hnsw": {"space": "cosine"}})
    store = Store(make_settings(data)).warm_up()
    put(store, "secret", "v1", texts(5, MARKER))
    put(store, "kept", "k1", texts(2, KEPT))

    delete_with_the_cli(data, "secret.md", capsys)

    assert holding(data, MARKER) == []
    assert {h.chunk.doc_id for h in store.query(C, [Q], 10)[0]} == {"kept"}


def test_the_vector_index_files_hold_no_text(tmp_path):
    # hnswlib writes its unused slots from uninitialised memory: without glibc wiping
    # freed memory they held this text in 5 of 10 such stores
    for trial in range(10):
        data = tmp_path / f"data{trial}"
        store = Store(make_settings(data)).warm_up()
        put(store, "secret", "v1", texts(40, MARKER))
        put(store, "kept", "k1", texts(3, KEPT))
        assert [p.name for p in (data / "chroma").rglob("*.bin")
                if MARKER.encode() in p.read_bytes()] == []


def logged(chroma_dir: Path, text: str) -> int:
    """Rows of Chroma's log holding ``text``, read by a child process (two copies of SQLite
    in one process must not open the same file at once)."""
    code = ("import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); print(db.execute("
            "'select count(*) from embeddings_queue where instr(metadata, ?) > 0', "
            "(sys.argv[2],)).fetchone()[0])")
    out = subprocess.run([sys.executable, "-c", code, str(chroma_dir / "chroma.sqlite3"), text],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_without_scrubbing_the_log_is_still_purged(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECRAG_STORE__SCRUB_DELETED", "false")  # for the CLI's settings
    data = tmp_path / "data"
    store = Store(make_settings(data, **{"store.scrub_deleted": False})).warm_up()
    put(store, "secret", "v1", texts(5, MARKER))
    put(store, "kept", "k1", texts(2, KEPT))
    # the index syncs after every write, so the log keeps only the latest one
    assert logged(data / "chroma", MARKER) == 0 and logged(data / "chroma", KEPT) <= 1

    delete_with_the_cli(data, "secret.md", capsys)

    assert logged(data / "chroma", MARKER) == 0
    # only the free pages of chroma.sqlite3 may still hold it, until SQLite reuses them
    assert set(holding(data, MARKER)) <= {"chroma/chroma.sqlite3"}


@pytest.mark.slow
def test_a_replaced_version_leaves_no_bytes(tmp_path, ingestor):
    docs = tmp_path / "docs"
    docs.mkdir()
    plan = docs / "plan.md"
    plan.write_text("# Plan\n\n" + "\n\n".join(texts(12, MARKER)), encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\n" + "\n\n".join(texts(2, KEPT)), encoding="utf-8")
    ingestor.ingest([docs])
    assert holding(ingestor.settings.data_path, MARKER)

    plan.write_text("# Plan\n\nThe plan was withdrawn.", encoding="utf-8")
    report = ingestor.ingest([docs])

    assert {r.source: r.status for r in report.results} == {"plan.md": "replaced",
                                                            "other.md": "unchanged"}
    assert holding(ingestor.settings.data_path, MARKER) == []
    chunks = ingestor.store.chunks(C, where={"source": "plan.md"})
    assert [c.text for c in chunks] == ["# Plan\n\nThe plan was withdrawn."]
