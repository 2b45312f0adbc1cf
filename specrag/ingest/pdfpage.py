"""Render one PDF page to a PNG with a passage of its text highlighted.

``render_page(data, page, passage, dpi=100)`` returns a ``PageImage``: the PNG bytes of
page ``page`` (1-based, as ``Chunk.page``), its size, and whether ``passage`` was found
on the page (then its lines are covered by translucent yellow boxes). The passage comes
from pypdf's extraction at ingest and the boxes from PDFium's text layer, and the two
disagree on spaces, line breaks, ligatures and case, so both sides are compared with all
whitespace removed, NFKC-normalised and case-folded. A passage that runs past the page
is highlighted as far as it goes.

Deliberately not here: where the PDF comes from (``originals``), any HTML (``ui.viewer``),
OCR of image-only pages (nothing to find: the page is shown without a highlight), and a
separate process: the bytes are a PDF that already parsed at ingest, and the rendered
size is capped (``MAX_SIDE_PX``) so an absurd page size cannot exhaust memory.
"""

from __future__ import annotations

import io
import unicodedata
from dataclasses import dataclass

from specrag.types import SpecragError

MAX_SIDE_PX = 2000  # a page's longer side, whatever its stated size and the dpi
MIN_MATCH = 24  # shorter prefixes of a passage are too likely to match elsewhere
HIGHLIGHT = (255, 214, 0, 110)  # RGBA: yellow, the text under it stays readable
PAD_PT = 1.5  # boxes a little larger than the glyphs, so descenders are covered


@dataclass(frozen=True)
class PageImage:
    png: bytes
    width: int
    height: int
    found: bool  # the passage was located on the page and highlighted
    boxes: tuple[tuple[int, int, int, int], ...] = ()  # highlighted areas, pixels


def _libs():
    try:
        import pypdfium2 as pdfium
        from PIL import Image, ImageDraw
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("viewing PDF pages needs: pip install pypdfium2 pillow") from err
    return pdfium, Image, ImageDraw


def _fold(s: str) -> str:
    return "".join(unicodedata.normalize("NFKC", s).casefold().split())


def _page_text(textpage, pdfium) -> tuple[str, list[int]]:
    """The page's text folded like ``_fold``, with the PDFium char index of each char."""
    out, where = [], []
    for i in range(textpage.count_chars()):
        code = pdfium.raw.FPDFText_GetUnicode(textpage.raw, i)
        folded = _fold(chr(code)) if 0 < code < 0x110000 else ""
        out.append(folded)
        where += [i] * len(folded)
    return "".join(out), where


def _locate(page_text: str, passage: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``passage`` (folded) in ``page_text``, or of its longest prefix
    found there when the passage runs on past the page; None when neither is there."""
    if not passage:
        return None
    at = page_text.find(passage)
    if at >= 0:
        return at, at + len(passage)
    lo, hi = min(MIN_MATCH, len(passage)), len(passage) - 1  # a found prefix stays found
    if page_text.find(passage[:lo]) < 0:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if page_text.find(passage[:mid]) >= 0:
            lo = mid
        else:
            hi = mid - 1
    at = page_text.find(passage[:lo])
    return at, at + lo


def render_page(data: bytes, page: int, passage: str = "", dpi: int = 100) -> PageImage:
    """Page ``page`` (1-based) of the PDF ``data`` as a PNG, ``passage`` highlighted."""
    pdfium, Image, ImageDraw = _libs()
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as err:
        raise SpecragError(f"the PDF cannot be opened for viewing ({err})") from None
    try:
        if not 1 <= page <= len(pdf):
            raise SpecragError(f"the PDF has no page {page} (it has {len(pdf)})")
        pg = pdf[page - 1]
        width_pt, height_pt = pg.get_size()
        scale = min(dpi / 72, MAX_SIDE_PX / max(width_pt, height_pt, 1.0))
        image = pg.render(scale=scale).to_pil().convert("RGBA")
        textpage = pg.get_textpage()
        text, where = _page_text(textpage, pdfium)
        span = _locate(text, _fold(passage))
        boxes = []
        if span is not None:
            first, last = where[span[0]], where[span[1] - 1]
            # PDFium merges the chars of a range into one rectangle per line
            for r in range(textpage.count_rects(first, last - first + 1)):
                left, bottom, right, top = textpage.get_rect(r)
                boxes.append((round((left - PAD_PT) * scale),
                              round((height_pt - top - PAD_PT) * scale),
                              round((right + PAD_PT) * scale),
                              round((height_pt - bottom + PAD_PT) * scale)))
        if boxes:
            layer = Image.new("RGBA", image.size, (0, 0, 0, 0))
            draw = ImageDraw.Draw(layer)
            for box in boxes:
                draw.rectangle(box, fill=HIGHLIGHT)
            image = Image.alpha_composite(image, layer)
        buf = io.BytesIO()
        image.convert("RGB").save(buf, format="PNG", optimize=True)
        return PageImage(buf.getvalue(), image.width, image.height, bool(boxes), tuple(boxes))
    finally:
        pdf.close()
