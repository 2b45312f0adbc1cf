"""Phone numbers: shapes that are phones wherever they stand, and digit runs that are in context.

Two kinds of evidence decide:

- *shape*: an international number (``+`` and 7-15 digits, or ``00`` and separated
  groups), a North American 3-3-4 number with separators or parentheses, or a
  national number with a trunk 0 and separators. These are phones on their own,
  unless the words just before name another identifier ("order", "invoice", "PO",
  "account number" ...).
- *context*: a bare run of 10-15 digits (``4155550134``, ``07700900123``) looks exactly
  like an order number, a PO, a Unix timestamp or an EAN. It is a phone only when a
  phone word (phone, tel, call, mobile, fax, WhatsApp, reach, contact, "T:" ...) comes
  shortly before it in the same sentence, and no identifier word comes between.

``find(text)`` yields, per number, a list of candidate spans, longest first: the
caller keeps the longest that does not overlap a more specific kind (a greedy match
can run into a following SSN).

Deliberately not here: numbers under 7 digits (extensions), vanity numbers
("1-800-FLOWERS"), bare digit runs with no phone word near them (left alone: they are
far more often identifiers), and numbering-plan validation (libphonenumber's job).
"""

from __future__ import annotations

import re

_SHAPED = [
    re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){1,6}(?![\w-])"),  # international
    re.compile(r"(?<![\w+-])00[1-9]\d{0,2}(?:[ .-]\(?\d{1,5}\)?){2,6}(?![\w-])"),  # 00 44 ...
    # not the tail of a longer grouped number ("the old card 5504 0660 1684 3346")
    re.compile(r"(?<![\w+-])(?<!\d[ .])(?:1[ .-])?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]?\d{4}"
               r"(?![\w-])"),
    re.compile(r"(?<![\w+-])(?<!\d[ .])0\d{1,4}[ -]\d{3,4}[ -]?\d{3,4}(?![\w-])"),  # trunk 0
]
# digits only (an area code in parentheses at most): a phone only after a phone word
_RUN = re.compile(r"(?<![\w+.,/-])(?:\(\d{3}\))?\d{10,15}(?![\w/-]|[.,]\d)")
_PHONE_WORD = re.compile(
    r"\b(?:(?:tele)?phon\w*|tel|t[ée]l[ée]fono|telefon|call\w*|ring\w*|mobile?|m[óo]vil|mob|"
    r"cell(?:phone)?|handy|fax|sms|text(?:ed|ing)?|whats\s?app|signal|viber|dial\w*|hotline|"
    r"helpline|landline|reach\w*|contact\w*)\b\.?|\b[tmpf]\s*:", re.I)
# the words just before a number that make it some other identifier (cards use the
# product-code part: a Luhn-valid EAN or tracking number is not a card either)
PRODUCT_CODES = r"order|invoice|inv|po|ticket|case|tracking|serial|sku|batch|lot|ean|gtin|upc|isbn"
_ID_BEFORE = re.compile(
    rf"\b(?:{PRODUCT_CODES}|ref(?:erence)?|account|acct|id|customer|policy|transaction|txn|"
    r"build|timestamp|ts|employee|member)\b(?:\s+(?:number|no\.?|num|#|id))?(?:\s+(?:is|was))?"
    r"\s*[:#=.]?\s*$", re.I)
_SENTENCE_BREAK = re.compile(r"[!?;\n]|\.\s")
_WINDOW = 48  # how far back a phone word counts: about one clause


def find(text: str):
    for pattern in _SHAPED:
        for m in pattern.finditer(text):
            if m.group()[0] != "+" and _is_identifier(text, m.start()):
                continue
            if spans := _candidates(text, m):
                yield spans
    for m in _RUN.finditer(text):
        if _phone_word_before(text, m.start()) and not _is_identifier(text, m.start()):
            yield [m.span()]


def _candidates(text: str, m: re.Match) -> list[tuple[int, int]]:
    # "+44 20 7946 0958 123-45-6789": the greedy match runs into the SSN; its shorter
    # prefixes (cut at a separator) are the fallbacks
    raw, start = m.group(), m.start()
    ends = [m.end()] + [start + i for i in range(len(raw) - 1, 0, -1)
                        if raw[i] in " .-" and raw[i - 1].isdigit()]
    ends = [e - 1 if text[e - 1] == ")" and text.count("(", start, e)
            < text.count(")", start, e) else e for e in ends]  # "0958)" of "(call ...)"
    return [(start, e) for e in ends if 7 <= sum(ch.isdigit() for ch in text[start:e]) <= 15]


def _is_identifier(text: str, start: int) -> bool:
    return bool(_ID_BEFORE.search(text[max(0, start - 32):start]))


def _phone_word_before(text: str, start: int) -> bool:
    window = text[max(0, start - _WINDOW):start]
    last = None
    for last in _PHONE_WORD.finditer(window):
        pass
    return last is not None and not _SENTENCE_BREAK.search(window[last.end():])
