"""Hostile text at the edges: questions that are too long or binary, document text shown as HTML.

``check_question(q, limit)`` raises a one-line ``SpecragError`` for a question that is
not a string, too long, or binary (NUL or other control characters, unpaired
surrogates), before any model sees it. ``safe_markdown(text)`` escapes document text
for Gradio ``Markdown``/``HTML`` components so markup inside a document is shown,
never run; ``safe_filename`` gives a printable name for messages and tables.

Deliberately not here: file parsing limits (``parsers`` enforces size, type by
content, zip and page limits) and prompt quoting (``prompts`` escapes documents).
"""

from __future__ import annotations

import html
import re
import unicodedata

from specrag.types import SpecragError

_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Markdown that can fetch or link (images, links, autolinks) and raw-HTML openers
_MD_ACTIVE = re.compile(r"([\\`*_{}\[\]()#+!|~>])")


def check_question(question, limit: int = 2000) -> str:
    """Return the question unchanged, or raise ``SpecragError`` saying what is wrong with it."""
    if not isinstance(question, str):
        raise SpecragError(f"the question must be text, not {type(question).__name__}")
    if len(question) > limit:
        raise SpecragError(f"the question is too long ({len(question):,} characters; the limit "
                           f"is {limit:,}): ask about one thing at a time")
    if _BINARY.search(question):
        raise SpecragError("the question contains control characters (binary data?): "
                           "type or paste plain text")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecragError("the question is not valid Unicode text") from None
    return question


def safe_markdown(text: str) -> str:
    """Document text for a Markdown/HTML component: tags escaped, Markdown made inert."""
    return _MD_ACTIVE.sub(r"\\\1", html.escape(str(text), quote=True))


def safe_filename(name: str, limit: int = 120) -> str:
    """A file name fit to print: no control or bidi-override characters, shortened."""
    cleaned = "".join(ch for ch in str(name) if unicodedata.category(ch) not in ("Cc", "Cf"))
    cleaned = cleaned.strip() or "(unnamed)"
    return cleaned if len(cleaned) <= limit else cleaned[:limit - 1] + "…"
