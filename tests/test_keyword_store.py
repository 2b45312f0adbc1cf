"""The BM25 keyword index follows Chroma: re-ingest, replace, delete, crashes, hostile queries.

A real Chroma and a real SQLite, no model: chunks get small hand-made vectors, so these
tests check what is *visible* through ``Store.query_both``, not retrieval quality.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from specrag.retrieval.keyword import match_expression
from specrag.retrieval.store import Store
from specrag.types import Chunk, DocumentInfo
from tests.support.env import ROOT, make_settings

C = "kb"
Q = [1.0, 0.0, 0.0, 0.0]


# versions are sha256 of the bytes in real use; the store hides a pending version's string
# in every document (as the dense search does), so each document here gets its own
def chunks_of(doc_id: str, source: str, version: str, texts: list[str]) -> list[Chunk]:
    return [Chunk(id=f"{doc_id}:{version}:{i:05d}", doc_id=doc_id, source=source, text=t,
                  index=i, start=0, end=len(t), content_hash=f"h{i}", version=version)
            for i, t in enumerate(texts)]


def vectors(n: int) -> list[list[float]]:
    return [[1.0, 0.1 * (i + 1), 0.0, 0.0] for i in range(n)]


def begin_add(store: Store, doc_id: str, version: str, texts: list[str]) -> list[Chunk]:
    cs = chunks_of(doc_id, f"{doc_id}.txt", version, texts)
    store.begin(C, [(doc_id, f"{doc_id}.txt", version)])
    store.add_chunks(C, cs, vectors(len(cs)))
    return cs


def put(store: Store, doc_id: str, version: str, texts: list[str]) -> None:
    cs = begin_add(store, doc_id, version, texts)
    store.commit(C, [DocumentInfo(doc_id=doc_id, source=f"{doc_id}.txt", version=version,
                                  chunks=len(cs), size_bytes=1, format="text", ingested_at=0.0)])


def keyword_texts(store: Store, query: str, source=None) -> list[str]:
    return [h.chunk.text for h in store.query_both(C, query, Q, 50, source)[1]]


def rows(store: Store) -> int:
    return store.keywords.count(C)


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(make_settings(tmp_path / "data")).warm_up()


def test_reingest_replace_and_delete_keep_the_index_in_step(store):
    put(store, "a", "v1", ["invoice INV-7731 was paid in March", "the kitchen is cleaned"])
    put(store, "b", "b1", ["zebra crossings on Main Street"])
    assert keyword_texts(store, "INV-7731") == ["invoice INV-7731 was paid in March"]
    dense, kw = store.query_both(C, "INV-7731", Q, 50)
    assert kw[0].rank == 1 and kw[0].score == pytest.approx(
        next(h.score for h in dense if h.chunk.id == kw[0].chunk.id), abs=1e-4)
    put(store, "a", "v1", ["invoice INV-7731 was paid in March", "the kitchen is cleaned"])
    assert rows(store) == 3  # the same chunks again: no duplicates

    put(store, "a", "v2", ["invoice INV-9000 is overdue"])
    assert keyword_texts(store, "INV-7731 kitchen") == []
    assert keyword_texts(store, "INV-9000") == ["invoice INV-9000 is overdue"]
    assert rows(store) == 2 and store.count(C) == 2

    assert store.delete(C, "a")
    assert keyword_texts(store, "invoice") == [] and rows(store) == 1
    assert keyword_texts(store, "zebra", source="b.txt") == ["zebra crossings on Main Street"]
    assert keyword_texts(store, "zebra", source=["a.txt"]) == []
    store.drop_collection(C)
    assert not list(store.keywords.root.glob(f"{C}.sqlite3*"))


def test_uncommitted_and_half_replaced_chunks_stay_hidden_until_recovered(store):
    put(store, "a", "v1", ["the old policy allows remote work on Fridays"])
    begin_add(store, "a", "v2", ["the new policy forbids remote work entirely"])
    begin_add(store, "n", "n1", ["a brand new quokka document"])  # crash: no commit
    assert keyword_texts(store, "quokka") == []
    assert keyword_texts(store, "policy remote") == ["the old policy allows remote work on Fridays"]
    assert rows(store) == 3
    assert store.recover(C) == 2
    assert rows(store) == 1 and store.count(C) == 1
    assert keyword_texts(store, "policy quokka forbids") == [
        "the old policy allows remote work on Fridays"]


def test_an_interrupted_delete_is_finished_by_recover(store):
    put(store, "a", "v1", ["the vault code is 4417"])
    chunks, docs = store._pair(C)
    meta = store._record(docs, "a")
    store._put(docs, "a", {**meta, "stale": "v1"})  # delete() got this far, then a crash
    chunks.delete(where={"doc_id": "a"})
    assert keyword_texts(store, "vault") == []  # keyword row left, but Chroma has no chunk
    store.recover(C)
    assert rows(store) == 0 and store.document(C, "a") is None


def test_a_collection_older_than_the_index_is_filled_from_chroma(tmp_path, store):
    put(store, "a", "v1", ["the printer on floor 3 is broken"])
    store.keywords.drop(C)
    fresh = Store(store.settings).warm_up()
    assert keyword_texts(fresh, "printer") == ["the printer on floor 3 is broken"]
    assert fresh.keywords.filled(C)


HOSTILE = ['NEAR(a b)', 'a AND', '"', 'title:foo', '-x', '*', '^start', "'); drop table chunk;--",
           '😀 中文', 'x"y', 'OR', 'AND NOT', '()', ':', 'text:policy', '"unterminated',
           'a* b*', '+++', 'policy NOT remote', '{text}: x', '\x00', 'x' * 5000,
           ' '.join(['word'] * 500), "What's the policy (on remote work)?"]


@pytest.mark.parametrize("query", HOSTILE)
def test_fts_syntax_in_a_question_is_plain_text(store, query):
    put(store, "a", "v1", ["the policy allows remote work"])
    kw = keyword_texts(store, query)
    assert kw in ([], ["the policy allows remote work"])
    assert len(match_expression(query).split(" OR ")) <= 64


def test_operators_are_searched_as_words_not_obeyed():
    assert match_expression("cats NOT dogs") == '"cats" OR "NOT" OR "dogs"'
    assert match_expression('say "hi"') == '"say" OR """hi"""'
    assert match_expression("the of a ?") == ""


CHILD = r"""
import os, signal, sys
from specrag.retrieval.store import Store
from tests.support.env import make_settings
from tests.test_keyword_store import begin_add, put

store = Store(make_settings(sys.argv[1])).warm_up()
put(store, "keep", "v1", ["the committed armadillo document"])
if sys.argv[2] == "between":  # Chroma has the chunks, the keyword index not yet
    store.keywords.add = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
begin_add(store, "lost", "l1", ["an uncommitted armadillo document"])
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("moment", ["after-add", "between"])
def test_kill_9_mid_ingest_leaves_no_visible_keyword_rows(tmp_path, moment):
    data = tmp_path / "data"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(data), moment], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    store = Store(make_settings(data)).warm_up()
    assert keyword_texts(store, "armadillo") == ["the committed armadillo document"]
    assert store.count(C) == 2 and rows(store) == (2 if moment == "after-add" else 1)
    store.recover(C)
    assert rows(store) == 1 and store.count(C) == 1
    assert keyword_texts(store, "armadillo uncommitted") == ["the committed armadillo document"]
