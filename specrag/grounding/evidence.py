"""Cut a chunk down to the sentences that bear on one claim, before the cross-encoder sees it.

``select(premise, claim, max_words=64, words=content_words)`` keeps the premise whole when it is short enough;
otherwise it ranks the premise's sentences by how many of the claim's content words
(lower-cased words and numbers, stop words left out; ``words`` says what a word is)
each one contains, takes the best
ones while they fit in ``max_words`` words, and returns them in their original order.

Why: a cross-encoder's cost is linear in pairs x tokens, so a 200-token chunk per
(sentence, chunk) pair is what made one verification of 3 sentences x 10 chunks cost
~500 ms on two cores. The evidence for one claim sentence is nearly always one or two
sentences of the chunk (the SummaC observation: sentence-level premises also score
*better* than whole documents with small NLI models). Training uses the same cut
(``training.run``), so the model sees at serving time what it saw in training.
The draft and heavy prompts use the same cut with the question as the claim
(``retrieval.draft_words`` / ``heavy_words``, ``prompts.cut_for``) and ``text.stems``
as words: prefill is most of a local model's time to first token.

Deliberately not here: the scoring itself (``crossencoder``), the lexical chunk
prefilter and aggregation (``verifier``), sentence splitting and stop words (``text``).
No embeddings: this must cost microseconds.
"""

from __future__ import annotations

from specrag.grounding.text import content_words, rough_sentences


def select(premise: str, claim: str, max_words: int = 64, words=content_words) -> str:
    """The sentences of ``premise`` most about ``claim``, in order, within ``max_words``."""
    if max_words <= 0 or len(premise.split()) <= max_words:
        return premise
    sents = rough_sentences(premise)
    if len(sents) <= 1:
        return premise
    want = words(claim)
    sizes = [len(s.split()) for s in sents]
    hits = [len(want & words(s)) for s in sents]
    best = max(range(len(sents)), key=lambda i: (hits[i], -i))
    # best overlap first; among equals the sentences nearest the best one (context)
    order = sorted(range(len(sents)), key=lambda i: (-hits[i], abs(i - best), i))
    keep, used = set(), 0
    for i in order:
        if keep and used + sizes[i] > max_words:
            if hits[i] == 0:
                break
            continue
        keep.add(i)
        used += sizes[i]
    return " ".join(sents[i] for i in sorted(keep))
