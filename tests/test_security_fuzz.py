"""Fuzz the parsers and the chunker: any input either parses or fails with a clean IngestError.

Deterministic by default (CI); ``SPECRAG_FUZZ_RANDOM=1`` explores new inputs each run and
``SPECRAG_FUZZ_SCALE=10`` runs ten times as many cases.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from specrag.ingest.chunker import Chunker
from specrag.ingest.parsers import SUPPORTED_EXTENSIONS, parse_bytes
from specrag.types import IngestError, ParsedDocument
from tests.support.docs import HTML, MARKDOWN, make_docx, make_pdf

SCALE = float(os.environ.get("SPECRAG_FUZZ_SCALE", "1"))
RANDOM = os.environ.get("SPECRAG_FUZZ_RANDOM") == "1"
COUNTS: dict[str, int] = {}


def fuzz(examples: int):
    """Hypothesis settings for one fuzz target."""
    return hsettings(max_examples=max(1, int(examples * SCALE)), deadline=None, database=None,
                     derandomize=not RANDOM,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.function_scoped_fixture])


def count(target: str) -> None:
    COUNTS[target] = COUNTS.get(target, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    """After the module: how many cases each target ran (for reports; not a test)."""
    yield
    if COUNTS:
        print("\nfuzz cases:", ", ".join(f"{k}={v}" for k, v in COUNTS.items()),
              f"(total {sum(COUNTS.values())})")


ODD_NAMES = ["noext", "x.exe", "a.zip", "..", "", "d/../e.pdf", "C:\\x.docx"]
NAMES = st.one_of(st.sampled_from([f"f{e}" for e in SUPPORTED_EXTENSIONS] + ODD_NAMES),
                  st.text(max_size=40))


def check_parse(data: bytes, name: str) -> ParsedDocument | None:
    try:
        doc = parse_bytes(data, name, max_bytes=2_000_000, max_pages=50)
    except IngestError as err:
        msg = str(err)
        assert msg and "\n" not in msg and "Traceback" not in msg
        return None
    assert doc.text and doc.sections and doc.size_bytes == len(data)
    for s in doc.sections:  # offsets point into the text
        assert doc.text[s.start:s.start + len(s.text)] == s.text
    return doc


@st.composite
def mutated(draw, seed: bytes):
    """A valid file damaged the way transfers and attackers damage files."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "dup", "zero"]))
        i = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            data = data[:i] if draw(st.booleans()) else data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(max_size=64))
        elif op == "dup":
            data[i:i] = data[i:i + draw(st.integers(1, 512))]
        elif op == "zero":
            data[i:i + 64] = bytes(len(data[i:i + 64]))
    return bytes(data)


@fuzz(1000)
@given(st.binary(max_size=4096), NAMES)
def test_random_bytes_any_name(data, name):
    count("random bytes")
    doc = check_parse(data, name)  # asserts a clean error or a consistent document
    assert doc is None or doc.sha256


@fuzz(400)
@given(mutated(make_pdf("Annual leave is 25 days.", "Parental leave is 16 weeks.")))
def test_mutated_pdf(data):
    count("mutated PDF")
    doc = check_parse(data, "doc.pdf")
    assert doc is None or doc.format == "pdf"


@fuzz(300)
@given(mutated(make_docx()))
def test_mutated_docx(data):
    count("mutated DOCX")
    doc = check_parse(data, "doc.docx")
    assert doc is None or doc.format == "docx"


@fuzz(500)
@given(st.sampled_from([(HTML, "p.html"), (MARKDOWN.encode(), "g.md")]).flatmap(
    lambda pair: st.tuples(mutated(pair[0]), st.just(pair[1]))))
def test_mutated_markup(pair):
    count("mutated HTML/Markdown")
    doc = check_parse(*pair)
    assert doc is None or doc.format in ("html", "markdown", "text")


TOKENS = ["Leave", "is", "25", "days", ".", "!", "?", " ", " ", "\n", "\n\n", "# Title\n",
          "## Sub\n", "```\n", "<p>", "</p>", "<h2>", "</h2>", "<script>x()</script>", "- item\n",
          "|", "==\n",
          "\u00e9", "\u4e2d\u6587", "\u200b", "\t", "\r\n", "word" * 30, "\U0001f600", "&amp;"]
TEXTS = st.one_of(st.text(max_size=3000),
                  st.lists(st.sampled_from(TOKENS), max_size=400).map("".join))


@pytest.fixture(scope="module")
def chunker(embedder):
    return Chunker(embedder.tokenizer, chunk_size=32, chunk_overlap=8)


@fuzz(500)
@given(text=TEXTS, ext=st.sampled_from([".txt", ".md", ".html"]))
def test_chunker_on_any_parsed_text(chunker, embedder, text, ext):
    count("chunker")
    doc = check_parse(text.encode("utf-8", "surrogatepass"), "doc" + ext)
    if doc is None:
        return
    chunks = chunker.chunk(doc, "d", "fuzz")
    assert chunks, "a document with text must give chunks"
    covered = [False] * len(doc.text)
    for i, c in enumerate(chunks):
        assert c.index == i and 0 <= c.start < c.end <= len(doc.text)
        assert doc.text[c.start:c.end] == c.text and c.text.strip()
        assert embedder.count_tokens(c.text) <= 2 * chunker.chunk_size
        covered[c.start:c.end] = [True] * (c.end - c.start)
    assert len({c.id for c in chunks}) == len(chunks)
    lost = [ch for ch, ok in zip(doc.text, covered) if not ok and ch.isalnum()]
    assert not lost, f"text left out of every chunk: {''.join(lost)[:80]!r}"
