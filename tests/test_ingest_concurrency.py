"""Writes that must not wait on each other: a slow parse holds up neither a delete in its
own collection nor an upload to another one, and a file chosen twice is stored once."""

from __future__ import annotations

import threading

import pytest

from specrag.ingest.ingestor import Ingestor
from specrag.ui.documents import Library

WAIT_S = 60  # generous: these are ordering checks, not timings


class HeldIngestor(Ingestor):
    """Parses ``held*`` files only once the test lets it (a stand-in for a slow parse)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parsing = threading.Event()
        self.release = threading.Event()

    def parse(self, data, source):
        if source.startswith("held"):
            self.parsing.set()
            assert self.release.wait(WAIT_S)
        return super().parse(data, source)


def in_thread(fn, *args):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("value", fn(*args)), daemon=True)
    t.start()
    return t, out


def upload_files(tmp_path, *named):
    paths = []
    for name, text in named:
        p = tmp_path / "upload" / name
        p.parent.mkdir(exist_ok=True)
        p.write_text(text)
        paths.append(str(p))
    return paths


def test_a_slow_parse_blocks_neither_a_delete_nor_another_collection(tmp_path, settings,
                                                                       embedder):
    ing = HeldIngestor(settings, embedder=embedder)
    lib = Library(settings, ing, default="alpha")
    lib.upload(upload_files(tmp_path, ("gone.txt", "Old policy text. Delete me soon.")),
               "alpha")
    slow, out = in_thread(lib.upload, upload_files(
        tmp_path, ("held.txt", "Parental leave is 16 weeks. Ask HR for the form.")), "alpha")
    assert ing.parsing.wait(WAIT_S)
    # while that parse is in progress: a delete in its collection, an upload to another
    deleted, d_out = in_thread(lib.delete, "gone.txt", "alpha")
    other, o_out = in_thread(lib.upload, upload_files(
        tmp_path, ("beta.txt", "Expense receipts are due within 30 days.")), "beta")
    deleted.join(WAIT_S)
    other.join(WAIT_S)
    try:
        assert not deleted.is_alive() and not other.is_alive() and slow.is_alive()
        assert d_out["value"][0] == "Deleted gone.txt."
        assert o_out["value"][0].startswith("1 stored, 0 already present, 0 failed")
    finally:
        ing.release.set()
        slow.join(WAIT_S)
    assert out["value"][0].startswith("1 stored")
    assert [d.source for d in ing.store.documents("alpha")] == ["held.txt"]
    assert [d.source for d in ing.store.documents("beta")] == ["beta.txt"]


def test_a_file_chosen_twice_is_stored_once_and_reported(tmp_path, settings, embedder):
    lib = Library(settings, Ingestor(settings, embedder=embedder), default="docs")
    a, b = upload_files(tmp_path, ("a.txt", "Badges are grey. Visitors sign in."),
                        ("b.txt", "The office opens at 8."))
    summary, rows, docs = lib.upload([a, a, b], "docs")  # Gradio gives both copies one path
    assert summary.startswith("2 stored, 0 already present, 0 failed, 1 duplicate in this "
                              "batch (stored once)")
    assert [r[:2] for r in rows] == [["a.txt", "added"], ["b.txt", "added"],
                                     ["a.txt", "duplicate"]]
    assert sorted(r[0] for r in docs) == ["a.txt", "b.txt"]
    assert not list((tmp_path / "upload").iterdir())  # every temporary file is gone


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_hostile_file_fails_alone_in_a_batch(tmp_path, embedder, isolation):
    from specrag.bench.hostile_docs import nested_html
    from tests.support.env import make_settings

    settings = make_settings(tmp_path / "data", **{"chunking.parse_isolation": isolation,
                                                   "chunking.max_chars": 50_000})
    ing = Ingestor(settings, embedder=embedder)
    report = ing.ingest_bytes([("ok.txt", b"Lockers are on floor two."),
                               ("deep.html", nested_html(2_000).encode()),
                               ("long.txt", b"word " * 20_000),
                               ("fine.md", b"# Parking\n\nBikes go in the yard.")], "mixed")
    got = {r.source: (r.status, r.reason) for r in report.results}
    assert got["ok.txt"][0] == got["fine.md"][0] == "added"
    assert got["deep.html"] == ("failed", "deep.html: HTML nested too deeply (more than 256 "
                                          "levels)")
    assert got["long.txt"][0] == "failed" and "too much text" in got["long.txt"][1]
    assert sorted(d.source for d in ing.store.documents("mixed")) == ["fine.md", "ok.txt"]


def test_a_missing_upload_fails_alone_and_the_others_are_taken(tmp_path):
    from specrag.security.uploads import take_uploads

    a, b = upload_files(tmp_path, ("a.txt", "one"), ("b.txt", "two"))
    items, refused = take_uploads([a, str(tmp_path / "upload" / "gone.txt"), b])
    assert [n for n, _ in items] == ["a.txt", "b.txt"]
    assert refused == ["gone.txt: the upload could not be read (No such file or directory)"]
    assert not list((tmp_path / "upload").iterdir())
