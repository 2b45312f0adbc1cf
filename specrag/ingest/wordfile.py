"""A Word document (.docx) into parts: ``(text, page, heading)`` pieces split at headings.

Paragraphs and tables are read in document order (a table becomes rows of
``cell | cell``); a paragraph whose style is a Heading or Title starts a new part.
Before python-docx inflates anything the zip's declared sizes are checked (entries,
total, ratio to the file's own size); while reading, paragraphs and characters are
counted against their caps, so a small hostile file fails in a moment with its reason.

Deliberately not here: headers, footers, footnotes, comments, images, tracked changes,
and deciding that the bytes are a Word file (``parsers``).
"""

from __future__ import annotations

import io
import zipfile

import docx
from docx.table import Table

from specrag.ingest.limits import (
    EXPANSION_FLOOR,
    MAX_DOCX_BLOCKS,
    MAX_EXPANSION_RATIO,
    MAX_ZIP_ENTRIES,
    MAX_ZIP_TOTAL,
    ZIP_RATIO,
    TextTooLong,
    fail,
    mb,
)
from specrag.types import IngestError

Part = tuple[str, "int | None", "str | None"]  # (text, page, heading)
_HEADING_NAMES = ("Heading", "Title")


def docx_parts(data: bytes, source: str, max_bytes: int, max_chars: int) -> list[Part]:
    corrupt = "corrupt Word document (.docx)"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except Exception as exc:
        raise fail(source, corrupt) from exc
    # zipfile stops reading at the declared size and fails the CRC if an entry lies
    # about it, so the declared sizes are a safe upper bound
    limit = min(ZIP_RATIO * max_bytes, MAX_ZIP_TOTAL)
    if len(infos) > MAX_ZIP_ENTRIES:
        raise fail(source, f"rejected as a possible zip bomb: {len(infos)} entries")
    expanded = sum(info.file_size for info in infos)
    if expanded > limit:
        raise fail(source, f"rejected as a possible zip bomb: expands to more than {mb(limit)}")
    if expanded > EXPANSION_FLOOR and expanded > MAX_EXPANSION_RATIO * len(data):
        raise fail(source, f"rejected as a possible zip bomb: {mb(len(data))} expands "
                           f"{expanded // len(data)} times, to {mb(expanded)}")
    try:
        document = docx.Document(io.BytesIO(data))
        is_heading = _heading_test(document)
        parts: list[Part] = []
        heading, body = None, []
        blocks = chars = 0
        for block in document.iter_inner_content():  # paragraphs and tables in order
            if isinstance(block, Table):
                text = _table_text(block)
                blocks += len(block._tbl.tr_lst)
                body.append(text)
            elif (text := block.text).strip() and is_heading(block):
                parts.append(("\n\n".join(b for b in body if b.strip()), None, heading))
                heading, body = " ".join(text.split()), [text]
            else:
                body.append(text)
            blocks += 1
            chars += len(text) + 2
            if blocks > MAX_DOCX_BLOCKS:
                raise fail(source, f"too many paragraphs (more than {MAX_DOCX_BLOCKS:,})")
            if chars > max_chars:
                raise TextTooLong
        parts.append(("\n\n".join(b for b in body if b.strip()), None, heading))
    except (IngestError, TextTooLong):
        raise
    except Exception as exc:  # python-docx/lxml raise many types for bad parts
        raise fail(source, corrupt) from exc
    return parts


def _heading_test(document):
    """``is_heading(paragraph)``, with the style sheet read once per document.

    ``paragraph.style`` searches the style sheet on every call (about 0.4 ms each), which
    made a 50 KB file of short paragraphs take a minute."""
    from docx.enum.style import WD_STYLE_TYPE

    styles = document.styles
    paragraph_ids, heading_ids = set(), set()
    for style in styles:
        try:
            if style.type == WD_STYLE_TYPE.PARAGRAPH:
                paragraph_ids.add(style.style_id)
                if (style.name or "").startswith(_HEADING_NAMES):
                    heading_ids.add(style.style_id)
        except Exception:  # noqa: BLE001 - one odd style must not sink the file
            continue
    try:
        default = styles.default(WD_STYLE_TYPE.PARAGRAPH)
        default_heading = default is not None and (default.name or "").startswith(_HEADING_NAMES)
    except Exception:  # noqa: BLE001 - a broken style sheet: no default heading
        default_heading = False

    def is_heading(paragraph) -> bool:
        style_id = paragraph._p.style  # the paragraph's own style id, or None
        if style_id in paragraph_ids:
            return style_id in heading_ids
        return default_heading  # no style, or one the sheet lacks: Word shows the default
    return is_heading


def _table_text(table: Table) -> str:
    rows = []
    for row in table.rows:
        cells = row.cells  # merged cells repeat the same <w:tc>; keep it once
        unique = {id(cell._tc): " ".join(cell.text.split()) for cell in cells}
        rows.append(" | ".join(unique.values()))
    return "\n".join(rows)
