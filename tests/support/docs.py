"""Documents for the tests: every supported format built in memory, and a small handbook.

Builders (bytes, nothing written): ``make_pdf(*pages)``, ``encrypt_pdf``, ``make_docx``,
``make_zip``, ``rezip``, and the sample texts ``HTML``, ``MARKDOWN``, ``CP1252``.
On disk: ``write_handbook(root)`` (one file of each format) and ``write_bad_files(root)``
(corrupt, empty, encrypted and unsupported files).

Deliberately not here: the parser tests themselves and their bad-file table
(``tests/test_parsers.py``), hostile and fuzzed inputs (the security tests build those
from these builders).
"""

from __future__ import annotations

import io
import zipfile
from functools import lru_cache
from pathlib import Path

import docx
from pypdf import PdfReader, PdfWriter
from reportlab.pdfgen import canvas


@lru_cache(maxsize=None)
def make_pdf(*pages: str) -> bytes:
    """A real PDF with one line of text per page ("" gives a blank page)."""
    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    for text in pages:
        if text:
            c.drawString(72, 720, text)
        c.showPage()
    c.save()
    return buf.getvalue()


def encrypt_pdf(data: bytes, user: str, owner: str | None = None) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user, owner)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@lru_cache(maxsize=None)
def make_docx() -> bytes:
    d = docx.Document()
    d.add_paragraph("Cover note.")
    d.add_heading("Annual Report", 0)  # style "Title"
    d.add_paragraph("Preface text.")
    d.add_heading("Chapter One", 1)
    d.add_paragraph("First chapter body.")
    table = d.add_table(rows=3, cols=2)
    for r, row in enumerate([("Name", "Value"), ("alpha", "1")]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    merged = table.cell(2, 0).merge(table.cell(2, 1))
    merged.text = "merged cell"
    d.add_paragraph("")  # empty paragraphs must not leave holes
    d.add_paragraph("After table.")
    d.add_heading("Chapter Two", 2)
    d.add_paragraph("Second body.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def rezip(data: bytes, extra: dict[str, bytes] | None = None,
          replace: dict[str, bytes] | None = None) -> bytes:
    """Copy a zip, replacing and adding entries."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, (replace or {}).get(info.filename, src.read(info)))
        for name, payload in (extra or {}).items():
            dst.writestr(name, payload)
    return out.getvalue()


def make_zip(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, payload in entries.items():
            z.writestr(name, payload)
    return out.getvalue()


HTML = b"""<!DOCTYPE html>
<html><head><title>Ignored Title</title><style>body { color: red }</style>
<script>var secret = "script text";</script></head>
<body><!-- a comment -->
<noscript>enable js</noscript>
<p>Lead   paragraph
spanning lines.</p>
<h1>Main <em>Heading</em></h1>
<p>First para.</p><ul><li>one</li>
<li>two</li></ul>
<table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td>1</td></tr></table>
<h2>Code</h2>
<pre>def f():
    return 1</pre>
<div hidden>hidden text</div>
<template><p>template text</p></template>
<p>after<br>break</p><script>document.write("late script")</script>
</body></html>"""

MARKDOWN = """Intro line before any heading.

# Getting Started #

Install it.

```bash
# not a heading
echo hi
```

Setext Title
============

Body under setext.

---

## C# tips

#hashtag is not a heading

~~~
## also code
~~~

Sub part
--------
text
"""

CP1252 = "Caf\u00e9 \u2013 \u201cquoted\u201d price: 5\u20ac".encode("cp1252")


LEAVE_P1 = "Annual leave: every employee receives 25 days of paid annual leave per year."
LEAVE_P2 = "Parental leave: new parents receive 16 weeks of fully paid parental leave."


def write_handbook(root: Path) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    files = {}
    files["leave.pdf"] = root / "leave.pdf"
    files["leave.pdf"].write_bytes(make_pdf(LEAVE_P1, LEAVE_P2))
    d = docx.Document()
    d.add_heading("Expenses", 1)
    d.add_paragraph("Expense claims must be submitted within 30 days with itemised receipts.")
    d.add_heading("Travel", 2)
    d.add_paragraph("Economy class is required for flights shorter than six hours.")
    files["expenses.docx"] = root / "expenses.docx"
    d.save(files["expenses.docx"])
    files["security.html"] = root / "security.html"
    files["security.html"].write_text(
        "<html><head><title>Security</title><script>alert('x')</script></head><body>"
        "<h1>Security policy</h1><p>All laptops must use full-disk encryption.</p>"
        "<h2>Passwords</h2><p>Passwords are rotated every 90 days and never shared.</p>"
        "</body></html>")
    files["oncall.md"] = root / "oncall.md"
    files["oncall.md"].write_text(
        "# On-call\n\nThe on-call engineer acknowledges every page within 15 minutes.\n\n"
        "## Handover\n\nHandover happens on Mondays at 10:00 with a written summary.\n")
    files["notes.txt"] = root / "notes.txt"
    files["notes.txt"].write_text("The office kitchen is cleaned every Friday afternoon.\n")
    return files


def write_bad_files(root: Path) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    bad = {
        "corrupt.pdf": make_pdf("Broken file")[:300],
        "empty.txt": b"",
        "locked.pdf": encrypt_pdf(make_pdf("Secret salaries"), "pw"),
        "tool.exe": b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" * 50,
    }
    out = {}
    for name, data in bad.items():
        out[name] = root / name
        out[name].write_bytes(data)
    return out
