"""Find personal data in text: emails, phones, card numbers, IBANs, US SSNs, IPs and names.

``detect(text, kinds)`` returns non-overlapping ``Span``s, left to right, with offsets
into ``text`` as given. Matching runs on a normalised view of it (``textview``: NFKC,
zero-width characters dropped), so fullwidth digits or a soft hyphen inside a number
change nothing. Structured identifiers are matched by shape and then *checked*: card
numbers (13-19 digits, issuer prefix 2-6, grouped by spaces, dots or dashes, or not at
all) must pass Luhn; IBANs (any case, spaced or compact) mod-97 with the country's
length; SSNs the SSA's never-issued rules; IPs ``ipaddress`` (IPv4 octets may be
zero-padded, "192.168.001.010"). Addresses may have Unicode local parts and
internationalised domains, and may be obfuscated with a bracketed "at" and "dot"
("jane(at)example(dot)com", "jane [at] example [dot] com"; an unbracketed "jane at example
dot com" is left alone, as it reads like prose). Phones are decided by shape and
context (``phones``), names by capitalised runs and context (``name_finder``). Where
two matches overlap the more specific kind wins (email > IBAN > card > SSN > IP >
phone > name).

Deliberately not here: placeholders and restoring them (``redact``), other kinds of
personal data (postal addresses, dates of birth, passport numbers).
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from dataclasses import dataclass

from specrag.security import name_finder, phones
from specrag.security.textview import MARK, TextView

KINDS = ("email", "iban", "card", "ssn", "ip", "phone", "name")  # priority order

# letters and digits of any script with their combining marks ("प्रिया@उदाहरण.भारत");
# the top-level domain is letters, or Punycode ("xn--p1ai")
_ALNUM = rf"(?:[^\W_]|{MARK})"
_EMAIL = re.compile(rf"(?<![\w.+%-]){_ALNUM}(?:{_ALNUM}|[._%+'-]){{0,63}}@"
                    rf"(?:{_ALNUM}(?:(?:{_ALNUM}|-){{0,61}}{_ALNUM})?\.)+"
                    rf"(?:(?:[^\W\d_]|{MARK}){{2,24}}|xn--[a-z0-9-]{{2,59}})(?![\w-])", re.I)
# an address written to dodge harvesters: "jane(at)example(dot)com", "jane [at] example
# [dot] com"; the "at" must be bracketed (or "@"), so "look at example dot com" is prose
_AT = r"(?:\s*[(\[{<]\s*at\s*[)\]}>]\s*|@)"
_DOT = r"(?:\s*[(\[{<]\s*dot\s*[)\]}>]\s*|\.)"
_OBFUSCATED_EMAIL = re.compile(
    rf"(?<![\w.+%-]){_ALNUM}(?:{_ALNUM}|[._%+'-]){{0,63}}{_AT}"
    rf"(?:{_ALNUM}(?:(?:{_ALNUM}|-){{0,61}}{_ALNUM})?{_DOT})+"
    rf"(?:[^\W\d_]|{MARK}){{2,24}}(?![\w-])", re.I)
_GROUP_START = re.compile(r"(?<![\w+.-])\d")
_DIGITS = re.compile(r"\d+")
_IBAN = re.compile(r"(?<![\w])[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]){10,32}")
_IBAN_START = re.compile(r"(?<![\w])[A-Za-z]{2}\d{2}")
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\w-])"
                  r"|(?<=SSN)[:#\s]*(?!000|666|9\d\d)\d{9}(?!\w)"
                  r"|(?<=[Ss]ocial [Ss]ecurity [Nn]umber)[:#\s]*\d{9}(?!\w)")
# an octet may be zero-padded ("192.168.001.010")
_IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|[01]?\d?\d)\.){3}"
                   r"(?:25[0-5]|2[0-4]\d|[01]?\d?\d)(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_VERSION = re.compile(r"(?:version|release|v)\s*\.?\s*$", re.I)
# IBAN lengths by country (the common ones; others are accepted at 15-34 if mod-97 holds)
IBAN_LENGTHS = {"AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24,
                "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27,
                "HR": 21, "HU": 28, "IE": 22, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20,
                "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "RO": 24,
                "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26}
_IBAN_LIKE = re.compile(r"\b[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{1,4})* ?$")
_CARD_SEPARATORS = " -."
_CODE_BEFORE = re.compile(rf"\b(?:{phones.PRODUCT_CODES})\b(?:\s+(?:number|no\.?|#))?"
                          r"(?:\s+(?:is|was))?\s*[:#=.]?\s*$", re.I)


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
    view = TextView(text)
    taken = _Intervals()
    found_spans: list[tuple[int, int, str]] = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        for found in _FINDERS[kind](view.text):
            # a finder yields a span, or for phones a list of spans, longest first: the
            # longest that does not overlap a more specific kind wins
            for start, end in (found if isinstance(found, list) else [found]):
                if taken.add(start, end):
                    found_spans.append((*view.span(start, end), kind))
                    break
    spans: list[Span] = []
    for start, end, kind in sorted(found_spans):
        # two matches inside one normalised character ("ﬁ" -> "fi") map to the same
        # original one: the later is trimmed, never overlapping the earlier
        start = max(start, spans[-1].end) if spans else start
        if start < end:
            spans.append(Span(start, end, kind, text[start:end]))
    return spans


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
    found = [m.span() for m in _EMAIL.finditer(text)]
    # the plain ones are the usual case: the obfuscated ones only where a bracket is
    found += [m.span() for m in _OBFUSCATED_EMAIL.finditer(text) if re.search(r"[(\[{<]", m.group())]
    return found


def _cards(text):
    """From each digit group start, the longest run of groups (13-19 digits) passing Luhn.

    Groups are joined by one separator, the same throughout (space, dot or dash), and
    a grouped number has groups of 3-8 digits ("4111.1111.1111.1111", "3782 822463
    10005"), so a decimal such as 3.14159265358979 is not one. Every group start is
    tried, so a number glued to another ("... 0958 4111 1111 1111 1111") is still found;
    a run ends where a letter, or a separator not followed by a digit, comes."""
    out, skip_until = [], -1
    for g in _GROUP_START.finditer(text):
        i = g.start()
        if (i < skip_until or _in_account_number(text, i)
                or _CODE_BEFORE.search(text[max(0, i - 32):i])):
            continue
        best, pos, digits, sep = None, i, "", None
        while (m := _DIGITS.match(text, pos)) and len(digits) + len(m.group()) <= 19:
            if sep and not 3 <= len(m.group()) <= 8:
                break
            digits, pos = digits + m.group(), m.end()
            nxt, after = text[pos:pos + 1], text[pos + 1:pos + 2]
            if (13 <= len(digits) and digits[0] in "23456" and len(set(digits)) > 1
                    and not (nxt.isalnum() or nxt == "_") and luhn_ok(digits)):
                best = (i, pos)
            if not (nxt and nxt in _CARD_SEPARATORS and after.isdigit() and sep in (None, nxt)
                    and 3 <= len(m.group()) <= 8):
                break
            sep, pos = nxt, pos + 1
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
        compact = raw.replace(" ", "").upper()
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
    return bool(m) and not iban_ok(m.group().replace(" ", "").upper())


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
    return [spans for spans in phones.find(text) if not _in_account_number(text, spans[0][0])]


def _names(text):
    return name_finder.find(text)


_FINDERS = {"email": _emails, "iban": _ibans, "card": _cards, "ssn": _ssns, "ip": _ips,
            "phone": _phones, "name": _names}
