"""Markdown and HTML into parts: ``(text, page, heading)`` pieces split at headings.

``markdown_parts(text)`` follows CommonMark's heading rules (ATX ``#`` headings,
setext underlines, never inside fenced code, lists or quotes); ``html_parts(text)``
drops invisible elements (scripts, styles, templates...), keeps block structure as
paragraph breaks and starts a part at every ``h1``-``h6`` (the ``<title>`` heads the
first part when the page has no ``h1``).

``html_depth(text)`` measures nesting without building a tree, so that a page built to
nest ten thousand deep can be refused before beautifulsoup spends minutes on it.

Deliberately not here: detecting the format, size limits, decoding bytes and joining
the parts into a document (``parsers``).
"""

from __future__ import annotations

import importlib.util
import re

from bs4 import BeautifulSoup, CData, NavigableString, Tag

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
    # One walk over the tree writes the text with its markers. Editing the tree instead
    # (insert_before/after, replace_with) costs beautifulsoup a scan of the siblings or
    # descendants per edit: minutes for 20,000 paragraphs or 10,000 nested divs.
    # Pre blocks and headings become NUL-delimited markers (NULs were stripped from the
    # input) so whitespace collapsing below cannot touch them and the text can be split
    # into sections at the headings afterwards. A line that is a lone NUL marks a
    # paragraph break; "\n" is a plain line break.
    pres, headings, out = [], [], []
    stack: list = [soup]
    while stack:
        node = stack.pop()
        if type(node) is str:  # a gap queued after an element's children (not a bs4 string)
            out.append(node)
            continue
        if not isinstance(node, Tag):
            if type(node) is NavigableString:  # source line breaks are spaces in HTML
                out.append(node.replace("\n", " "))
            elif type(node) is CData:
                out.append(str(node))
            continue  # comments, doctypes, processing instructions
        name = node.name
        if name in _INVISIBLE or node.has_attr("hidden"):
            continue
        if name == "pre":
            pres.append(_visible_text(node).strip("\n").rstrip())
            out.append(f"{_PARA}\x00P{len(pres) - 1}\x00{_PARA}")
            continue
        if name in _HEADINGS:
            if words := " ".join(_visible_text(node, " ").split()):
                headings.append(words)
                out.append(f"{_PARA}\x00H{len(headings) - 1}\x00{_PARA}")
            else:
                out.append(_PARA)
            continue
        if name == "br":
            out.append("\n")
            continue
        gap = "\n" if name in _SOFT_BLOCKS else _PARA if name in _HARD_BLOCKS else ""
        out.append(gap)
        stack.append(gap)
        cell_seen = False
        children = []
        for child in node.children:
            if isinstance(child, Tag) and child.name in ("td", "th"):
                if cell_seen:
                    children.append(" | ")
                cell_seen = True
            children.append(child)
        stack.extend(reversed(children))
    lines: list[str] = []
    para = False
    for line in "".join(out).split("\n"):
        line = " ".join(line.split())
        if line == "\x00":
            para = True
        elif line:
            if para and lines:
                lines.append("")
            lines.append(line)
            para = False
    cleaned = "\n".join(lines)
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


def _visible_text(node, sep: str = "") -> str:
    """``get_text(sep)`` without invisible or hidden elements and without comments."""
    pieces, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Tag):
            if n is node or not (n.name in _INVISIBLE or n.has_attr("hidden")):
                stack.extend(reversed(list(n.children)))
        elif type(n) in (NavigableString, CData):
            pieces.append(str(n))
    return sep.join(pieces)

# ``[^<>]``: a "<" with no ">" after it must not make the scan quadratic
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)[^<>]*?(/?)>")
# elements that never hold children, or whose end tag may be left out (the parser closes
# them), so they never nest deeper by themselves
_FLAT = frozenset("area base br col embed hr img input link meta param source track wbr "
                  "p li dt dd tr td th thead tbody tfoot option optgroup rb rt rp colgroup "
                  "caption html head body".split())


def html_depth(text: str, stop_after: int) -> int:
    """How deep the HTML's elements nest (up to ``stop_after`` + 1), in one linear scan."""
    depth = deepest = 0
    for m in _TAG.finditer(_without_comments(text)):
        name = m.group(2).lower()
        if name in _FLAT or m.group(3):
            continue
        if m.group(1):
            depth = max(depth - 1, 0)
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > stop_after:
            break
    return deepest


def _without_comments(text: str) -> str:
    pieces, pos = [], 0
    while (i := text.find("<!--", pos)) >= 0:
        pieces.append(text[pos:i])
        j = text.find("-->", i + 4)
        pos = len(text) if j < 0 else j + 3
    pieces.append(text[pos:])
    return "".join(pieces)
