"""Ingestion into a real Chroma with the real int8 embedder."""

import pytest

from specrag.ingest.ingestor import Ingestor, doc_id_for
from specrag.retrieval.retriever import Retriever
from specrag.retrieval.store import Store
from specrag.types import SpecragError
from tests.support.docs import write_bad_files, write_handbook
from tests.support.env import make_settings

pytestmark = pytest.mark.slow


def top(retriever, query, **kw):
    return retriever.retrieve(query, top_k=5, **kw).hits


@pytest.fixture
def retriever(ingestor):
    return Retriever(ingestor.settings, embedder=ingestor.embedder, store=ingestor.store)


def test_every_format_goes_in_and_bad_files_fail_alone(tmp_path, ingestor, retriever):
    good = write_handbook(tmp_path / "docs")
    bad = write_bad_files(tmp_path / "docs")
    seen = []
    paths = [good["leave.pdf"], bad["corrupt.pdf"], good["expenses.docx"], bad["empty.txt"],
             good["security.html"], bad["locked.pdf"], good["oncall.md"], bad["tool.exe"],
             good["notes.txt"]]
    report = ingestor.ingest(paths, on_progress=lambda d, t, r: seen.append((d, t, r.source)))
    status = {r.source: r for r in report.results}
    assert [r.source for r in report.results] == [p.name for p in paths]
    assert {n for n, r in status.items() if r.status == "added"} == set(good)
    for name, expect in [("corrupt.pdf", "corrupt"), ("empty.txt", "empty"),
                         ("locked.pdf", "encrypted"), ("tool.exe", "unsupported")]:
        assert status[name].status == "failed"
        assert expect in status[name].reason and "\n" not in status[name].reason
    assert [d for d, _, _ in seen] == list(range(1, 10)) and seen[-1][1] == 9

    hit = top(retriever, "how many weeks of parental leave")[0]
    assert (hit.chunk.source, hit.chunk.page) == ("leave.pdf", 2)
    hit = top(retriever, "deadline for expense receipts")[0]
    assert hit.chunk.source == "expenses.docx" and hit.chunk.heading == "Expenses"
    hit = top(retriever, "password rotation")[0]
    assert hit.chunk.source == "security.html" and hit.chunk.heading == "Passwords"
    assert "alert" not in hit.chunk.text
    hit = top(retriever, "when is the on-call handover")[0]
    assert hit.chunk.source == "oncall.md" and hit.chunk.heading == "Handover"
    assert len(hit.chunk.content_hash) == 16 and hit.chunk.end > hit.chunk.start
    assert 0 < hit.score <= 1 and hit.rank == 1
    docs = ingestor.store.documents("default")
    assert sorted(d.source for d in docs) == sorted(good)
    assert next(d for d in docs if d.source == "leave.pdf").pages == 2


def test_reingest_unchanged_replace_changed_and_delete(tmp_path, ingestor, retriever):
    good = write_handbook(tmp_path / "docs")
    ingestor.ingest([tmp_path / "docs"])
    count = ingestor.store.count("default")
    again = ingestor.ingest([tmp_path / "docs"])
    assert {r.status for r in again.results} == {"unchanged"}
    assert ingestor.store.count("default") == count

    good["oncall.md"].write_text("# On-call\n\nPages are acknowledged within 5 minutes by the "
                                 "primary; the secondary steps in after 20 minutes.\n")
    res = ingestor.ingest([good["oncall.md"]]).results[0]
    assert res.status == "replaced"
    hits = top(retriever, "on-call acknowledgement time", source="oncall.md")
    assert hits and all("5 minutes" in h.chunk.text for h in hits)
    assert not any("Mondays" in h.chunk.text for h in top(retriever, "handover on Mondays"))
    assert ingestor.store.count("default") == count - 1  # two sections became one chunk

    assert ingestor.delete("oncall.md") is True
    assert all(h.chunk.source != "oncall.md" for h in top(retriever, "on-call pages"))
    assert "oncall.md" not in [d.source for d in ingestor.store.documents("default")]
    assert ingestor.delete("oncall.md") is False


def test_uncommitted_chunks_are_invisible_and_recovered(tmp_path, ingestor, retriever):
    good = write_handbook(tmp_path / "docs")
    ingestor.ingest([good["notes.txt"]])
    store, s = ingestor.store, ingestor.settings
    # a crash between storing chunks and committing: the new document must stay hidden
    from dataclasses import replace

    from specrag.ingest.chunker import Chunker
    from specrag.ingest.parsers import parse_bytes

    doc = parse_bytes(good["oncall.md"].read_bytes(), "oncall.md")
    doc_id = doc_id_for("default", "oncall.md")
    chunks = Chunker(ingestor.embedder.tokenizer, 200, 40).chunk(doc, doc_id)
    store.begin("default", [(doc_id, "oncall.md", doc.sha256)])
    store.add_chunks("default", chunks, ingestor.embedder.encode_documents([c.text for c in chunks]))
    assert store.count("default") == 1 + len(chunks)
    assert all(h.chunk.source != "oncall.md" for h in top(retriever, "on-call handover"))
    assert [c.source for c in store.visible_chunks("default")] == ["notes.txt"]
    # a changed notes.txt half-written: the old version stays visible, the new one hidden
    new = replace(doc, source="notes.txt", sha256="e" * 64)
    nid = doc_id_for("default", "notes.txt")
    store.begin("default", [(nid, "notes.txt", new.sha256)])
    half = Chunker(ingestor.embedder.tokenizer, 200, 40).chunk(new, nid)[:1]
    store.add_chunks("default", half, ingestor.embedder.encode_documents([half[0].text]))
    kitchen = top(retriever, "kitchen cleaning")
    assert kitchen[0].chunk.source == "notes.txt" and "kitchen" in kitchen[0].chunk.text
    assert not any(h.chunk.version == "e" * 64 for h in kitchen)
    visible = store.visible_chunks("default")
    assert [c.source for c in visible] == ["notes.txt"] and visible[0].version != "e" * 64

    # restart: a new Ingestor on the same data dir recovers, then re-running completes it
    fresh = Ingestor(s, embedder=ingestor.embedder)
    report = fresh.ingest([good["oncall.md"], good["notes.txt"]])
    assert [r.status for r in report.results] == ["added", "unchanged"]
    assert fresh.store.count("default") == 1 + len(chunks)
    assert top(retriever, "on-call handover")[0].chunk.source == "oncall.md"


def test_writes_are_batched_under_chroma_limit(tmp_path, ingestor, monkeypatch):
    write_handbook(tmp_path / "docs")
    ingestor.warm_up()
    monkeypatch.setattr(ingestor.store, "_batch", 2)
    calls = []
    chunks_col = ingestor.store._pair("default")[0]
    real_add = type(chunks_col).add

    def spy(self, *a, **kw):
        calls.append(len(kw["ids"]))
        return real_add(self, *a, **kw)

    monkeypatch.setattr(type(chunks_col), "add", spy)
    report = ingestor.ingest([tmp_path / "docs"])
    assert sum(calls) == report.chunks_added and max(calls) <= 2 and len(calls) >= 3


def test_collections_are_separate_and_filter_by_source(tmp_path, ingestor, retriever):
    good = write_handbook(tmp_path / "docs")
    ingestor.ingest([good["leave.pdf"]], collection="hr")
    ingestor.ingest([good["security.html"]], collection="it")
    assert ingestor.store.collections() == ["hr", "it"]
    assert {h.chunk.source for h in top(retriever, "leave", collection="it")} == {"security.html"}
    assert {h.chunk.source for h in top(retriever, "leave", collection="hr",
                                        source="leave.pdf")} == {"leave.pdf"}
    with pytest.raises(SpecragError, match="does not exist"):
        retriever.retrieve("x", collection="finance")
    with pytest.raises(SpecragError, match="invalid"):
        ingestor.ingest([good["leave.pdf"]], collection="../etc")


@pytest.mark.server
def test_chroma_server_backend(tmp_path, embedder, chroma_server):
    s = make_settings(tmp_path, **{"store.chroma_url": chroma_server})
    ing = Ingestor(s, embedder=embedder)
    good = write_handbook(tmp_path / "docs")
    report = ing.ingest([tmp_path / "docs"], collection="srv")
    assert {r.status for r in report.results} == {"added"}
    assert not (tmp_path / "data" / "chroma").exists()  # nothing embedded on disk
    hits = Retriever(s, embedder=embedder).retrieve("disk encryption", top_k=3,
                                                    collection="srv").hits
    assert hits[0].chunk.source == "security.html"
    good["notes.txt"].write_text("The kitchen is now cleaned daily.\n")
    assert ing.ingest([good["notes.txt"]], collection="srv").results[0].status == "replaced"
    assert ing.delete("leave.pdf", collection="srv")
    assert sorted(d.source for d in Store(s).documents("srv")) == [
        "expenses.docx", "notes.txt", "oncall.md", "security.html"]


def test_same_name_twice_in_one_batch(tmp_path, ingestor):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "policy.txt").write_text("Remote work is allowed two days a week.\n")
    (b / "policy.txt").write_text("Remote work is allowed three days a week.\n")
    (tmp_path / "policy.txt").write_text("Remote work is allowed three days a week.\n")
    report = ingestor.ingest([a / "policy.txt", b / "policy.txt", tmp_path / "policy.txt"])
    assert [r.status for r in report.results] == ["added", "replaced", "unchanged"]
    assert ingestor.store.count("default") == 1
