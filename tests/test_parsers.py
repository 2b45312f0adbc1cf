"""Tests for specrag.ingest.parsers: real files of every format, built in memory."""

from __future__ import annotations

import hashlib
import io

import pytest
from pypdf import PdfReader

from specrag.ingest import wordfile
from specrag.ingest.parsers import SUPPORTED_EXTENSIONS, detect_format, parse_bytes
from specrag.types import IngestError, ParsedDocument
from tests.support.docs import (
    CP1252,
    HTML,
    MARKDOWN,
    encrypt_pdf,
    make_docx,
    make_pdf,
    make_zip,
    rezip,
)

# --------------------------------------------------------------------------- files


def good_files() -> list[tuple[str, bytes, str]]:
    """(file name, bytes, expected format) for one valid file of every kind."""
    return [
        ("report.pdf", make_pdf("Page one text", "Page two text", "Page three text"), "pdf"),
        ("report.docx", make_docx(), "docx"),
        ("page.html", HTML, "html"),
        ("guide.md", MARKDOWN.encode(), "markdown"),
        ("bom.txt", "\ufeffH\u00e9llo w\u00f6rld\r\nline two\r\n".encode("utf-8"), "text"),
        ("ansi.txt", CP1252, "text"),
        ("wide.txt", "UTF-16 text\x00 with a NUL".encode("utf-16"), "text"),
    ]


def parse(name: str, data: bytes, **kw) -> ParsedDocument:
    return parse_bytes(data, name, **kw)


def reason(data: bytes, name: str, **kw) -> str:
    with pytest.raises(IngestError) as info:
        parse_bytes(data, name, **kw)
    msg = str(info.value)
    assert "\n" not in msg and "Traceback" not in msg, msg
    return msg


# --------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("name,data,fmt", good_files(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_format_keeps_offsets_and_metadata(name, data, fmt):
    doc = parse(name, data)
    assert doc.format == fmt
    assert doc.source == name
    assert doc.sha256 == hashlib.sha256(data).hexdigest()
    assert doc.size_bytes == len(data)
    assert doc.sections, "a valid file must give sections"
    assert doc.text == "\n\n".join(s.text for s in doc.sections)
    for s in doc.sections:
        assert doc.text[s.start:s.start + len(s.text)] == s.text
        assert s.text.strip() and s.text == s.text.rstrip()
    assert "\r" not in doc.text and "\x00" not in doc.text and "\ufeff" not in doc.text


def test_supported_extensions_cover_every_format():
    for ext in (".pdf", ".docx", ".md", ".markdown", ".html", ".htm", ".txt"):
        assert ext in SUPPORTED_EXTENSIONS


# --------------------------------------------------------------------------- formats


def test_pdf_one_section_per_page_with_page_numbers():
    data = make_pdf("Alpha page", "", "Gamma page")  # page 2 is blank
    doc = parse("scan.pdf", data)
    assert doc.pages == 3
    assert [(s.page, s.text) for s in doc.sections] == [(1, "Alpha page"), (3, "Gamma page")]
    assert doc.text == "Alpha page\n\nGamma page"
    assert all(s.heading is None for s in doc.sections)


def test_pdf_with_empty_user_password_is_read():
    data = encrypt_pdf(make_pdf("Open secret"), "", "owner-only")
    assert PdfReader(io.BytesIO(data)).is_encrypted
    assert parse("locked.pdf", data).text == "Open secret"


def test_pdf_page_limit():
    data = make_pdf("a", "b", "c")
    assert parse("ok.pdf", data, max_pages=3).pages == 3
    assert reason(data, "big.pdf", max_pages=2) == "big.pdf: too many pages (3; the limit is 2)"


def test_docx_headings_paragraphs_and_tables_in_order():
    doc = parse("report.docx", make_docx())
    assert doc.pages is None
    assert [(s.heading, s.text) for s in doc.sections] == [
        (None, "Cover note."),
        ("Annual Report", "Annual Report\n\nPreface text."),
        ("Chapter One", "Chapter One\n\nFirst chapter body.\n\n"
                        "Name | Value\nalpha | 1\nmerged cell\n\nAfter table."),
        ("Chapter Two", "Chapter Two\n\nSecond body."),
    ]


def test_html_drops_invisible_content_and_splits_at_headings():
    doc = parse("page.html", HTML)
    assert [s.heading for s in doc.sections] == [None, "Main Heading", "Code"]
    assert doc.sections[0].text == "Lead paragraph spanning lines."
    assert doc.sections[1].text == ("Main Heading\n\nFirst para.\n\none\ntwo\n\n"
                                    "Name | Value\nalpha | 1")
    assert doc.sections[2].text == "Code\n\ndef f():\n    return 1\n\nafter\nbreak"
    for gone in ("script text", "late script", "color", "a comment", "enable js",
                 "hidden text", "template text", "Ignored Title", "DOCTYPE"):
        assert gone not in doc.text


def test_html_title_is_first_heading_without_h1():
    data = b"<html><head><title> Page   Title </title></head><body><p>Intro</p>" \
           b"<h2>Later</h2><p>More</p></body></html>"
    doc = parse("t.htm", data)
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Page Title", "Intro"), ("Later", "Later\n\nMore")]


def test_markdown_sections_ignore_code_fences():
    doc = parse("guide.md", MARKDOWN.encode())
    assert [s.heading for s in doc.sections] == [
        None, "Getting Started", "Setext Title", "C# tips", "Sub part"]
    by_heading = {s.heading: s.text for s in doc.sections}
    assert by_heading[None] == "Intro line before any heading."
    assert "# not a heading\necho hi\n```" in by_heading["Getting Started"]
    assert by_heading["Getting Started"].startswith("# Getting Started #")  # raw kept
    assert by_heading["Setext Title"].startswith("Setext Title\n====")
    assert by_heading["Setext Title"].endswith("Body under setext.\n\n---")  # not setext
    assert "#hashtag is not a heading" in by_heading["C# tips"]
    assert "## also code" in by_heading["C# tips"]
    assert by_heading["Sub part"] == "Sub part\n--------\ntext"


def test_text_encodings_and_line_endings():
    assert parse("bom.txt", "\ufeffH\u00e9llo\r\nline two\rthree".encode()).text == \
        "H\u00e9llo\nline two\nthree"
    assert parse("ansi.txt", CP1252).text == "Caf\u00e9 \u2013 \u201cquoted\u201d price: 5\u20ac"
    assert parse("wide.txt", "a\x00b \u00fc".encode("utf-16")).text == "ab \u00fc"
    doc = parse("notes", b"plain\n\nwords\n")
    assert (doc.format, doc.sections[0].heading, doc.text) == ("text", None, "plain\n\nwords")


@pytest.mark.parametrize("name,data,fmt", [
    ("report.txt", make_pdf("x"), "pdf"),  # content beats extension
    ("upload.bin", make_docx(), "docx"),
    ("page.txt", b"\xef\xbb\xbf \n <!DOCTYPE html><p>x</p>", "html"),
    ("page", b"<HTML><body>x</body></HTML>", "html"),
    ("readme.MARKDOWN", b"# x", "markdown"),
    ("notes.txt", b"<p>not sniffed as html unless it starts the file</p>", "text"),
    ("junk-first.pdf", b"garbage\n" + make_pdf("x"), "pdf"),
])
def test_detect_format_by_content(name, data, fmt):
    assert detect_format(data, name) == fmt


@pytest.mark.parametrize("name,source", [
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\bob\\report.txt", "report.txt"),
    ("dir/sub/notes.md", "notes.md"),
    ("..\\..\\boot.ini", "boot.ini"),
    ("  spaced.txt  ", "spaced.txt"),
    ("evil\nname.txt", "evilname.txt"),
])
def test_source_is_base_name_only(name, source):
    assert parse(name, b"hello").source == source


@pytest.mark.parametrize("name", ["", "dir/", "..", "a/..", "\\"])
def test_empty_names_are_rejected(name):
    assert "file has no name" in reason(b"hello", name)


# --------------------------------------------------------------------------- bad files


def bomb_docx() -> bytes:
    # 2 MiB of zeros deflates to ~2 KiB; with max_bytes=60 kB the limit is 1.2 MB.
    return rezip(make_docx(), extra={"word/media/zeros.bin": bytes(2 * 1024 * 1024)})


BAD = [
    # (file name, data, kwargs, exact expected message or substring after "<name>: ")
    ("empty.txt", b"", {}, "empty file"),
    ("blank.txt", b"  \n\t \r\n  ", {}, "empty file: no extractable text"),
    ("blank.md", b"\n\n   \n", {}, "empty file: no extractable text"),
    ("scripts.html", b"<html><script>x()</script><style>p{}</style></html>", {},
     "empty file: no extractable text"),
    ("blank.pdf", make_pdf("", ""), {},
     "no extractable text (scanned or image-only PDF? OCR is not supported)"),
    ("huge.txt", b"x" * 200, {"max_bytes": 100}, "file too large ("),
    ("truncated.pdf", make_pdf("a", "b")[:700], {}, "corrupt or unreadable PDF"),
    ("header-only.pdf", b"%PDF-1.7\n" + bytes(range(1, 256)) * 8, {}, "corrupt or unreadable PDF"),
    ("random.pdf", bytes(range(256)) * 16, {}, "not a PDF: content does not match the .pdf extension"),
    ("text.pdf", b"just some text", {}, "not a PDF: content does not match the .pdf extension"),
    ("locked.pdf", encrypt_pdf(make_pdf("secret"), "secret"), {},
     "encrypted PDF: remove the password and upload again"),
    ("setup.exe", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" * 50, {}, "unsupported binary file (.exe)"),
    ("blob", bytes(range(1, 32)) * 40, {}, "unsupported binary file (supported:"),
    ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", {}, "unsupported binary file (.txt)"),
    ("archive.zip", make_zip({"hello.txt": b"hi"}), {},
     "unsupported file type: zip archive (.zip) that is not a Word document"),
    ("sheet.docx", make_zip({"xl/workbook.xml": b"<x/>"}), {},
     "unsupported file type: zip archive (.docx) that is not a Word document"),
    ("fake.docx", b"plain text pretending", {},
     "not a Word document: content does not match the .docx extension"),
    ("cut.docx", make_docx()[:2000], {}, "corrupt Word document (.docx)"),
    ("badxml.docx", rezip(make_docx(), replace={"word/document.xml": b"<w:document><oops"}), {},
     "corrupt Word document (.docx)"),
    ("bomb.docx", bomb_docx(), {"max_bytes": 60_000},
     "rejected as a possible zip bomb: expands to more than"),
]


@pytest.mark.parametrize("name,data,kwargs,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_files_fail_with_one_line_reason(name, data, kwargs, expected):
    msg = reason(data, name, **kwargs)
    assert msg.startswith(f"{name}: ")
    assert expected in msg


def test_bad_files_reason_uses_base_name():
    assert reason(b"", "uploads/../secret/empty.txt") == "empty.txt: empty file"


def test_oversized_reason_states_limit_in_mb():
    msg = reason(b"x" * (3 * 1024 * 1024), "big.txt", max_bytes=2 * 1024 * 1024)
    assert msg == "big.txt: file too large (3 MB; the limit is 2 MB)"
    assert parse("ok.txt", b"x" * 100, max_bytes=100).size_bytes == 100  # limit is inclusive


def test_zip_bomb_ratio_scales_with_max_bytes():
    data = bomb_docx()
    # A generous max_bytes lifts the 20x limit above the 2 MiB payload.
    assert parse("bomb.docx", data, max_bytes=1_000_000).format == "docx"


def test_zip_with_too_many_entries(monkeypatch):
    monkeypatch.setattr(wordfile, "MAX_ZIP_ENTRIES", 40)
    data = rezip(make_docx(), extra={f"extra/e{i}.xml": b"<a/>" for i in range(40)})
    assert "rejected as a possible zip bomb: " in reason(data, "many.docx")
    monkeypatch.setattr(wordfile, "MAX_ZIP_ENTRIES", 10_000)
    assert parse("many.docx", data).format == "docx"


@pytest.mark.parametrize("data,name", [
    (b"\x00\x01\x02binary", "x.bin"), (make_zip({"a.txt": b"a"}), "a.zip"), (b"%PDF-", "")])
def test_detect_format_raises_for_unsupported(data, name):
    with pytest.raises(IngestError):
        detect_format(data, name)
