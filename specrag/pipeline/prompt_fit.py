"""Fit a prompt's documents within a token budget, so no prompt is sent past a model's context.

A chunk can be far longer in model tokens than its embedder count says: the embedder's
tokenizer maps any word over 100 characters to one unknown-word token, so a run of
30,000 letters was stored as one "token" and became 16,560 tokens of the draft model's
prompt, past its 4,096-token context, failing every question that retrieved it.
Ingest now caps chunks in characters (``ingest.chunker``), but collections made before
that, and text that is dense in tokens (digits, CJK, base64), still need a bound here.

``estimate(text)`` over-counts on purpose where BPE vocabularies split finely: every
digit, every character outside Latin script and every character of a long run without
spaces counts a token, and a long word one per three letters; ordinary words count
about as the models count them. ``fit(texts, budget)`` keeps the documents in order
while they fit, cuts the first one that does not (when a useful part of it fits) and
drops the rest, logging a warning for each; each document's cut depends only on its
place and the budget, never on the question, so warmed prompt prefixes still match.

Deliberately not here: which chunks are asked (the engine), the prompt text
(``prompts``) and exact counts with a model's own tokenizer (a remote model has none here).
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

# tokens kept for the question, the system prompt and the chat template, whatever the
# question: the documents' budget must not depend on it (warmed prompt prefixes)
RESERVED = 700
MIN_PART = 48  # a cut document shorter than this many tokens is dropped, not cut
_PIECE = re.compile(r"\d|[A-Za-z]+|[^\x00-\x7f]|[^\sA-Za-z\d]")


def estimate(text: str) -> int:
    """Tokens ``text`` takes at most about, in a BPE model's vocabulary."""
    n = 0
    for m in _PIECE.finditer(text):
        k = m.end() - m.start()
        word = m.group()
        if k > 1 and not (word.islower() or word.isupper() or word[1:].islower()):
            n += k if k > 4 else 2  # mixed case (base64, identifiers) is split finely
        else:  # a long letter run too (random letters: ~1.8 characters a token)
            n += 1 if k <= 8 else (k + 2) // 3 if k <= 24 else k
    return n


def cut_to(text: str, budget: int) -> str:
    """The longest prefix of ``text`` (ended at a space where one is near) estimated
    within ``budget`` tokens."""
    if estimate(text) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # estimates grow with the prefix: binary search on its length
        mid = (lo + hi + 1) // 2
        if estimate(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    space = text.rfind(" ", max(0, lo - 80), lo)
    return text[:space if space > 0 else lo].rstrip()


def fit(texts: list[str], budget: int, *, names: list[str] | None = None) -> list[str]:
    """The first documents that fit ``budget`` tokens together, in order: the first that
    does not is cut to what is left when that is at least ``MIN_PART``, and it and the
    rest are left out otherwise (a prefix, so document n is still the n-th chunk)."""
    out: list[str] = []
    left = budget
    for i, text in enumerate(texts):
        need = estimate(text) + 8  # its element's tags and attributes
        if need <= left:
            out.append(text)
            left -= need
            continue
        name = names[i] if names else f"document {i + 1}"
        if left - 8 >= MIN_PART:
            out.append(cut_to(text, left - 8))
            log.warning("%s is about %d tokens: cut to %d to fit the prompt's %d", name,
                        need, left - 8, budget)
            i += 1
        if i < len(texts):
            log.warning("%d of %d documents left out of the prompt: no room within %d tokens",
                        len(texts) - i, len(texts), budget)
        break
    return out
