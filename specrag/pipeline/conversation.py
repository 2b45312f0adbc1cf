"""A follow-up searched with its conversation: the question, then a few names and words
of the turns since its topic began (``chat.rewrite: turns``, the default).

``query(question, history, max_chars)`` returns what is searched, verified and
answered: the question as asked when there is no earlier question or when it changes
topic (``changes_topic``), else the question followed by, in brackets, at most
``NAMES`` names (capitalised words past a sentence's start: "Tesla", "Mrs. Smith")
from the topic's questions, newest first, and at most ``WORDS`` content words of the
previous question and of the question that opened the topic: "Where was she raised?
(Beyoncé, breakout, film)". The question's own words stay whole and come first, so
the previous question cannot outweigh it (as the whole previous question glued on,
``chat.rewrite: previous``, did), and the topic's names survive any number of turns.

A question changes topic when it names something the conversation has not, before any
word pointing back ("Who discovered oxygen?" after questions about Tesla; not "Where
did he meet Edison?"), or when it is long, points back nowhere and shares no content
word with the conversation. A topic starts at the first question and at each one that
changed it, so names from before a change never ride along.

Only user turns are read: an assistant turn may be a wrong answer, and the OpenAI
format's history carries no sources, so nothing here needs the server to remember
anything. The words come from questions with instructions to a model removed
(``security.injection``), and the whole stays within ``max_chars``.

Deliberately not here: the previous-question and model rewrites (``followup``), the
retrieval itself, and any model call (``bench followups`` measured why).
"""

from __future__ import annotations

import re

from specrag.security.injection import REMOVED, neutralize

NAMES = 2  # names carried from the topic's questions, newest first
WORDS = 3  # content words carried from the previous and the topic's first question
_NAME = re.compile(r"(?<![.?!]\s)(?<!^)\b[A-Z][\w'.-]*(?:\s+(?:of|the|and|de|[A-Z][\w'.-]*))*")
_FIRST = re.compile(r"\W*([A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*)*)")
_WORD = re.compile(r"[^\W\d_][\w'-]*")
# pronouns and the openings that point back into the conversation
_BACK = re.compile(r"\b(?:it|its|they|them|their|theirs|these|those|he|him|his|she|her|hers|"
                   r"the same|the other|the former|the latter)\b|^\W*(?:and|but|or|so|"
                   r"what about|how about|what if)\b", re.IGNORECASE)
_WEAK = re.compile(r"\b(?:this|that|there|then|one|ones|also|too|more|either|neither|else|"
                   r"another|again|instead)\b", re.IGNORECASE)
_MIN_NAMED = 4  # words: a shorter question naming someone new is about the same story
_MIN_UNSHARED = 9  # words: a question this long sharing no word starts a new topic
_STOP = frozenset("""
a an the of to in on at for by with from and or but if then than that this these those is are
was were be been being do does did done have has had having can could will would shall should
may might must what which who whom whose when where why how much many there here it its they
them their he him his she her i me my we us our you your not no yes also too more most other
another some any each every one ones all both about into over under after before during
between among through again further once only own same so very just else instead name named
called call type kind part way get got make made go went say said year years time first last
new long often far old big large small well good best better less least few second third next
whole such even ever still already tell""".split())
_OPENERS = frozenset("""besides along although according despite following including
excluding unlike like apart aside given based prior compared due except""".split())


def names(text: str) -> list[str]:
    """Capitalised names in ``text``, in order: past a sentence's first word, or opening
    it when that word is no common word ("Luther went to bed ...", not "Besides ...")."""
    out = []
    first = _FIRST.match(text)
    if first and first[1].split()[0].lower() not in _STOP | _OPENERS:
        out.append(first[1])
    for m in _NAME.finditer(text):
        name = re.sub(r"(?:\s+(?:of|the|and|de))+$", "", m.group(0)).removesuffix("'s")
        if len(name) > 1 and name.lower() not in _STOP:
            out.append(name)
    return out


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if len(w) > 2 and w.lower() not in _STOP]


def changes_topic(question: str, earlier: list[str]) -> bool:
    """Whether ``question`` starts a topic of its own after the ``earlier`` questions."""
    if not earlier:
        return True
    q, n = question.strip(), len(question.split())
    said = " ".join(earlier).lower()
    new = [x for x in names(q) if x.lower() not in said]
    back = _BACK.search(q)
    if new and n >= _MIN_NAMED and (not back or back.start() > min(q.find(x) for x in new)):
        return True
    known = {w.lower() for w in content_words(said)}
    return (n >= _MIN_UNSHARED and not back and not _WEAK.search(q)
            and not any(w.lower() in known for w in content_words(q)))


def topic(earlier: list[str]) -> list[str]:
    """The questions since the last one that changed topic (all when none did)."""
    start = 0
    for i in range(1, len(earlier)):
        if changes_topic(earlier[i], earlier[:i]):
            start = i
    return earlier[start:]


def context(question: str, earlier: list[str]) -> list[str]:
    """The names and words ``query`` adds to ``question``, none of them already in it."""
    turns = [" ".join(neutralize(t)[0].replace(REMOVED, " ").split()) for t in topic(earlier)]
    taken = {w.lower() for w in _WORD.findall(question)}
    found, seen = [], set()
    for turn in reversed(turns):
        for name in names(turn):
            if name.lower() not in seen and name.lower() not in question.lower():
                seen.add(name.lower())
                found.append(name)
    found = found[:NAMES]
    taken |= {w.lower() for w in _WORD.findall(" ".join(found))}
    words = []
    for turn in turns[-1:] + turns[:1] * (len(turns) > 1):
        for w in content_words(turn):
            if w.lower() not in taken:
                taken.add(w.lower())
                words.append(w)
    return found + words[:WORDS]


def query(question: str, history: list[dict] | None, max_chars: int) -> str:
    """What ``question`` (at most ``max_chars``) is searched as, at most ``max_chars``."""
    earlier = [str(m["content"]) for m in history or ()
               if m.get("role") == "user" and m.get("content")]
    if changes_topic(question, earlier):
        return question
    extra = context(question, earlier)
    while extra and len(question) + len(", ".join(extra)) + 3 > max_chars:
        extra.pop()
    return f"{question} ({', '.join(extra)})" if extra else question
