"""Markdown and HTML into parts: ``(text, page, heading)`` pieces split at headings.

``markdown_parts(text)`` follows CommonMark's heading rules (ATX ``#`` headings,
setext underlines, never inside fenced code, lists or quotes); ``html_parts(text)``
drops invisible elements (scripts, styles, templates...), keeps block structure as
paragraph breaks and starts a part at every ``h1``-``h6`` (the ``<title>`` heads the
first part when the page has no ``h1``).

Deliberately not here: detecting the format, size limits, decoding bytes and joining
the parts into a document (``parsers``).
"""

from __future__ import annotations

import importlib.util
import re

from bs4 import BeautifulSoup, NavigableString

Part = tuple[str, "int | None", "str | None"]  # (text, page, heading)

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_LIST_OR_QUOTE = re.compile(r" {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)| {0,3}>")
_INVISIBLE = ["script", "style", "noscript", "template", "head", "svg", "iframe", "object"]
_SOFT_BLOCKS = ["li", "tr", "dt", "dd"]
_HARD_BLOCKS = ["p", "div", "section", "article", "aside", "main", "header", "footer",
                "nav", "blockquote", "ul", "ol", "dl", "table", "caption", "figure",
                "figcaption", "form", "fieldset", "address", "details", "summary", "hr"]
_PARA = "\n\x00\n"
_HEADINGS = ["h1", "h2", "h3", "h4", "h5", "h6"]

# lxml is faster and more forgiving; html.parser ships with Python.
_HTML_PARSER = "lxml" if importlib.util.find_spec("lxml") else "html.parser"


def markdown_parts(text: str) -> list[Part]:
    parts: list[Part] = []
    heading, lines = None, []
    fence = None  # the opening fence while inside a fenced code block
    para_start = None  # index in `lines` where the current paragraph began
    for line in text.split("\n"):
        if fence:
            lines.append(line)
            m = _FENCE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip().strip(fence[0]):
                fence = None
            continue
        atx = _ATX.match(line)
        if (m := _FENCE.match(line)) is not None:
            fence, para_start = m.group(1), None
        elif atx:
            parts.append(("\n".join(lines), None, heading))
            heading = _ATX_CLOSE.sub("", atx.group(2) or "").strip() or None
            lines, para_start = [line], None
            continue
        elif para_start is not None and _SETEXT.match(line):
            # The paragraph above the underline is the heading text.
            para, lines = lines[para_start:], lines[:para_start]
            parts.append(("\n".join(lines), None, heading))
            heading = " ".join(" ".join(para).split())
            lines, para_start = para + [line], None
            continue
        elif not line.strip():
            para_start = None
        elif para_start is None and not line.startswith("    ") \
                and not _LIST_OR_QUOTE.match(line):
            para_start = len(lines)
        lines.append(line)
    parts.append(("\n".join(lines), None, heading))
    return parts


def html_parts(text: str) -> list[Part]:
    soup = BeautifulSoup(text, _HTML_PARSER)
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag else ""
    has_h1 = soup.find("h1") is not None
    for tag in soup.find_all(_INVISIBLE) + soup.find_all(attrs={"hidden": True}):
        if not tag.decomposed:
            tag.decompose()
    # Source line breaks are just spaces in HTML (except inside <pre>).
    for string in soup.find_all(string=True):
        if type(string) is NavigableString and "\n" in string \
                and string.find_parent("pre") is None:
            string.replace_with(string.replace("\n", " "))
    # Pre blocks and headings become NUL-delimited markers (NULs were stripped
    # from the input) so whitespace collapsing below cannot touch them and the
    # text can be split into sections at the headings afterwards. A line that
    # is a lone NUL marks a paragraph break; "\n" is a plain line break.
    pres, headings = [], []
    for tag in soup.find_all(["pre"] + _HEADINGS):
        if any(p.name == "pre" or p.name in _HEADINGS for p in tag.parents):
            continue  # nested: already captured with its ancestor
        if tag.name == "pre":
            pres.append(tag.get_text().strip("\n").rstrip())
            tag.replace_with(f"{_PARA}\x00P{len(pres) - 1}\x00{_PARA}")
        elif words := " ".join(tag.get_text(" ").split()):
            headings.append(words)
            tag.replace_with(f"{_PARA}\x00H{len(headings) - 1}\x00{_PARA}")
        else:
            tag.replace_with(_PARA)
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for tag in soup.find_all(_SOFT_BLOCKS + _HARD_BLOCKS):
        gap = "\n" if tag.name in _SOFT_BLOCKS else _PARA
        tag.insert_before(gap)
        tag.insert_after(gap)
    for cell in soup.find_all(["td", "th"]):
        if cell.find_previous_sibling(["td", "th"]) is not None:
            cell.insert_before(" | ")
    out: list[str] = []
    para = False
    for line in soup.get_text().split("\n"):
        line = " ".join(line.split())
        if line == "\x00":
            para = True
        elif line:
            if para and out:
                out.append("")
            out.append(line)
            para = False
    cleaned = "\n".join(out)
    pieces = re.split(r"\x00([HP])(\d+)\x00", cleaned)
    parts: list[Part] = []
    heading, buf = (None if has_h1 else title or None), [pieces[0]]
    for i in range(1, len(pieces), 3):
        kind, index, after = pieces[i], int(pieces[i + 1]), pieces[i + 2]
        if kind == "P":
            buf.append(pres[index])
        else:
            parts.append(("".join(buf), None, heading))
            heading = headings[index]
            buf = [heading]
        buf.append(after)
    parts.append(("".join(buf), None, heading))
    return parts
