"""Find personal data in text: emails, phones, card numbers, IBANs, US SSNs, IPs and names.

``detect(text, kinds)`` returns non-overlapping ``Span``s, left to right. Structured
identifiers are matched by pattern and then *checked*: card numbers must pass Luhn
(13-19 digits, issuer prefix 2-6), IBANs mod-97 with the country's length, SSNs the
SSA's never-issued rules, IPs ``ipaddress``. Where two matches overlap the more
specific kind wins (email > IBAN > card > SSN > IP > phone > name). Names come from an
offline heuristic (a title, a common given name followed by a surname, or a given
name after a cue like "Dear"); it misses unusual names without such context.

Deliberately not here: placeholders and restoring them (``redact``), other kinds of
personal data (postal addresses, dates of birth, passport numbers).
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from dataclasses import dataclass

from specrag.security.names import CUES, GIVEN_NAMES, NOT_NAMES, NOT_SURNAMES, TITLES

KINDS = ("email", "iban", "card", "ssn", "ip", "phone", "name")  # priority order

_EMAIL = re.compile(r"(?<![\w.+%-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
                    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])")
_GROUP_START = re.compile(r"(?<![\w+.-])\d")
_DIGITS = re.compile(r"\d+")
_IBAN = re.compile(r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){10,32}")
_IBAN_START = re.compile(r"(?<![\w])[A-Z]{2}\d{2}")
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\w-])"
                  r"|(?<=SSN)[:#\s]*(?!000|666|9\d\d)\d{9}(?!\w)"
                  r"|(?<=[Ss]ocial [Ss]ecurity [Nn]umber)[:#\s]*\d{9}(?!\w)")
_IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}"
                   r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_VERSION = re.compile(r"(?:version|release|v)\s*\.?\s*$", re.I)
_PHONES = [
    re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){1,6}(?![\w-])"),  # international
    re.compile(r"(?<![\w+-])(?:1[ .-])?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-])"),
    re.compile(r"(?<![\w+-])0\d{1,4}[ -]\d{3,4}[ -]?\d{3,4}(?![\w-])"),  # national, trunk 0
]
# IBAN lengths by country (the common ones; others are accepted at 15-34 if mod-97 holds)
IBAN_LENGTHS = {"AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24,
                "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27,
                "HR": 21, "HU": 28, "IE": 22, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20,
                "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "RO": 24,
                "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26}
_SURNAME = r"(?:O'|Mc|Mac|De|Van |Van der |de |van )?[A-Z][a-z]+(?:-[A-Z][a-z]+)?"
_TITLED = re.compile(rf"\b(?:{'|'.join(TITLES)})\.?\s+([A-Z][a-z]+(?:\s+{_SURNAME})?)")
_GIVEN = re.compile(rf"\b((?:{'|'.join(sorted(GIVEN_NAMES))}))(?:\s+[A-Z]\.)?"
                    rf"(?:\s+({_SURNAME}))?\b")
# after these words a capitalised word is a person even if its given name is not listed
_CUED = re.compile(r"\b(?:Dear|Hi|Hello|Attn|[Cc]ontact(?: person)?|[Aa]sk|[Rr]each|[Cc]all|"
                   r"[Bb]eneficiary|[Cc]ustomer|[Cc]lient|[Pp]atient|[Ee]mployee|[Aa]pplicant|"
                   r"[Tt]enant|[Aa]ccount holder|[Ss]igned by|[Nn]ame|[Cc]c)[:,]?[ \t]+"
                   rf"([A-Z][a-z]+)(?:[ \t]+({_SURNAME}))?\b")
_IBAN_LIKE = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4})* ?$")
_CUE_BEFORE = re.compile(rf"\b(?:{'|'.join(CUES)})[,:]?\s+$")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str
    text: str


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def iban_ok(compact: str) -> bool:
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def detect(text: str, kinds=KINDS) -> list[Span]:
    """Non-overlapping spans of personal data, left to right (priority as in ``KINDS``)."""
    taken = _Intervals()
    spans: list[Span] = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        for found in _FINDERS[kind](text):
            # a finder yields a span, or for phones a list of spans, longest first: the
            # longest that does not overlap a more specific kind wins
            for start, end in (found if isinstance(found, list) else [found]):
                if taken.add(start, end):
                    spans.append(Span(start, end, kind, text[start:end]))
                    break
    return sorted(spans, key=lambda s: s.start)


class _Intervals:
    """Disjoint half-open intervals; ``add`` refuses one that overlaps (O(log n), not O(n):
    a hostile document with 10,000 matches must not take quadratic time)."""

    def __init__(self):
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self.starts, start)
        if (i > 0 and self.ends[i - 1] > start) or (i < len(self.starts)
                                                     and self.starts[i] < end):
            return False
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        return True


def _emails(text):
    return [m.span() for m in _EMAIL.finditer(text)]


def _cards(text):
    """From each digit group start, the longest run of groups (13-19 digits) passing Luhn.

    Every group start is tried, so a number glued to another ("... 0958 4111 1111 1111
    1111") is still found; a run ends where a letter, or a separator not followed by a
    digit, comes."""
    out, skip_until = [], -1
    for g in _GROUP_START.finditer(text):
        i = g.start()
        if i < skip_until or _in_account_number(text, i):
            continue
        best, pos, digits = None, i, ""
        while (m := _DIGITS.match(text, pos)) and len(digits) + len(m.group()) <= 19:
            digits, pos = digits + m.group(), m.end()
            nxt, after = text[pos:pos + 1], text[pos + 1:pos + 2]
            joined = nxt in (" ", "-") and after.isdigit()
            if (13 <= len(digits) and digits[0] in "23456" and len(set(digits)) > 1
                    and not (nxt.isalnum() or nxt == "_") and luhn_ok(digits)):
                best = (i, pos)
            if not joined:
                break
            pos += 1
        if best:
            out.append(best)
            skip_until = best[1]
    return out


def _ibans(text):
    out, skip_until = [], -1
    for start in _IBAN_START.finditer(text):  # every start: one IBAN may follow another
        m = _IBAN.match(text, start.start())
        if m is None or m.start() < skip_until:
            continue
        raw = m.group()
        # map compact positions back to the text so trailing words are not swallowed
        positions = [i for i, ch in enumerate(raw) if ch != " "]
        compact = raw.replace(" ", "")
        lengths = [IBAN_LENGTHS[compact[:2]]] if compact[:2] in IBAN_LENGTHS else \
            range(min(34, len(compact)), 14, -1)
        for n in lengths:
            if n <= len(compact) and iban_ok(compact[:n]):
                end = m.start() + positions[n - 1] + 1
                if end == len(text) or not text[end].isalnum():
                    out.append((m.start(), end))
                    skip_until = end
                    break
    return out


def _in_account_number(text: str, start: int) -> bool:
    """Digits that continue an IBAN-shaped reference (one failing mod-97) are not a card."""
    if text[start:start + 1] == "+":
        return False
    m = _IBAN_LIKE.search(text[max(0, start - 40):start])
    return bool(m) and not iban_ok(m.group().replace(" ", ""))


def _ssns(text):
    out = []
    for m in _SSN.finditer(text):
        s, e = m.span()
        while s < e and not text[s].isdigit():  # the keyword forms match ": 123456789"
            s += 1
        out.append((s, e))
    return out


def _ips(text):
    out = [m.span() for m in _IPV4.finditer(text)
           if not _VERSION.search(text[max(0, m.start() - 12):m.start()])]
    for m in _IPV6.finditer(text):
        cand, s = m.group(), m.start()
        if not cand.endswith("::"):
            cand = cand.rstrip(":")
        if cand.count(":") < 2 or not re.search(r"[0-9A-Fa-f]", cand):
            continue
        try:
            ipaddress.IPv6Address(cand)
        except ValueError:
            continue
        out.append((s, s + len(cand)))
    return out


def _phones(text):
    out = []
    for pattern in _PHONES:
        for m in pattern.finditer(text):
            if _in_account_number(text, m.start()):
                continue
            # "+44 20 7946 0958 123-45-6789": the greedy match runs into the SSN; its
            # shorter prefixes (cut at a separator) are the fallbacks
            ends = [m.end()] + [m.start() + i for i in range(len(m.group()) - 1, 0, -1)
                                if m.group()[i] in " .-" and m.group()[i - 1].isdigit()]
            ends = [e - 1 if text[e - 1] == ")" and text.count("(", m.start(), e)
                    < text.count(")", m.start(), e) else e for e in ends]  # "0958)" of "(call ...)"
            spans = [(m.start(), e) for e in ends
                     if 7 <= sum(ch.isdigit() for ch in text[m.start():e]) <= 15]
            if spans:
                out.append(spans)
    return out


def _names(text):
    out = [m.span(1) for m in _TITLED.finditer(text)]
    for m in _CUED.finditer(text):
        if m.group(1) in NOT_SURNAMES or m.group(1) in NOT_NAMES:
            continue
        last = m.group(2)
        out.append(m.span(1) if not last or last.split()[-1] in NOT_SURNAMES
                   else (m.start(1), m.end(2)))
    for m in _GIVEN.finditer(text):
        surname = m.group(2)
        if surname and surname.split()[-1] not in NOT_SURNAMES:
            out.append((m.start(1), m.end(2)))
        elif _CUE_BEFORE.search(text[max(0, m.start() - 20):m.start()]):
            out.append(m.span(1))
    out.sort(key=lambda se: (se[0], -se[1]))
    merged: list[tuple[int, int]] = []
    for s, e in out:  # the same name found by two rules: keep the longest
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


_FINDERS = {"email": _emails, "iban": _ibans, "card": _cards, "ssn": _ssns, "ip": _ips,
            "phone": _phones, "name": _names}
