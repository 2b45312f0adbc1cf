"""Is each name of a claim said in the evidence about the same thing? A lexical role check.

``displaced(claim, evidence)`` looks at every name of the claim (``spans.key_spans``)
and takes the words around it in the claim (``CLAIM_WINDOW`` tokens each side, content
words cut to four letters). The name's share is the part of those words that no
evidence sentence naming it contains; a name the evidence never holds counts 1.0. The
result is the largest share over the claim's names: 0.0 when every name sits among
the same words in the evidence, or when the claim names nothing.

Why: the most common confident mistake of a small cross-encoder is a name that *is*
in the passage, put in another role. Given a passage on a film "directed by Tim Burton
... starring Catherine O'Hara", the claim "Catherine O'Hara is a 1988 comedy film
directed by Tim Burton" has all its words in the passage, so the span check
(``spans.missing``) passes it and the cross-encoder scores it 0.9. What differs is
*where*: the passage names her in the cast sentence, the claim among "1988 comedy
film". Drafts fail the same way ("the director was X" for the passage's composer X).
The sentences that name something are a cheap proxy for what is said about it;
stems and whole sentences keep it tolerant of rewording, and the verifier's head
weighs it with the cross-encoder, so it pulls a score down rather than vetoing it.
A name the evidence lacks counts as wholly displaced so that, in the head, a missing
name never costs less than a misplaced one.

A question-and-answer claim (``qa_claim``: ``The answer to "...?" is: X.``) is left
out (0.0): its answer sits next to the question, not next to what the passage says
around it, so the words around it say nothing about its role.

Deliberately not here: parsing or coreference (too slow for a check that must cost
microseconds: a pronoun standing for the name is not followed), and the combination
with the cross-encoder (``head``).
"""

from __future__ import annotations

import re

from specrag.grounding.spans import key_spans
from specrag.grounding.text import STOP_WORDS, split_sentences

CLAIM_WINDOW = 6
QA_PREFIX = 'The answer to "'
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['\u2019][A-Za-z]+)?")


def qa_claim(question: str, answer: str) -> str:
    """A short answer stated as a claim the verifier can check: the question travels
    with it ("1869." says nothing alone). Training builds its question pairs the same
    way, for right and wrong answers alike, so the template gives no label away."""
    question, answer = " ".join(question.split()), " ".join(answer.split()).rstrip(".")
    return f"{QA_PREFIX}{question.rstrip('?').strip()}?\" is: {answer}."


def _tokens(text: str) -> list[str]:
    out = []
    for t in _TOKEN.findall(text):
        t = t.lower().replace("\u2019", "'")
        out.append(t[:-2] if t.endswith("'s") else t)
    return out


def _places(tokens: list[str], name: list[str]) -> list[tuple[int, int]]:
    """Where ``name`` (its tokens) occurs in ``tokens``; its last word alone also counts
    ("Brenner" for "Karl Brenner"), as a passage names a person in full once."""
    n = len(name)
    out = [(i, i + n) for i in range(len(tokens) - n + 1) if tokens[i:i + n] == name]
    if not out and n > 1:
        out = [(i, i + 1) for i, t in enumerate(tokens) if t == name[-1]]
    return out


def _stems(tokens, skip: set[str]) -> set[str]:
    return {t[:4] for t in tokens if t not in STOP_WORDS and t not in skip}


def evidence_sentences(evidence: str) -> list[list[str]]:
    """The evidence as ``displaced`` reads it: a chunk scored against several claims is
    read once (``displaced(..., sentences=...)``)."""
    return [_tokens(s) for s in split_sentences(evidence)]


def displaced(claim: str, evidence: str, spans: list[tuple[str, str]] | None = None,
              sentences: list[list[str]] | None = None) -> float:
    """The largest share, over the claim's names, of the words around a name in the
    claim that no evidence sentence naming it holds (1.0 for a name the evidence lacks)."""
    if claim.startswith(QA_PREFIX):
        return 0.0
    spans = key_spans(claim) if spans is None else spans
    names = [_tokens(s) for k, s in spans if k == "name"]
    if not names:
        return 0.0
    claim_tokens = _tokens(claim)
    worst = 0.0
    for name in names:
        name = [w for w in name if w not in STOP_WORDS] or name
        here = _places(claim_tokens, name)
        if not here:
            continue
        if sentences is None:
            sentences = evidence_sentences(evidence)
        holding = [s for s in sentences if _places(s, name)]
        if not holding:
            return 1.0  # the evidence never names it
        skip = set(name)
        want = set().union(*(_stems(claim_tokens[max(0, a - CLAIM_WINDOW):a]
                                    + claim_tokens[b:b + CLAIM_WINDOW], skip) for a, b in here))
        if not want:
            continue
        near = set().union(*(_stems(s, skip) for s in holding))
        worst = max(worst, len(want - near) / len(want))
    return worst
