"""Bounded work per document: caps inside the parsers, a parser process with time and
memory limits, and chunking that stays linear on text with no sentence breaks."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from specrag.bench.hostile_docs import (
    chinese_text,
    many_paragraph_docx,
    nested_html,
    recursive_form_pdf,
    server_log,
)
from specrag.ingest import limits, wordfile
from specrag.ingest.chunker import Chunker
from specrag.ingest.isolation import ParserPool, ParserProcess
from specrag.ingest.markup import html_depth, html_parts
from specrag.ingest.parsers import parse_bytes
from specrag.types import IngestError
from tests.support.docs import make_docx, rezip


def reason(data: bytes, name: str, **kw) -> str:
    with pytest.raises(IngestError) as err:
        parse_bytes(data, name, **kw)
    return str(err.value)


def char_tokenizer() -> Tokenizer:
    """Every character one token, so sizes are easy to check (a real one is slow to load)."""
    vocab = {chr(c): i for i, c in enumerate(range(32, 0x9FFF))}
    vocab["[UNK]"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return tok


# -- caps inside the parsers -----------------------------------------------------------------
def test_text_over_the_character_cap_is_refused_with_its_limit():
    assert reason(b"word " * 3_000, "long.txt", max_chars=10_000) == (
        "long.txt: too much text (more than 10,000 characters; the limit is chunking.max_chars)")
    assert parse_bytes(b"word " * 1_000, "ok.txt", max_chars=10_000).format == "text"


def test_a_pdf_drawing_a_form_inside_itself_stops_at_the_cap():
    data = recursive_form_pdf(levels=4)  # 10,000 copies of its text from under 2 kB
    assert len(data) < 4_000
    assert "too much text (more than 20,000 characters" in reason(data, "laughs.pdf",
                                                                  max_chars=20_000)


def test_docx_heading_styles_are_read_once_and_still_split_parts():
    doc = parse_bytes(many_paragraph_docx(2_000), "many.docx")
    assert [s.heading for s in doc.sections] == [f"Part {i}" for i in range(4)]
    assert doc.text.count("\n\n") >= 2_000
    # the style sheet's own names still decide: Title and Heading 1/2 as before
    small = parse_bytes(make_docx(), "report.docx")
    assert [s.heading for s in small.sections] == [None, "Annual Report", "Chapter One",
                                                   "Chapter Two"]


def test_docx_paragraph_cap_and_expansion_ratio(monkeypatch):
    monkeypatch.setattr(wordfile, "MAX_DOCX_BLOCKS", 500)
    assert "too many paragraphs (more than 500)" in reason(many_paragraph_docx(800), "p.docx")
    monkeypatch.setattr(wordfile, "EXPANSION_FLOOR", 1_000_000)
    bomb = rezip(make_docx(), extra={"word/media/zeros.bin": bytes(8_000_000)})
    msg = reason(bomb, "bomb.docx", max_bytes=10_000_000)
    assert "rejected as a possible zip bomb:" in msg and "times, to" in msg


@pytest.mark.parametrize("html,depth", [
    (nested_html(300), 300), (nested_html(50), 50), ("<p>a" * 5_000, 0),
    ("<ul>" + "<li>x" * 400 + "</ul>", 1), ("<!-- <div><div> -->" * 400 + "<div>x</div>", 1),
    ("<div" * 10_000, 0)])
def test_html_depth_counts_only_real_nesting(html, depth):
    assert min(html_depth(html, 1_000), 1_001) == depth


def test_deep_html_is_refused_and_wide_html_is_parsed():
    msg = reason(nested_html(10_000).encode(), "deep.html")
    assert msg == f"deep.html: HTML nested too deeply (more than {limits.MAX_HTML_DEPTH} levels)"
    parts = html_parts("<p>para " * 20_000)  # was quadratic in the number of siblings
    assert parts[0][0].count("para") == 20_000


# -- the parser process --------------------------------------------------------------------
def test_parser_process_parses_and_is_reused():
    pool = ParserPool()
    try:
        a = pool.parse(b"First. Second.", "a.txt", timeout_s=60, memory_mb=1024)
        b = pool.parse(b"<h1>T</h1><p>x</p>", "b.html", timeout_s=60, memory_mb=1024)
        assert (a.format, b.format, b.sections[0].heading) == ("text", "html", "T")
        assert pool.started == 1  # the idle child took the second file
        with pytest.raises(IngestError, match="unsupported binary file"):
            pool.parse(b"\x00\x01\x02", "x.bin", timeout_s=60, memory_mb=1024)
        assert pool.parse(b"again", "c.txt", timeout_s=60, memory_mb=1024).text == "again"
        assert pool.started == 1  # a refused file leaves the child healthy
    finally:
        pool.close()


def test_parser_process_time_and_memory_limits_end_one_file_only():
    pool = ParserPool()
    try:
        slow = ("<p>" + "word " * 50) * 20_000  # 5 MB of HTML: seconds to parse
        with pytest.raises(IngestError, match=r"^slow.html: parsing took longer than 0.3 s"):
            pool.parse(slow.encode(), "slow.html", timeout_s=0.3, memory_mb=2048,
                       max_bytes=10**9, max_chars=10**9)
        with pytest.raises(IngestError, match=r"^big.txt: needs more than 300 MB of memory"):
            pool.parse(b"word " * 40_000_000, "big.txt", timeout_s=120, memory_mb=300,
                       max_bytes=10**9, max_chars=10**9)
        assert pool.parse(b"fine", "ok.txt", timeout_s=60, memory_mb=2048).text == "fine"
    finally:
        pool.close()


def test_a_crashing_parser_fails_its_file_and_the_next_one_works():
    proc = ParserProcess(1024)
    killer = threading.Timer(0.5, lambda: os.kill(proc._proc.pid, signal.SIGKILL))
    killer.start()
    with pytest.raises(IngestError, match=r"^slow.html: the parser process was killed by "
                                          r"SIGKILL while reading this file$"):
        proc.parse("slow.html", 60, data=(("<p>" + "w " * 50) * 50_000).encode(),
                   filename="slow.html", max_bytes=10**9, max_chars=10**9)
    killer.cancel()
    assert not proc.alive
    pool = ParserPool()
    try:
        assert pool.parse(b"next", "n.txt", timeout_s=60, memory_mb=1024).text == "next"
    finally:
        pool.close()


# -- chunking ------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [chinese_text(30_000), server_log(400), "x" * 60_000])
def test_run_on_text_is_cut_into_bounded_windows_covering_it(text):
    chunker = Chunker(char_tokenizer(), chunk_size=200, chunk_overlap=40)
    doc = parse_bytes(text.encode(), "t.txt")
    chunks = chunker.chunk(doc, "d")
    counter = chunker._tok
    assert all(len(counter.encode(c.text, add_special_tokens=False).ids) <= 200 for c in chunks)
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
        assert doc.text[c.start:c.end] == c.text
    assert not {i for i, ch in enumerate(doc.text) if not ch.isspace()} - covered


def test_chinese_sentences_end_at_full_width_marks():
    text = "".join(f"第{i}句话说明休假政策。" for i in range(200))
    chunks = Chunker(char_tokenizer(), 64, 8).chunk(parse_bytes(text.encode(), "zh.txt"), "d")
    assert len(chunks) > 1 and all(c.text.endswith("。") for c in chunks)
