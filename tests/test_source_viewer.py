"""The source viewer: a PDF's cited page with the chunk highlighted, a text passage in its
surrounding text, the collection ACL, stale chunks, kept originals (encrypted, pruned)."""

from __future__ import annotations

import base64
import io
import re

import pytest
import yaml

from specrag.ingest.originals import KeepingIngestor
from specrag.ingest.pdfpage import HIGHLIGHT, render_page
from specrag.security import users as users_mod
from specrag.security.access import PermissionDenied
from specrag.security.crypto import MAGIC, generate_key
from specrag.security.users import Principal, add_user
from specrag.types import SpecragError
from specrag.ui.chat import citations_html
from specrag.ui.viewer import SourceViewer
from tests.support.docs import make_pdf
from tests.support.env import make_settings

PAGE2 = "The garage has 40 spaces; book one by 09:00 the day before."
PDF = make_pdf("Welcome to the facilities guide.", PAGE2, "Bicycles go in the courtyard.")
PARAS = [f"Paragraph {n}: the {word} policy says item {n} is handled by team {n}."
         for n, word in enumerate(["travel", "expense", "laptop", "parking", "holiday",
                                   "security", "badge"], 1)]
MD = "# Office\n\n" + "\n\n".join(PARAS) + "\n"


def _settings(tmp_path, **values):
    return make_settings(tmp_path / "data", **{"chunking.parse_isolation": "inline",
                                               "chunking.chunk_size": 24,
                                               "chunking.chunk_overlap": 0, **values})


def _chunks(ing, collection, source):
    """The stored chunks of one document, in order (through the viewer's own read)."""
    doc = next(d for d in ing.store.documents(collection) if d.source == source)
    found = SourceViewer(ing.settings, ing.store)._chunks(collection, where={"doc_id": doc.doc_id})
    return sorted(found, key=lambda c: c.index)


def _png(html):
    from PIL import Image

    uri = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    return Image.open(io.BytesIO(base64.b64decode(uri))).convert("RGB")


@pytest.fixture
def kb(tmp_path, embedder):
    ing = KeepingIngestor(_settings(tmp_path), embedder=embedder)
    report = ing.ingest_bytes([("guide.pdf", PDF), ("office.md", MD.encode())], "docs")
    assert [r.status for r in report.results] == ["added", "added"]
    return ing


def test_render_page_highlights_the_passage_in_yellow():
    page = render_page(PDF, 2, "garage has 40\nspaces;  BOOK one", dpi=100)
    assert page.found and len(page.boxes) == 1
    from PIL import Image

    img = Image.open(io.BytesIO(page.png)).convert("RGB")
    left, top, right, bottom = page.boxes[0]
    # a point of background paper inside the box: white blended with the highlight
    inside = img.getpixel((right - 3, top + 2))
    alpha = HIGHLIGHT[3] / 255
    assert inside == pytest.approx(tuple(round(255 * (1 - alpha) + c * alpha)
                                         for c in HIGHLIGHT[:3]), abs=3)
    assert img.getpixel((right - 3, top - 8)) == (255, 255, 255)  # just above: plain paper
    assert not render_page(PDF, 2, "bicycles go in the courtyard").found  # another page
    with pytest.raises(SpecragError, match="no page 9"):
        render_page(PDF, 9, "x")


def test_a_pdf_chunk_shows_its_page_rendered_with_the_chunk_highlighted(kb):
    chunk = next(c for c in _chunks(kb, "docs", "guide.pdf") if c.page == 2)
    html = SourceViewer(kb.settings, kb.store, kb.originals).view(chunk.id, "docs")
    assert "<b>guide.pdf</b>" in html and "p.2" in html and "highlighted" in html
    img = _png(html)
    assert img.size[0] == round(595.2756 * 100 / 72)  # A4 at 100 dpi
    yellow = [(x, y) for x in range(0, img.size[0], 4) for y in range(0, img.size[1], 4)
              if (lambda p: p[2] < 200 and p[0] > 200 and p[1] > 200)(img.getpixel((x, y)))]
    assert yellow, "no highlight drawn"
    ys = [y for _, y in yellow]
    assert 120 < min(ys) and max(ys) < 200  # the one line near the top (y = 720 pt)


def test_a_text_chunk_shows_its_neighbours_and_is_marked(kb):
    chunks = _chunks(kb, "docs", "office.md")
    assert len(chunks) >= 5
    middle = chunks[len(chunks) // 2]
    html = SourceViewer(kb.settings, kb.store, kb.originals).view(middle.id, "docs")
    marked = re.search(r"<mark>(.*?)</mark>", html, re.S).group(1)
    assert marked == middle.text
    before, after = html.split("<mark>")[0], html.split("</mark>")[1]
    assert chunks[middle.index - 1].text.split(":")[0] in before  # the neighbour before
    assert chunks[middle.index + 1].text.split(":")[0] in after  # ... and after
    assert f"passage {middle.index + 1} of {len(chunks)}" in html
    first = SourceViewer(kb.settings, kb.store).view(chunks[0].id, "docs")
    assert first.index("<mark>") < first.index("sr-vpassage") + 30  # nothing before the first


def test_a_pdf_without_a_kept_original_is_shown_as_text(kb):
    chunk = _chunks(kb, "docs", "guide.pdf")[1]
    html = SourceViewer(kb.settings, kb.store).view(chunk.id, "docs")  # no originals
    assert "data:image/png" not in html and f"<mark>{chunk.text}</mark>" in html


def test_document_markup_is_escaped(tmp_path, embedder):
    ing = KeepingIngestor(_settings(tmp_path), embedder=embedder)
    evil = "Leave rules <img src=x onerror=alert(1)> apply <script>alert(2)</script> here."
    ing.ingest_bytes([("<b>evil</b>.txt", evil.encode())], "docs")
    chunk = _chunks(ing, "docs", "<b>evil</b>.txt")[0]
    html = SourceViewer(ing.settings, ing.store).view(chunk.id, "docs")
    assert "<img" not in html and "<script" not in html and "<b>evil" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_replaced_or_unknown_chunks_are_refused(kb):
    old = _chunks(kb, "docs", "office.md")[0]
    kb.ingest_bytes([("office.md", (MD + "\nA new closing line.\n").encode())], "docs")
    view = SourceViewer(kb.settings, kb.store, kb.originals).view
    with pytest.raises(SpecragError, match="no longer in collection"):
        view(old.id, "docs")  # its version was dropped with the replacement
    with pytest.raises(SpecragError, match="no source"):
        view(None, "docs")
    with pytest.raises(SpecragError, match="invalid"):
        view(old.id, "../etc")


def test_only_readers_of_the_collection_may_view_its_sources(tmp_path, embedder, monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)
    users = tmp_path / "users.yaml"
    for name, role in (("alice", "admin"), ("bob", "editor"), ("carol", "viewer")):
        add_user(users, name, role, f"{name}-password-1")
    data = yaml.safe_load(users.read_text())
    data["collections"] = {"secret": {"read": ["bob"], "write": ["bob"]}}
    users.write_text(yaml.safe_dump(data))
    settings = _settings(tmp_path, **{"security.users_file": str(users)})
    ing = KeepingIngestor(settings, embedder=embedder)
    ing.ingest_bytes([("guide.pdf", PDF)], "secret", principal=Principal("alice", "admin"))
    chunk = _chunks(ing, "secret", "guide.pdf")[0]
    viewer = SourceViewer(settings, ing.store, ing.originals)
    assert "data:image/png" in viewer.view(chunk.id, "secret", Principal("bob", "editor"))
    with pytest.raises(PermissionDenied, match="carol"):
        viewer.view(chunk.id, "secret", Principal("carol", "viewer"))
    with pytest.raises(PermissionDenied):
        viewer.view(chunk.id, "secret", None)  # nobody signed in


def test_originals_are_encrypted_at_rest_and_pruned(tmp_path, embedder, monkeypatch):
    monkeypatch.setenv("SPECRAG_TEST_KEY", generate_key())
    settings = _settings(tmp_path, **{"security.encrypt": True,
                                      "security.key_env": "SPECRAG_TEST_KEY"})
    ing = KeepingIngestor(settings, embedder=embedder)
    ing.ingest_bytes([("guide.pdf", PDF), ("office.md", MD.encode())], "docs")
    kept = list((settings.data_path / "originals" / "docs").iterdir())
    assert len(kept) == 1 and kept[0].read_bytes().startswith(MAGIC)  # the PDF only
    assert b"garage" not in kept[0].read_bytes() and b"%PDF" not in kept[0].read_bytes()
    chunk = next(c for c in _chunks(ing, "docs", "guide.pdf") if c.page == 2)
    assert "data:image/png" in SourceViewer(settings, ing.store, ing.originals).view(
        chunk.id, "docs")
    newer = make_pdf("Welcome to the facilities guide, second edition.", PAGE2)
    ing.ingest_bytes([("guide.pdf", newer)], "docs")  # replaced: only the new copy stays
    assert [p.name for p in kept[0].parent.iterdir()] != [kept[0].name]
    assert len(list(kept[0].parent.iterdir())) == 1
    ing.ingest_bytes([("broken.pdf", b"%PDF-1.7 not really a pdf")], "docs")  # failed: none
    assert len(list(kept[0].parent.iterdir())) == 1
    assert ing.delete("guide.pdf", "docs")
    assert list(kept[0].parent.iterdir()) == []


def test_citations_carry_the_chunk_and_its_collection(kb):
    from specrag.pipeline.events import Answer, Citation
    from specrag.types import Hit

    chunk = _chunks(kb, "docs", "guide.pdf")[0]
    answer = Answer(question="q", text="t [1]", tier="draft", policy="lazy",
                    citations=(Citation(1, chunk.source, chunk.page, chunk.text, chunk.id),),
                    hits=(Hit(chunk, 0.9, 1),))
    html = citations_html(answer)
    assert f'data-chunk="{chunk.id}" data-collection="docs"' in html
