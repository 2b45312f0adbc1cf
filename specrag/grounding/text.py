"""Plain-text rules shared by every module that reads answers or chunks: where a sentence
ends, what a citation marker looks like, which words carry content.

- ``SENTENCE_BREAK``: the whitespace between two sentences (after ``.``, ``!`` or ``?``
  and up to two closing quotes or brackets, before an upper-case letter or a digit).
  It matches the gap only, so spans cut at it keep every character: the chunker cuts
  offsets into the document with it.
- ``split_sentences(text)``: the sentences of normalised text, common abbreviations
  ("Dr.", "e.g.", "U.S.", initials) kept whole and glued sentences ("2009.Stock")
  split.
- ``rough_sentences(text)``: the evidence cut's cheaper split (what the shipped
  verifier was trained on).
- ``strip_citations(text)`` removes ``[1]``, ``[2, 3]``, ``[1-3]``, ``[doc 2]``;
  ``claims(draft)`` is the draft's sentences the verifier scores (citations removed,
  fragments under three words merged into a neighbour).
- ``content_words(text)``: lower-cased words and numbers minus ``STOP_WORDS``.

Why one module: the verifier, the evidence cut, training data, the chunker and the
benchmarks must agree on what a sentence is, or a model is served a different cut than
it was trained on.

Deliberately not here: what a sentence *means* (abstention, support: ``verifier``),
SQuAD answer normalisation (``bench.metrics``), citation numbers (``pipeline.prompts``).
"""

from __future__ import annotations

import re

WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    "the a an of in on at to and or is was are were be been by for with as from "
    "that this it its he she they his her their which who what when where how has "
    "have had not no but also into than then there these those".split())

# lookbehinds must be fixed-width, hence one alternative per number of closing marks
SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]])|(?<=[.!?][\"')\]]{2}))"
                            r"\s+(?=[\"'(\[]?[A-Z0-9])")
_GLUED = re.compile(r"(?<=[a-z0-9)][.!?])(?=[A-Z][a-z])")
_ABBREV = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|No|vs|etc|e\.g|i\.e|U\.S|Inc|Ltd|Co|"
                     r"Corp|Gen|Col|Lt|Sgt|Rep|Sen|Gov|Jan|Feb|Mar|Apr|Aug|Sept?|Oct|Nov|Dec|"
                     r"[A-Z])\.$")
CITATION = re.compile(r"\s*\[\s*(?:(?:doc(?:ument)?|source|ref)\s*)?\d+(?:\s*[,;\-\u2013]\s*\d+)*\s*\]",
                      re.I)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (whitespace normalised; common abbreviations kept whole)."""
    text = _GLUED.sub(" ", " ".join(text.split()))
    if not text:
        return []
    parts, start = [], 0
    for m in SENTENCE_BREAK.finditer(text):
        head = text[start:m.start()]
        if _ABBREV.search(head):
            continue
        parts.append(head.strip())
        start = m.end()
    parts.append(text[start:].strip())
    return [p for p in parts if p]


# The evidence cut's split (``evidence.select``): no abbreviation handling, closing
# quotes go with the gap. The shipped verifier was trained on premises cut this way
# (``training.run``), so serving keeps it until a verifier is trained on the other.
_ROUGH_BREAK = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def rough_sentences(text: str) -> list[str]:
    """A cheap sentence split for choosing evidence: a wrong split only changes which
    words are kept together."""
    return [s for s in _ROUGH_BREAK.split(" ".join(text.split())) if s.strip()]


def strip_citations(text: str) -> str:
    return " ".join(CITATION.sub("", text).split())


def claims(draft: str, min_words: int = 3) -> list[str]:
    """The sentences of a draft that are scored: citations removed, fragments merged."""
    out: list[str] = []
    for sent in split_sentences(strip_citations(draft)):
        if out and len(sent.split()) < min_words:
            out[-1] = f"{out[-1]} {sent}"
        elif out and len(out[-1].split()) < min_words:
            out[-1] = f"{out[-1]} {sent}"
        else:
            out.append(sent)
    return out


def content_words(text: str) -> set[str]:
    """Lower-cased words and numbers minus stop words."""
    return {w for w in WORD.findall(text.lower()) if w not in STOP_WORDS}


_ASKING = frozenset({"do", "does", "did", "much", "many", "whom", "whose"})


def stems(text: str) -> set[str]:
    """Content words cut to 4 letters, question auxiliaries left out: "When did it open?"
    meets "it opened in 1921" (no stemmer: this must cost microseconds)."""
    return {w[:4] for w in content_words(text) if w not in _ASKING}
