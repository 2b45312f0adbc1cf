import pytest

from specrag.ingest.chunker import Chunker
from specrag.types import ParsedDocument, Section

pytestmark = pytest.mark.slow  # needs the real tokenizer (shared, loaded once)


def _doc(sections: list[tuple[str, int | None, str | None]]) -> ParsedDocument:
    text, secs = "", []
    for body, page, heading in sections:
        if secs:
            text += "\n\n"
        start = len(text)
        text += body
        secs.append(Section(body, start, page, heading))
    return ParsedDocument("doc.txt", "text", text, tuple(secs), "f" * 64, len(text))


SENT = "The expense policy allows claims for travel, meals and lodging within thirty days. "


def test_chunks_respect_size_and_overlap(embedder):
    chunker = Chunker(embedder.tokenizer, chunk_size=64, chunk_overlap=16)
    paras = [(SENT * 3).strip() for _ in range(8)]
    doc = _doc([("\n\n".join(paras), None, None)])
    chunks = chunker.chunk(doc, "d1")
    assert len(chunks) > 3
    for c in chunks:
        assert doc.text[c.start:c.end] == c.text
        assert embedder.count_tokens(c.text) <= 64 + 4  # piece sums may differ by joins
        assert c.text[0].isalnum() and c.text.rstrip()[-1] == "."  # sentence boundaries
    # consecutive chunks overlap by whole sentences
    assert any(chunks[i].start < chunks[i - 1].end for i in range(1, len(chunks)))
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert len({c.id for c in chunks}) == len(chunks)


def test_pages_and_headings_are_kept(embedder):
    chunker = Chunker(embedder.tokenizer, chunk_size=200, chunk_overlap=20)
    doc = _doc([("Leave starts on the first day.", 1, "Leave"),
                ("Expenses need receipts.", 2, "Expenses"),
                ("Laptops must be encrypted.", 2, "Security")])
    chunks = chunker.chunk(doc, "d2")
    assert [(c.page, c.heading) for c in chunks] == [(1, "Leave"), (2, "Expenses"), (2, "Security")]


def test_run_on_sentence_is_cut_by_tokens(embedder):
    chunker = Chunker(embedder.tokenizer, chunk_size=32, chunk_overlap=8)
    words = " ".join(f"word{i}" for i in range(400))  # no sentence end at all
    chunks = chunker.chunk(_doc([(words, None, None)]), "d3")
    assert len(chunks) > 5
    assert all(embedder.count_tokens(c.text) <= 34 for c in chunks)
    assert chunks[0].text.startswith("word0") and chunks[-1].text.endswith("word399")


def test_same_text_gives_same_hashes_and_bad_sizes_rejected(embedder):
    chunker = Chunker(embedder.tokenizer, chunk_size=64, chunk_overlap=8)
    a = chunker.chunk(_doc([(SENT * 10, None, None)]), "d")
    b = chunker.chunk(_doc([(SENT * 10, None, None)]), "d")
    assert [c.content_hash for c in a] == [c.content_hash for c in b]
    with pytest.raises(ValueError):
        Chunker(embedder.tokenizer, chunk_size=64, chunk_overlap=40)


def test_a_run_without_spaces_is_capped_in_characters(embedder):
    """30,000 letters with no space were one embedder token, so one chunk: 16,560 tokens
    of the draft model's prompt. Every chunk now holds at most max_chars characters."""
    chunker = Chunker(embedder.tokenizer, chunk_size=200, chunk_overlap=40)
    leave = "Employees get 25 days of annual leave per year."
    for junk in ("x" * 30_000, "7" * 200_000, "ab" * 15_000 + " " + "Zq9" * 5_000):
        chunks = chunker.chunk(_doc([(leave + " " + junk, None, None)]), "d4")
        assert chunker.max_chars == 1600
        assert max(len(c.text) for c in chunks) <= 1600
        assert leave in chunks[0].text  # the real sentence keeps its own chunk start
        covered = sum(c.end - c.start for c in chunks)
        assert covered >= len(leave) + len(junk)  # nothing is lost, only cut


def test_ordinary_text_is_chunked_as_before_the_character_cap(embedder):
    paras = "\n\n".join((SENT * 3).strip() for _ in range(12))
    doc = _doc([(paras, None, None)])
    capped = Chunker(embedder.tokenizer, 200, 40).chunk(doc, "d5")
    loose = Chunker(embedder.tokenizer, 200, 40, max_chars=10**9).chunk(doc, "d5")
    assert [(c.start, c.end) for c in capped] == [(c.start, c.end) for c in loose]
    with pytest.raises(ValueError):
        Chunker(embedder.tokenizer, 200, 40, max_chars=100)
