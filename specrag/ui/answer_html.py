"""The parts of an answer's card that come with its ``Answer``, as HTML.

``facts_html(turn)``: beside the verdict of the answer shown, what a follow-up was
searched as and which documents the answer came from (``Answer.sources``: the pages of
the chunks its verdict found support in, and its ``[n]`` citations), each with a "view
source" button, or the line saying no source in the documents supports it;
``citations_html`` (each ``[n]`` with its passage), ``warnings_html``, ``meta_line``
(timing and cost, the facts of ``pipeline.summary``); and the small pieces ``ui.chat``
draws with too (``text_html``, ``where_html``, ``open_source``). Every document or
answer text goes through ``html.escape``.

Pure functions: nothing here decides what the sources are (``pipeline.provenance``) or
how the card around them is laid out (``ui.chat``).
"""

from __future__ import annotations

from html import escape

from specrag.pipeline.summary import cost_parts, timing_parts
from specrag.ui.turn import Turn


def text_html(s: str) -> str:
    return escape(s.strip()).replace("\n", "<br>")


def where_html(source: str, page) -> str:
    return escape(source) + (f" · p.{int(page)}" if page else "")


def open_source(chunk_id: str, collection: str | None) -> str:
    """The button that opens a chunk in the source viewer (``ui.viewer`` handles the click)."""
    if not chunk_id or not collection:
        return ""
    return (f'<button type="button" class="sr-open" data-chunk="{escape(chunk_id)}" '
            f'data-collection="{escape(collection)}">view source</button>')


def facts_html(turn: Turn) -> str:
    """Beside the verdict of the answer shown: what a follow-up was searched as, and which
    documents the answer came from (``Answer.sources``), or that none supports it."""
    out = (f'<div class="sr-rewrite">searched for: <q>{escape(turn.searched_for)}</q></div>'
           if turn.searched_for else "")
    a = turn.answer
    if a is not None and not a.sourced:
        out += (f'<div class="sr-sources sr-support-note sr-fail" data-sourced="false">'
                f"{escape(a.sources_line)}</div>")
    elif a is not None:
        where = _collections(a)
        items = ", ".join(f'<span class="sr-source" data-sentences="{s.sentences}">'
                          f"{escape(s.where)}{open_source(s.chunk_id, where.get(s.chunk_id))}"
                          "</span>" for s in a.sources)
        out += (f'<div class="sr-sources sr-support-note sr-pass" data-sourced="true">'
                f"Sources: {items}</div>")
    return out


def _collections(a) -> dict:
    """Chunk id -> collection: a citation or source names its chunk, the viewer needs both."""
    parts = (a.hits, a.verify_chunks, a.draft.chunks if a.draft else (),
             a.heavy.chunks if a.heavy else ())
    return {c.id: c.collection for part in parts for c in (getattr(x, "chunk", x) for x in part)}


def citations_html(answer) -> str:
    if answer is None or not answer.citations:
        return ""
    where = _collections(answer)
    items = "".join(
        f'<li><details><summary><span class="sr-cnum">[{c.number}]</span> '
        f'{where_html(c.source, c.page)}{open_source(c.chunk_id, where.get(c.chunk_id))}'
        f'</summary><blockquote>{text_html(c.text)}</blockquote>'
        f"</details></li>" for c in answer.citations)
    return f'<div class="sr-citations"><h4>Citations</h4><ol>{items}</ol></div>'


def meta_line(answer) -> str:
    """Per-answer timing and cost, one line (the facts of ``pipeline.summary``)."""
    if answer is None:
        return ""
    parts = [f"<b>{escape(answer.tier)}</b> tier", escape(answer.policy)]
    parts += [f"{label} {_ms(ms)}" for label, ms in timing_parts(answer)]
    cost, heavy_only, saved = cost_parts(answer)
    saved_text = "" if saved is None else f" · saved {saved:.0%}"
    parts.append(f'cost <span class="sr-cost">${cost:.4f}</span> '
                 f"(heavy-only ${heavy_only:.4f}{saved_text})")
    return f'<div class="sr-meta">{" · ".join(parts)}</div>'


def _ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def warnings_html(answer) -> str:
    """What the user must read beside the answer (``Answer.warnings``), one line each."""
    if answer is None or not answer.warnings:
        return ""
    items = "".join(f"<li>⚠ {escape(w)}</li>" for w in answer.warnings)
    return f'<ul class="sr-warnings" role="alert">{items}</ul>'
