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

import docx
from docx.table import Table
from pypdf import PasswordType, PdfReader

from specrag.ingest.markup import Part, html_parts, markdown_parts
from specrag.types import IngestError, ParsedDocument, Section

SUPPORTED_EXTENSIONS = (".pdf", ".docx", ".md", ".markdown", ".html", ".htm", ".txt")
_SUPPORTED_NAMES = "PDF, DOCX, Markdown, HTML, plain text"

# A .docx is a zip: its declared sizes are checked before python-docx inflates
# anything. zipfile stops reading at the declared size and fails the CRC if an
# entry lies about it, so the declared sizes are a safe upper bound.
MAX_ZIP_ENTRIES = 10_000
MAX_ZIP_TOTAL = 200_000_000
ZIP_RATIO = 20

_HTML_SNIFF = re.compile(r"\s*<(?:!doctype\s+html|html)\b", re.IGNORECASE)
# C0/C1 control characters other than tab, newline and form feed: many of them
# mean the "text" is really binary that happened to decode.
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0e-\x1f\x7f-\x9f]")
# UTF-16/32 legitimately contain NULs, so only a BOM lets them through.
_BOMS = {codecs.BOM_UTF32_LE: "utf-32", codecs.BOM_UTF32_BE: "utf-32",
         codecs.BOM_UTF16_LE: "utf-16", codecs.BOM_UTF16_BE: "utf-16"}



def parse_bytes(data: bytes, filename: str, *, max_bytes: int = 50_000_000,
                max_pages: int = 2000) -> ParsedDocument:
    """Parse one uploaded file; raise ``IngestError`` with a one-line reason."""
    source = _base_name(filename)
    if not data:
        raise _fail(source, "empty file")
    if len(data) > max_bytes:
        raise _fail(source, f"file too large ({_mb(len(data))}; the limit is {_mb(max_bytes)})")
    fmt, text = _detect(data, source)
    pages = None
    if fmt == "pdf":
        parts, pages = _pdf_parts(data, source, max_pages)
    elif fmt == "docx":
        parts = _docx_parts(data, source, max_bytes)
    elif fmt == "markdown":
        parts = markdown_parts(text)
    elif fmt == "html":
        parts = html_parts(text)
    else:
        parts = [(text, None, None)]
    sections, full = _assemble(parts)
    if not sections:
        raise _fail(source, "no extractable text (scanned or image-only PDF? OCR is not supported)"
                    if fmt == "pdf" else "empty file: no extractable text")
    return ParsedDocument(source=source, format=fmt, text=full, sections=sections,
                          sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data),
                          pages=pages)


def detect_format(data: bytes, filename: str) -> str:
    """Return "pdf", "docx", "markdown", "html" or "text"; raise ``IngestError`` otherwise."""
    source = _base_name(filename)
    if not data:
        raise _fail(source, "empty file")
    return _detect(data, source)[0]


def _fail(source: str, reason: str) -> IngestError:
    return IngestError(f"{source}: {reason}")


def _mb(n: int) -> str:
    # Binary megabytes: callers derive limits as ``mb * 1024 * 1024``.
    mb = n / 1_048_576
    return f"{mb:.{1 if mb >= 1 else 4}f}".rstrip("0").rstrip(".") + " MB"


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
        raise _fail(source, "not a PDF: content does not match the .pdf extension")
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                is_docx = "word/document.xml" in zf.namelist()
        except Exception as exc:
            reason = "corrupt Word document (.docx)" if ext == ".docx" else \
                "unsupported file type: damaged zip archive"
            raise _fail(source, reason) from exc
        if is_docx:
            return "docx", None
        raise _fail(source, f"unsupported file type: zip archive{f' ({ext})' if ext else ''}"
                            f" that is not a Word document (supported: {_SUPPORTED_NAMES})")
    if ext == ".docx":
        raise _fail(source, "not a Word document: content does not match the .docx extension")
    text = _decode_text(data)
    if text is None:
        raise _fail(source, f"unsupported binary file{f' ({ext})' if ext else ''}"
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


def _pdf_parts(data: bytes, source: str, max_pages: int) -> tuple[list[Part], int]:
    corrupt = "corrupt or unreadable PDF"
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _empty_password_opens(reader):
            raise _fail(source, "encrypted PDF: remove the password and upload again")
        count = len(reader.pages)
    except IngestError:
        raise
    except Exception as exc:  # pypdf raises many types for malformed files
        raise _fail(source, corrupt) from exc
    if count > max_pages:
        raise _fail(source, f"too many pages ({count}; the limit is {max_pages})")
    parts: list[Part] = []
    for number in range(1, count + 1):
        try:
            text = reader.pages[number - 1].extract_text() or ""
        except Exception as exc:
            raise _fail(source, f"{corrupt} (page {number} could not be read)") from exc
        parts.append((text, number, None))
    return parts, count


def _empty_password_opens(reader: PdfReader) -> bool:
    # An empty user password only restricts printing/copying; viewers open
    # such files without asking, so they are fine to read.
    try:
        return reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:  # e.g. AES without the optional crypto dependency
        return False


def _docx_parts(data: bytes, source: str, max_bytes: int) -> list[Part]:
    corrupt = "corrupt Word document (.docx)"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except Exception as exc:
        raise _fail(source, corrupt) from exc
    limit = min(ZIP_RATIO * max_bytes, MAX_ZIP_TOTAL)
    if len(infos) > MAX_ZIP_ENTRIES:
        raise _fail(source, f"rejected as a possible zip bomb: {len(infos)} entries")
    if sum(info.file_size for info in infos) > limit:
        raise _fail(source, f"rejected as a possible zip bomb: expands to more than {_mb(limit)}")
    try:
        document = docx.Document(io.BytesIO(data))
        parts: list[Part] = []
        heading, body = None, []
        for block in document.iter_inner_content():  # paragraphs and tables in order
            if isinstance(block, Table):
                body.append(_table_text(block))
            elif _is_heading(block) and block.text.strip():
                parts.append(("\n\n".join(b for b in body if b.strip()), None, heading))
                heading, body = " ".join(block.text.split()), [block.text]
            else:
                body.append(block.text)
        parts.append(("\n\n".join(b for b in body if b.strip()), None, heading))
    except Exception as exc:  # python-docx/lxml raise many types for bad parts
        raise _fail(source, corrupt) from exc
    return parts


def _is_heading(paragraph) -> bool:
    try:
        name = paragraph.style.name or ""
    except Exception:  # a dangling style reference should not sink the file
        return False
    return name.startswith(("Heading", "Title"))


def _table_text(table: Table) -> str:
    rows = []
    for row in table.rows:
        cells = row.cells  # merged cells repeat the same <w:tc>; keep it once
        unique = {id(cell._tc): " ".join(cell.text.split()) for cell in cells}
        rows.append(" | ".join(unique.values()))
    return "\n".join(rows)


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
