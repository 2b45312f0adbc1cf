"""Which documents an answer came from: its ``[n]`` citations and its sources.

``citations(text, chunks)``: the chunks the answer's ``[n]`` markers name, as ``Citation``s
(``n`` counts the chunks of the prompt that wrote it). ``sources(verdict, chunks,
citations, threshold, cited_from)``: the document pages it came from.

A verdict names, for each answer sentence, the chunk that supports it best
(``SentenceVerdict.best_chunk``, an index into the chunks it was checked against); a
sentence supported at or above ``threshold`` (``verify.supported_threshold``) makes that
chunk's document page a source. The ``[n]`` citations the model wrote are sources too,
whether or not the verdict found support in them (``Source.cited``). One ``Source`` per
(source, page), in order of first use: the sentences' supports in sentence order, then
the citations in the order they were written. The answer's renderers (CLI, app, ``/chat``,
the OpenAI endpoint) all show this one list.

Deliberately not here: how a sentence is scored (``grounding.verifier``), what is shown
(``Answer.sources_line`` and the renderers).
"""

from __future__ import annotations

from dataclasses import replace

from specrag.grounding.verdict import Verdict
from specrag.pipeline.events import Citation, Source
from specrag.pipeline.prompts import cited_numbers
from specrag.types import Chunk


def citations(text: str, chunks) -> tuple[Citation, ...]:
    """The ``[n]`` citations of ``text`` written from a prompt of ``chunks`` (numbers past
    the prompt's chunks are dropped), in order of first use."""
    named = [(n, chunks[n - 1]) for n in cited_numbers(text) if 1 <= n <= len(chunks)]
    return tuple(Citation(n, c.source, c.page, c.text, c.id) for n, c in named)


def supporting(verdict: Verdict | None, chunks, threshold: float) -> list[Chunk]:
    """The chunk behind each sentence the verdict found supported (one per sentence, in
    order; abstentions and sentences below ``threshold`` have none)."""
    if verdict is None:
        return []
    return [chunks[s.best_chunk] for s in verdict.sentences
            if not s.abstention and s.best_chunk is not None and 0 <= s.best_chunk < len(chunks)
            and s.score >= threshold]


def sources(verdict: Verdict | None, chunks, cited: tuple[Citation, ...], threshold: float,
            cited_from=()) -> tuple[Source, ...]:
    """The answer's sources; ``chunks``: what ``verdict``'s ``best_chunk`` indexes into;
    ``cited_from``: the chunks ``cited`` numbers (their document ids: a ``Citation`` has none)."""
    doc_ids = {c.id: c.doc_id for c in cited_from}
    found: dict[tuple[str, int | None], Source] = {}
    for chunk in supporting(verdict, chunks, threshold):
        key = (chunk.source, chunk.page)
        s = found.get(key) or Source(chunk.source, chunk.page, chunk.id, chunk.doc_id)
        found[key] = replace(s, sentences=s.sentences + 1)
    for c in cited:
        key = (c.source, c.page)
        s = found.get(key) or Source(c.source, c.page, c.chunk_id, doc_ids.get(c.chunk_id))
        found[key] = replace(s, cited=True)
    return tuple(found.values())
