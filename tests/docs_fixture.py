"""A small handbook in every supported format, plus bad files, written by the tests."""

from __future__ import annotations

from pathlib import Path

from tests.test_parsers import encrypt_pdf, make_pdf

LEAVE_P1 = "Annual leave: every employee receives 25 days of paid annual leave per year."
LEAVE_P2 = "Parental leave: new parents receive 16 weeks of fully paid parental leave."


def write_handbook(root: Path) -> dict[str, Path]:
    import docx

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
