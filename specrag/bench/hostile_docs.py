"""Documents built by code for the ingest tests and ``bench ingest``: ordinary ones of any
size, and hostile ones, small files that cost a naive parser minutes.

Each builder returns what a real user could upload. Sizes are parameters so tests keep
them small and the benchmark can scale them. Only runtime dependencies (python-docx,
pypdf): the benchmark runs from an installed package.

Deliberately not here: timing (``ingest_scaling``) and what a parser should make of them
(the tests).
"""

from __future__ import annotations

import io
import random
import zipfile
from xml.sax.saxutils import escape

import docx
from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DictionaryObject, FloatObject, NameObject, StreamObject


def chinese_text(chars: int, seed: int = 0) -> str:
    """Ordinary-looking Chinese prose with no ASCII sentence breaks at all."""
    rng = random.Random(seed)
    words = ["公司", "员工", "休假", "政策", "规定", "申请", "审批", "工作", "时间", "报销",
             "费用", "安全", "培训", "系统", "数据", "客户", "部门", "经理", "每年", "需要"]
    out, n = [], 0
    while n < chars:
        sentence = "".join(rng.choice(words) for _ in range(rng.randint(6, 14))) + "，"
        out.append(sentence)
        n += len(sentence)
    return "".join(out)[:chars]


def server_log(lines: int, seed: int = 0) -> str:
    """A server log: one line per event, no sentence ends, few blank lines."""
    rng = random.Random(seed)
    return "\n".join(f"2026-11-30T12:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{rng.randint(1, 9)} "
                     f"request id={rng.getrandbits(48):012x} path=/api/v1/items/{rng.randint(1, 10**6)} "
                     f"status=200 ms={rng.randint(1, 900)}" for i in range(lines))


def nested_html(depth: int, tag: str = "div") -> str:
    return f"<html><body>{f'<{tag}>' * depth}deep text{f'</{tag}>' * depth}</body></html>"


def many_paragraph_docx(paragraphs: int, words: int = 3) -> bytes:
    """A small .docx of many short paragraphs (a heading every 500)."""
    texts = [" ".join(f"w{i}x{j}" for j in range(words)) for i in range(paragraphs)]
    return docx_of(texts, heading_every=500, title="Part")


def docx_of(paragraphs: list[str], heading_every: int = 20, title: str = "Section") -> bytes:
    """A .docx of ``paragraphs`` with a Heading 1 every ``heading_every``.

    The body is written as XML at once: python-docx's ``add_paragraph`` searches the
    body for its section properties on every call, quadratic for 100,000 paragraphs."""
    d = docx.Document()
    d.add_heading("x", 1)  # makes sure the style sheet holds Heading 1
    out = io.BytesIO()
    d.save(out)
    body = []
    for i, text in enumerate(paragraphs):
        if i % heading_every == 0:
            body.append(f'<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>'
                        f'{title} {i // heading_every}</w:t></w:r></w:p>')
        body.append(f"<w:p><w:r><w:t xml:space=\"preserve\">{escape(text)}</w:t></w:r></w:p>")
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as z:
        xml = z.read("word/document.xml").decode()
    start, end = xml.index("<w:body>") + len("<w:body>"), xml.index("<w:sectPr")
    xml = xml[:start] + "".join(body) + xml[end:]
    return _rezip(out.getvalue(), {"word/document.xml": xml.encode()})


def _rezip(data: bytes, replace: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, replace.get(info.filename, src.read(info)))
    return out.getvalue()


def pdf_of(text: str, line_chars: int = 90, lines_per_page: int = 60) -> bytes:
    """A PDF of ``text`` in Helvetica, about ``line_chars`` characters a line."""
    words, lines, line = text.split(), [], ""
    for w in words:
        if len(line) + len(w) + 1 > line_chars:
            lines.append(line)
            line = ""
        line = f"{line} {w}" if line else w
    lines.append(line)
    writer = PdfWriter()
    font = _helvetica(writer)
    for start in range(0, len(lines), lines_per_page):
        page = writer.add_blank_page(612, 792)
        shown = "".join(f"({_pdf_escape(t)}) '\n" for t in lines[start:start + lines_per_page])
        content = StreamObject()
        content._data = f"BT /F1 9 Tf 40 760 Td 12 TL\n{shown}ET".encode("latin-1", "replace")
        page[NameObject("/Contents")] = writer._add_object(content)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _helvetica(writer: PdfWriter):
    return writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica")}))


def recursive_form_pdf(levels: int, fan: int = 10, text: str = "laughter ") -> bytes:
    """A one-page PDF whose form XObjects each draw the one below ``fan`` times: a few
    kilobytes that lay out ``fan ** levels`` copies of ``text``."""
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = _helvetica(writer)

    def form(content: bytes, resources: DictionaryObject):
        s = StreamObject()
        s._data = content
        s.update({NameObject("/Type"): NameObject("/XObject"),
                  NameObject("/Subtype"): NameObject("/Form"),
                  NameObject("/BBox"): ArrayObject([FloatObject(0), FloatObject(0),
                                                    FloatObject(612), FloatObject(792)]),
                  NameObject("/Resources"): resources})
        return writer._add_object(s)

    below = form(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode(),
                 DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}))
    for _ in range(levels):
        below = form(b"/X Do " * fan, DictionaryObject({NameObject("/XObject"): DictionaryObject(
            {NameObject("/X"): below})}))
    content = StreamObject()
    content._data = b"/X Do"
    page[NameObject("/Contents")] = writer._add_object(content)
    page[NameObject("/Resources")] = DictionaryObject({NameObject("/XObject"): DictionaryObject(
        {NameObject("/X"): below})})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
