"""A matching view of text (NFKC, invisible format characters dropped) that maps back to it.

The PII finders run on ``TextView(text).text``; ``view.span(start, end)`` turns a match
there into offsets in the original, so a placeholder replaces exactly what was
written. NFKC folds fullwidth digits and letters ("４１１１"), the fullwidth at sign,
ligatures and no-break spaces to their plain forms; format characters (zero-width
space, soft hyphen, word joiner, bidi marks) are dropped, so "4111\\u200b1111 ..." is
still one number. Each base character is normalised together with the combining marks
and format characters after it, so "e" + U+0301 still composes to "é" and no
character is split between two spans.

Text that is already NFKC and has no format characters (almost all of it) is used as
it is, with no copy and no map.

``MARK`` is a regex class of the combining marks, for finders that match words.

Deliberately not here: case folding (each finder decides: IBANs are upper-cased for the
checksum, names need their case) and folding look-alike letters across scripts
(Cyrillic "а" for Latin "a"), which would turn real Cyrillic names into gibberish.
"""

from __future__ import annotations

import re
import unicodedata

# zero-width characters, soft hyphen, bidi controls, word joiners, BOM
_FORMAT = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


def _mark_class() -> str:
    """A regex class of every combining mark: ``\\w`` leaves them out, yet a name or an
    address in Devanagari or Thai is letters *and* marks ("प्रिया")."""
    ranges, start = [], None
    for cp in range(0x300, 0x20001):
        is_mark = cp < 0x20000 and unicodedata.category(chr(cp))[0] == "M"
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            ranges.append(f"\\U{start:08x}-\\U{cp - 1:08x}")
            start = None
    return "[" + "".join(ranges) + "]"


MARK = _mark_class()


class TextView:
    def __init__(self, original: str):
        self.original = original
        if unicodedata.is_normalized("NFKC", original) and not _FORMAT.search(original):
            self.text, self._starts, self._ends = original, None, None
            return
        out: list[str] = []
        starts: list[int] = []  # per output character: the original cluster it came from
        ends: list[int] = []
        i, n = 0, len(original)
        while i < n:
            j = i + 1
            while j < n and (unicodedata.category(original[j])[0] == "M"
                             or _FORMAT.match(original[j])):
                j += 1
            piece = unicodedata.normalize("NFKC", _FORMAT.sub("", original[i:j]))
            out.append(piece)
            starts.extend([i] * len(piece))
            ends.extend([j] * len(piece))
            i = j
        self.text, self._starts, self._ends = "".join(out), starts, ends

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original offsets of ``text[start:end]`` (``end > start``)."""
        if self._starts is None:
            return start, end
        return self._starts[start], self._ends[end - 1]
