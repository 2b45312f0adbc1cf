"""Person names beyond any fixed list: runs of capitalised words, judged by their context.

``find(text)`` returns ``(start, end)`` spans. Words are letters of any script with
their combining marks, inner hyphens and apostrophes ("Ní", "O'Sullivan", "Nguyễn",
"Mensah-Bonsu"). Consecutive capitalised words, with lower-case particles between them
("van der", "de la", "bint") and initials ("J."), form a *run*; a stop word
(``common_words``: "Please", "Policy", "Monday") ends it. A run is a person when:

1. a title, greeting or sign-off comes right before it ("Dr.", "Frau", "Dear",
   "Regards,\\n"), even if it is a common word ("Dear Grace") or in a script without
   capitals ("Dear 王伟");
2. otherwise not, when it looks like a place or product: a known one ("Kuala Lumpur",
   "Adobe"), a place starter ("San", "Porto"), a determiner or "in" before it, or a
   place noun after it ("the Tirana office");
3. otherwise, when a person cue comes before it ("contact", "signed by", "patient",
   "cc:"), a person verb after it ("said", "approved"), or it follows a name in a list
   ("A B, C D and E F"): one word is enough;
4. otherwise, when it has two to four capitalised words, or one that is a listed given
   name after a weak cue ("and Maria").

Scripts without case (Han, Devanagari, Arabic, Thai ...) are found only under rules 1
and 3, and only as space-separated words. Not covered: a lone unlisted name with no
cue ("Xochitl from accounting"), names in all capitals, names glued into CJK text, and
names made only of stop words ("Will May" without a title).

Deliberately not here: the word lists (``names``, ``common_words``), other kinds of
personal data (``pii``).
"""

from __future__ import annotations

import re

from specrag.security.common_words import NOT_PERSON, PLACE_NOUNS, PLACE_STARTERS, STOP_WORDS
from specrag.security.names import (
    GIVEN_NAMES,
    GREETINGS,
    PARTICLES,
    PERSON_CUES,
    PERSON_VERBS,
    TITLES,
    WEAK_CUES,
)
from specrag.security.textview import MARK

_LETTER = rf"(?:[^\W\d_]|{MARK})"
_WORD = re.compile(rf"{_LETTER}+(?:['’-]{_LETTER}+)*")
_GAP = re.compile(r"[ \t]{1,2}")  # between words of one name
_INITIAL_GAP = re.compile(r"\.?[ \t]{1,2}")  # after an initial: "J. Quispe"
_POSSESSIVE = ("'s", "’s")
MAX_WORDS = 4


def _alternatives(words) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len,
                                                                      reverse=True))


_TITLE_BEFORE = re.compile(rf"(?<!\w)(?:{_alternatives(TITLES)})\.?\s+$")
_GREETING_BEFORE = re.compile(rf"(?<!\w)(?:{_alternatives(GREETINGS)}),?[ \t]+$", re.I)
_SIGN_OFF_BEFORE = re.compile(r"(?<!\w)(?:regards|best|best wishes|sincerely|cheers|thanks|"
                              r"thank you|yours|saludos|atentamente|grüße|gruß|cordialement)"
                              r"[,!.]?[ \t]*\n[ \t]*$", re.I)
_CUE_BEFORE = re.compile(rf"(?<!\w)(?:{_alternatives(PERSON_CUES)})[:,]?\s+$", re.I)
_WEAK_BEFORE = re.compile(rf"(?<!\w)(?:{_alternatives(WEAK_CUES)})\s+$", re.I)
_PLACE_BEFORE = re.compile(r"(?<!\w)(?:the|our|your|their|its|this|that|in|near|across|"
                           r"throughout|around|visit|visiting|outside|inside)\s+$", re.I)
_VERB_AFTER = re.compile(rf"^\s+(?:{_alternatives(PERSON_VERBS)})\b", re.I)
_PLACE_AFTER = re.compile(rf"^\s+(?:{_alternatives(PLACE_NOUNS)})\b", re.I)
_LIST_JOIN = re.compile(r"\s*,\s*|\s+(?:and|&|or|y|und|et)\s+|\s*,\s+and\s+")


def find(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    last_end = -1  # end of the last accepted name, for "A B, C D and E F"
    for run in _runs(text):
        span = _judge(text, run, listed=last_end >= 0
                      and _LIST_JOIN.fullmatch(text, last_end, run[0][0]) is not None)
        if span:
            out.append(span)
            last_end = span[1]
    return out


def _words(text: str):
    """(start, end, kind) per word: kind is cap, caseless, particle or stop."""
    for m in _WORD.finditer(text):
        s, e = m.span()
        word = m.group()
        if word.endswith(_POSSESSIVE) and len(word) > 3:
            e -= 2
            word = word[:-2]
        first = word[0]
        if first.isupper() or first.istitle():
            stop = (word in STOP_WORDS or word in TITLES or word in GREETINGS
                    or (len(word) > 1 and word.isupper()))  # ALL CAPS: acronyms, headings
            yield s, e, "stop" if stop else "cap"
        elif first.islower():
            yield s, e, "particle" if word in PARTICLES else "stop"
        else:
            yield s, e, "caseless"


def _runs(text: str):
    """Lists of (start, end, kind): capitalised words joined by gaps, particles inside;
    caseless words make runs of their own."""
    run: list[tuple[int, int, str]] = []
    for word in _words(text):
        kind = word[2]
        gap = _INITIAL_GAP if run and run[-1][1] - run[-1][0] == 1 else _GAP
        joins = run and gap.fullmatch(text, run[-1][1], word[0]) is not None and (
            kind == "particle" or (kind == "caseless") == (run[0][2] == "caseless"))
        if joins and kind != "stop":
            run.append(word)
            continue
        yield from _split(text, run)
        run = [word] if kind in ("cap", "caseless") else []
    yield from _split(text, run)


def _split(text: str, run):
    """The run without trailing particles; a long one is cut before each listed given
    name ("Maria Garcia Maria Garcia Maria Garcia" is three people), and what is still
    longer than a name is dropped (a Title Case heading)."""
    while run and run[-1][2] == "particle":
        run = run[:-1]
    if not run:
        return
    if sum(w[2] != "particle" for w in run) <= MAX_WORDS:
        yield run
        return
    cuts = [i for i, w in enumerate(run) if i and text[w[0]:w[1]] in GIVEN_NAMES]
    for a, b in zip([0] + cuts, cuts + [len(run)]):
        if sum(w[2] != "particle" for w in run[a:b]) <= MAX_WORDS:
            yield from _split(text, run[a:b])


def _judge(text: str, run, listed: bool):
    start, end = run[0][0], run[-1][1]
    before, after = text[max(0, start - 40):start], text[end:end + 30]
    if (_TITLE_BEFORE.search(before) or _GREETING_BEFORE.search(before)
            or _SIGN_OFF_BEFORE.search(before)):
        return start, end  # rule 1
    words = [text[s:e] for s, e, kind in run if kind != "particle"]
    if (any(w in NOT_PERSON for w in words) or words[0] in PLACE_STARTERS
            or _PLACE_BEFORE.search(before) or _PLACE_AFTER.search(after)):
        return None  # rule 2
    if listed or _CUE_BEFORE.search(before) or _VERB_AFTER.search(after):
        return start, end  # rule 3
    if run[0][2] == "caseless":
        return None
    if len(words) >= 2 or (words[0] in GIVEN_NAMES and _WEAK_BEFORE.search(before)):
        return start, end  # rule 4
    return None
