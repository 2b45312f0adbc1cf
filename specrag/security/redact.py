"""Swap personal data for placeholders before a request leaves, and swap it back in the reply.

One ``Redaction`` per request: ``redact(text)`` replaces each value ``pii.detect``
finds with ``<KIND_n>`` (``<EMAIL_1>``, ``<NAME_2>``); the same value (normalised:
case, spaces, dashes) gets the same placeholder in every message of the request, so
the model can still tell two people apart and refer back to them. ``restore(text)``
puts the original text back, also when the model wrote the placeholder without its
brackets, with ``[...]`` or HTML-escaped (documents reach the model escaped).
``StreamRestorer`` does the same for a stream of deltas: a placeholder split across
deltas (``"<EMA"`` + ``"IL_1>"``) is held back until it is complete or cannot be one.

Deliberately not here: detection (``pii``), deciding which backends need it
(``redacting``). Placeholders are not secret: they only hide the values.
"""

from __future__ import annotations

import ipaddress
import re
import string
from collections import Counter

from specrag.security.pii import KINDS, Span, detect

_EXISTING = re.compile(r"<([A-Z]+)_(\d+)>")
# a placeholder as the model may write it back: <L>, &lt;L&gt; (escaped), [L] or bare L
_PLACEHOLDER = re.compile(r"(?:&lt;|<|\[)?(?<![A-Za-z0-9_])([A-Z]+_\d+)(?![A-Za-z0-9_])"
                          r"(?:&gt;|>|\])?")
FORM_CHARS = frozenset(string.ascii_letters + string.digits + "_<>&;[]")


def normalise(kind: str, value: str) -> str:
    if kind in ("phone", "card", "ssn"):
        return re.sub(r"\D", "", value)
    if kind == "iban":
        return value.replace(" ", "").upper()
    if kind == "ip":
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            return value
    if kind == "email":
        return value.lower()
    return " ".join(value.split()).lower()


class Redaction:
    def __init__(self, kinds=KINDS):
        self.kinds = tuple(kinds)
        self._by_key: dict[tuple[str, str], str] = {}
        self.originals: dict[str, str] = {}  # label ("EMAIL_1") -> first original text
        self.counts: Counter = Counter()  # values replaced per kind (occurrences)
        self._reserved: set[str] = set()
        self._next: Counter = Counter()  # last number used per kind

    # -- out ------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        if not text:
            return text
        # a placeholder-looking string already in the text (e.g. typed into a question)
        # must never be mistaken for ours when the reply is restored
        self._reserved.update(f"{k}_{n}" for k, n in _EXISTING.findall(text))
        out, pos = [], 0
        for span in detect(text, self.kinds):
            out.append(text[pos:span.start])
            out.append(f"<{self._label(span)}>")
            pos = span.end
        out.append(text[pos:])
        return "".join(out)

    def redact_messages(self, messages: list[dict]) -> list[dict]:
        """Copies of chat messages with every text part redacted."""
        safe = []
        for m in messages:
            content = m.get("content")
            if isinstance(content, str):
                content = self.redact(content)
            elif isinstance(content, list):
                content = [dict(b, text=self.redact(b["text"])) if isinstance(b, dict)
                           and isinstance(b.get("text"), str) else b for b in content]
            safe.append(dict(m, content=content))
        return safe

    def _label(self, span: Span) -> str:
        key = (span.kind, normalise(span.kind, span.text))
        self.counts[span.kind] += 1
        if key not in self._by_key:
            n = self._next[span.kind] + 1
            while f"{span.kind.upper()}_{n}" in self._reserved:
                n += 1
            self._next[span.kind] = n
            label = f"{span.kind.upper()}_{n}"
            self._reserved.add(label)
            self._by_key[key] = label
            self.originals[label] = span.text
        return self._by_key[key]

    # -- back -----------------------------------------------------------------------
    def restore(self, text: str) -> str:
        """``text`` with our placeholders replaced by the original values."""
        if not self.originals or not text:
            return text
        return _PLACEHOLDER.sub(lambda m: self.originals.get(m.group(1), m.group(0)), text)


class StreamRestorer:
    """Restore placeholders in streamed deltas; ``feed`` each delta, then ``flush``.

    A placeholder in any of its forms, and the characters the restore pattern looks
    at around it, are made only of ``FORM_CHARS``. So text is released up to the last
    character that is *not* one of them (a space, most punctuation, any non-ASCII
    letter): no placeholder can straddle that cut, and restoring the released part on
    its own gives exactly what restoring the whole reply would. Only the trailing run
    of such characters (usually part of one word) is held back.
    """

    def __init__(self, redaction: Redaction):
        self.redaction = redaction
        self._held = ""

    def feed(self, delta: str) -> str:
        buf = self._held + delta
        cut = len(buf)
        while cut and buf[cut - 1] in FORM_CHARS:
            cut -= 1
        ready, self._held = buf[:cut], buf[cut:]
        return self.redaction.restore(ready)

    def flush(self) -> str:
        ready, self._held = self._held, ""
        return self.redaction.restore(ready)
