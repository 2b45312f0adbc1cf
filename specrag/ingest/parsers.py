"""Turn the bytes of one uploaded file into a ``ParsedDocument``.

The format is decided by content first (PDF magic, a zip holding
``word/document.xml``, text that decodes cleanly) and by extension only where
content cannot tell (Markdown vs. plain text, HTML without a doctype). Every
failure is an ``IngestError`` whose message is one line: ``"<name>: <reason>"``.

Deliberately not done here: OCR (image-only PDF pages give no text), chunking,
embedding, storage, de-duplication, fetching URLs, legacy formats (.doc, .rtf,
.odt, ...), Word headers/footers/footnotes/comments, images, and honouring an
HTML ``<meta charset>`` (text is decoded as UTF-8, then cp1252/latin-1).
"""

from __future__ import annotations

import codecs
import hashlib
import io
import re
import zipfile

from pypdf import PasswordType, PdfReader

from specrag.ingest.limits import DEFAULT_MAX_CHARS, MAX_HTML_DEPTH, TextTooLong, fail, mb, too_long
from specrag.ingest.markup import Part, html_depth, html_parts, markdown_parts
from specrag.ingest.wordfile import docx_parts
from specrag.types import IngestError, ParsedDocument, Section

SUPPORTED_EXTENSIONS = (".pdf", ".docx", ".md", ".markdown", ".html", ".htm", ".txt")
_SUPPORTED_NAMES = "PDF, DOCX, Markdown, HTML, plain text"

_HTML_MARKUP = 4  # raw HTML may be this many times its text before it is parsed
_HTML_SNIFF = re.compile(r"\s*<(?:!doctype\s+html|html)\b", re.IGNORECASE)
# C0/C1 control characters other than tab, newline and form feed: many of them
# mean the "text" is really binary that happened to decode.
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0e-\x1f\x7f-\x9f]")
# UTF-16/32 legitimately contain NULs, so only a BOM lets them through.
_BOMS = {codecs.BOM_UTF32_LE: "utf-32", codecs.BOM_UTF32_BE: "utf-32",
         codecs.BOM_UTF16_LE: "utf-16", codecs.BOM_UTF16_BE: "utf-16"}



def parse_bytes(data: bytes, filename: str, *, max_bytes: int = 50_000_000,
                max_pages: int = 2000, max_chars: int = DEFAULT_MAX_CHARS) -> ParsedDocument:
    """Parse one uploaded file; raise ``IngestError`` with a one-line reason.

    ``max_chars`` caps the extracted text: a few kilobytes of PDF or Word can expand to
    millions of characters, so extraction stops as soon as the cap is passed."""
    source = _base_name(filename)
    if not data:
        raise fail(source, "empty file")
    if len(data) > max_bytes:
        raise fail(source, f"file too large ({mb(len(data))}; the limit is {mb(max_bytes)})")
    fmt, text = _detect(data, source)
    # before any markup is parsed; HTML's tags can be most of its bytes, so it gets room
    if text is not None and len(text) > max_chars * (_HTML_MARKUP if fmt == "html" else 1):
        raise too_long(source, max_chars)
    pages = None
    try:
        if fmt == "pdf":
            parts, pages = _pdf_parts(data, source, max_pages, max_chars)
        elif fmt == "docx":
            parts = docx_parts(data, source, max_bytes, max_chars)
        elif fmt == "markdown":
            parts = markdown_parts(text)
        elif fmt == "html":
            if html_depth(text, MAX_HTML_DEPTH) > MAX_HTML_DEPTH:
                raise fail(source, f"HTML nested too deeply (more than {MAX_HTML_DEPTH} levels)")
            parts = html_parts(text)
        else:
            parts = [(text, None, None)]
    except TextTooLong:
        raise too_long(source, max_chars) from None
    sections, full = _assemble(parts)
    if len(full) > max_chars:
        raise too_long(source, max_chars)
    if not sections:
        raise fail(source, "no extractable text (scanned or image-only PDF? OCR is not supported)"
                    if fmt == "pdf" else "empty file: no extractable text")
    return ParsedDocument(source=source, format=fmt, text=full, sections=sections,
                          sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data),
                          pages=pages)


def detect_format(data: bytes, filename: str) -> str:
    """Return "pdf", "docx", "markdown", "html" or "text"; raise ``IngestError`` otherwise."""
    source = _base_name(filename)
    if not data:
        raise fail(source, "empty file")
    return _detect(data, source)[0]


def _base_name(filename: str) -> str:
    # Browsers and OSes send "C:\\dir\\a.pdf", "dir/a.pdf" or worse; only the
    # last component is the name the user knows, and it must never be a path.
    name = re.sub(r"[\x00-\x1f\x7f]", "", str(filename or ""))
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if name in ("", ".", ".."):
        raise IngestError(f"{filename!r}: file has no name")
    return name


def _detect(data: bytes, source: str) -> tuple[str, str | None]:
    ext = "." + source.rsplit(".", 1)[-1].lower() if "." in source else ""
    head = data[:1024]
    # Some writers put junk before the header, which readers accept within the
    # first KiB; only trust that when the name also says PDF.
    if head.removeprefix(codecs.BOM_UTF8).lstrip().startswith(b"%PDF-") or (
            ext == ".pdf" and b"%PDF-" in head):
        return "pdf", None
    if ext == ".pdf":
        raise fail(source, "not a PDF: content does not match the .pdf extension")
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                is_docx = "word/document.xml" in zf.namelist()
        except Exception as exc:
            reason = "corrupt Word document (.docx)" if ext == ".docx" else \
                "unsupported file type: damaged zip archive"
            raise fail(source, reason) from exc
        if is_docx:
            return "docx", None
        raise fail(source, f"unsupported file type: zip archive{f' ({ext})' if ext else ''}"
                            f" that is not a Word document (supported: {_SUPPORTED_NAMES})")
    if ext == ".docx":
        raise fail(source, "not a Word document: content does not match the .docx extension")
    text = _decode_text(data)
    if text is None:
        raise fail(source, f"unsupported binary file{f' ({ext})' if ext else ''}"
                            f" (supported: {_SUPPORTED_NAMES})")
    if ext in (".md", ".markdown"):
        return "markdown", text
    if ext in (".html", ".htm") or _HTML_SNIFF.match(text[:1024]):
        return "html", text
    return "text", text


def _decode_text(data: bytes) -> str | None:
    """Decode bytes that look like text, or return None for binary data."""
    # cp1252 is what "ANSI" files from Windows are; latin-1 never fails.
    bom = next((b for b in _BOMS if data.startswith(b)), None)
    codecs_to_try = [_BOMS[bom]] if bom else ["utf-8-sig", "cp1252", "latin-1"]
    if bom is None and b"\x00" in data:
        return None
    for codec in codecs_to_try:
        try:
            text = data.decode(codec)
            break
        except UnicodeDecodeError:
            continue
    else:
        return None  # a BOM followed by undecodable bytes
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    sample = text[:65536]
    if sample and len(_CONTROL.findall(sample)) > 0.05 * len(sample):
        return None
    return text


def _pdf_parts(data: bytes, source: str, max_pages: int,
               max_chars: int) -> tuple[list[Part], int]:
    corrupt = "corrupt or unreadable PDF"
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _empty_password_opens(reader):
            raise fail(source, "encrypted PDF: remove the password and upload again")
        count = len(reader.pages)
    except IngestError:
        raise
    except Exception as exc:  # pypdf raises many types for malformed files
        raise fail(source, corrupt) from exc
    if count > max_pages:
        raise fail(source, f"too many pages ({count}; the limit is {max_pages})")
    parts: list[Part] = []
    seen = 0

    def count_text(text, *_):
        # pypdf reports every piece of text it lays out; a tiny file can draw the same
        # form thousands of times over, so stop inside the page, not after it
        nonlocal seen
        seen += len(text)
        if seen > max_chars:
            raise TextTooLong
    for number in range(1, count + 1):
        try:
            text = reader.pages[number - 1].extract_text(visitor_text=count_text) or ""
        except TextTooLong:
            raise
        except Exception as exc:
            raise fail(source, f"{corrupt} (page {number} could not be read)") from exc
        parts.append((text, number, None))
    return parts, count


def _empty_password_opens(reader: PdfReader) -> bool:
    # An empty user password only restricts printing/copying; viewers open
    # such files without asking, so they are fine to read.
    try:
        return reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:  # e.g. AES without the optional crypto dependency
        return False


def _assemble(parts: list[Part]) -> tuple[tuple[Section, ...], str]:
    """Tidy each part, drop empty ones, and join them with blank lines."""
    sections, pieces, pos = [], [], 0
    for raw, page, heading in parts:
        text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
        text = re.sub(r"\A(?:[ \t]*\n)+", "", text.rstrip())  # keep first-line indent
        if not text.strip():
            continue
        if pieces:
            pos += 2  # the "\n\n" separator
        sections.append(Section(text=text, start=pos, page=page, heading=heading))
        pieces.append(text)
        pos += len(text)
    return tuple(sections), "\n\n".join(pieces)
