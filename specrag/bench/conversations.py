"""Multi-turn conversations built by code from SQuAD, for ``bench followups``.

``build(items, passages, seed)`` turns the SQuAD questions of one article (its title is
the conversation's subject) into conversations of 4 to ``MAX_TURNS`` turns. Turn one is
a question that names the subject, as SQuAD asks it. Each later turn is another question
of the same article, questions about one paragraph kept together, with the subject (or a
name the previous turn used) replaced by a pronoun: "he"/"she" (and "him", "his", "her")
when the paragraph speaks of the subject so, "they" for a plural, "that <noun>" for a
name ending in a common noun the paragraph uses ("that museum"), else "it". A question
that names none of them cannot become a follow-up and is left out. Every other
conversation (seeded) changes topic: after a few turns it goes on with the first
question of a conversation about another article, as asked (``topic_change``), and that
conversation's follow-ups. Each turn keeps the SQuAD answers and the file of the
paragraph that holds them (``datasets.passage_file_name``).

``load_or_build(path, ...)`` writes the conversations to a JSON-lines file once and
reads them from it afterwards, so every run measures the same conversations.

Deliberately not here: retrieval or answering (``bench.multiturn``), and any model:
the follow-ups are string edits, so a few read a little stiffly.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specrag.datasets import Passage, passage_file_name, passage_id

MAX_TURNS = 6
MIN_TURNS = 4
_SUBJECT_BEFORE = re.compile(r"(?:^|\b(?:did|does|do|was|is|were|are|has|have|had|can|could|"
                             r"will|would|when|where|why|how|who|and)\s+)$", re.IGNORECASE)
# a word after the name that shows the name is not a noun's modifier ("the ABC logo")
_NOT_MODIFIER = re.compile(
    r"(?:[a-z]+ed|in|on|at|to|for|with|by|of|from|about|as|and|or|but|than|that|which|who|"
    r"when|where|during|after|before|into|over|under|since|between|among|is|was|are|were|"
    r"be|been|has|have|had|do|does|did|can|could|will|would|should|must|may|might|first|"
    r"also|ever|still|not|never|only|currently|originally|finally|later|last|use|say|"
    r"claim|think|believe|go|get|take|make|play|consider|want|need|begin|become)\W*$",
    re.IGNORECASE)
_DETERMINERS = {"a", "an", "what", "which", "whose", "this", "that", "these", "those", "each",
                "every", "any", "no", "some"}
_NAMED = re.compile(r"(?<=\w )[A-Z][a-z]")  # a capitalised word after the first
_PRONOUNS = {"he": ("he", "him", "his"), "she": ("she", "her", "her"),
             "they": ("they", "them", "their"), "it": ("it", "it", "its")}


@dataclass(frozen=True)
class Turn:
    question: str  # as asked in the conversation
    original: str  # as SQuAD asks it
    answers: tuple[str, ...]
    gold: str  # file name of the paragraph that answers it
    topic_change: bool = False
    replaced: str = ""  # the name a pronoun stands for ("" for a first turn)


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    turns: tuple[Turn, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> "Conversation":
        d = json.loads(line)
        turns = tuple(Turn(**{**t, "answers": tuple(t["answers"])}) for t in d["turns"])
        return cls(d["id"], d["title"], turns)


def subject_names(title: str, text: str = "", person: bool = False) -> list[str]:
    """The ways a question may name an article's subject, longest first: the title
    without a bracketed part or a ", State"; a common noun's title in lower case and
    its last word ("inequality" of "Economic inequality"); a name's initials where
    ``text`` (the article's paragraphs) uses them ("ABC"), the name without a trailing
    number ("Super Bowl"), and a ``person``'s names ("Tesla" of "Nikola Tesla")."""
    name = re.sub(r"\s*\(.*?\)", "", title).split(",")[0].strip()
    words = name.split()
    caps = [w for w in words if w[:1].isupper()]
    out = [name]
    if len(words) > 1 and re.search(rf"\b{re.escape(name.lower())}\b", text):
        out += [name.lower(), words[-1].lower()]
    elif len(caps) > 1:
        initials = "".join(w[0] for w in caps)
        out += [initials] if re.search(rf"\b{initials}\b", text) else []
        out += [" ".join(w for w in words if not w[:1].isdigit())] if words[-1].isdigit() else []
        out += [w for w in caps if len(w) >= 4] if person else []
    return list(dict.fromkeys(out))


def pronoun_kind(name: str, text: str) -> str:
    """"he", "she", "they" or "it" for ``name``, read off how ``text`` (its article's
    paragraphs) speaks: a name of capitalised words spoken of as "he" more than as "it"
    is a man."""
    low = f" {text.lower()} "
    he = len(re.findall(r"\b(?:he|his|him)\b", low))
    she = len(re.findall(r"\b(?:she|her|hers)\b", low))
    it = len(re.findall(r"\b(?:it|its)\b", low))
    words = name.split()
    person = len(words) > 1 and all(w[:1].isupper() for w in words) and not re.search(r"\d", name)
    if person and max(he, she) >= 3 and max(he, she) > 1.5 * it:
        return "he" if he >= she else "she"
    if name.endswith("s") and not name.endswith(("ss", "us", "is")) and " " not in name:
        return "they"
    return "it"


def follow_up(question: str, name: str, passage: str, kind: str = "it",
              full: str = "") -> str | None:
    """``question`` with ``name`` (and "the" before it) replaced by a pronoun of ``kind``
    (its possessive for "X's" and for "the X <noun>"), or by "that <noun>" for a name
    ending in a noun ``passage`` uses, else None when the question does not name it as a
    whole (not "Apollo" of "Apollo 8", "European" of "Single European Act", "civil
    disobedience" of ``full`` "Civil disobedience" when ``name`` is "disobedience")."""
    common = not name[:1].isupper() or re.search(rf"\b{re.escape(name.lower())}\b", passage)
    parts = {w.lower() for w in full.split()} - {name.lower()}
    plural = "(?P<pl>s|es)?" if common else "(?P<pl>)"
    for m in re.finditer(rf"(?P<the>\b[Tt]he\s+)?(?<![\w-]){re.escape(name)}{plural}"
                         rf"(?P<pos>'s|')?(?![\w-])", question, re.IGNORECASE if common else 0):
        before = question[:m.start()].split()
        nxt = re.match(r"\s+([\w'-]+)", question[m.end():])  # the next word, if no mark between
        after = [nxt[1]] if nxt else []
        near = [w.lower().strip("?,.'") for w in before[-1:] + after]
        subject = bool(_SUBJECT_BEFORE.search(question[:m.start()]))
        modifier = bool(after and not m["pos"] and not subject
                        and not _NOT_MODIFIER.match(after[0]))
        if ((after and re.match(r"[A-Z\d]", after[0])) or any(w in parts for w in near)
                or (len(before) > 1 and before[-1][:1].isupper())
                or (before and before[-1].lower() in _DETERMINERS)
                or (modifier and not m["the"])):
            continue  # part of a longer name, or a modifier that no pronoun replaces
        words = name.split()
        noun = words[-1].lower()
        if (len(words) > 1 and len(noun) >= 4 and not m["pos"] and not m["pl"] and not modifier
                and re.search(rf"\b{re.escape(noun)}\b", passage)):
            pronoun = f"that {noun}"
        else:
            forms = _PRONOUNS["they" if m["pl"] else kind]
            pronoun = forms[2] if m["pos"] or modifier else forms[0] if subject or (
                after and _NOT_MODIFIER.match(after[0]) and after[0].endswith("ed")) else forms[1]
        if m.start() == 0:
            pronoun = pronoun[:1].upper() + pronoun[1:]
        return question[:m.start()] + pronoun + question[m.end():]
    return None


def _as_follow_up(item, names: list[str], passage: str, kind: str) -> tuple[str, str] | None:
    """(question, replaced name) for the first of ``names`` the question names."""
    for name in names:
        asked = follow_up(item.question, name, passage, kind, names[0])
        if asked:
            return asked, name
    return None


def build(items, passages: dict, seed: int = 0, exclude: set[str] = frozenset()) -> list[Conversation]:
    """Conversations from QA items (``datasets.QAItem``) over ``passages`` (id -> Passage),
    leaving out items whose paragraph id is in ``exclude``."""
    rng = random.Random(seed)
    by_title: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for it in items:
        if it.gold_passage_id not in exclude:
            by_title[passages[it.gold_passage_id].title][it.gold_passage_id].append(it)
    plain = []
    for title in sorted(by_title):
        paragraphs = sorted(by_title[title].items())
        rng.shuffle(paragraphs)
        queue = [(pid, it) for pid, its in paragraphs for it in its]
        text = " ".join(passages[pid].text for pid, _ in paragraphs)
        kind = pronoun_kind(subject_names(title)[0], text)
        names = subject_names(title, text, person=kind in ("he", "she"))
        while queue:
            first = next((i for i, (pid, it) in enumerate(queue)
                          if _as_follow_up(it, names, passages[pid].text, kind)), None)
            if first is None:
                break
            start = queue.pop(first)
            pid, it = start
            turns = [Turn(it.question, it.question, tuple(it.answers), passage_file_name(pid))]
            rest = []
            for pid, it in queue:
                made = None if len(turns) == MAX_TURNS else _as_follow_up(
                    it, names, passages[pid].text, kind)
                if made:
                    turns.append(Turn(made[0], it.question, tuple(it.answers),
                                      passage_file_name(pid), replaced=made[1]))
                else:
                    rest.append((pid, it))
            if len(turns) >= MIN_TURNS:
                plain.append(Conversation(f"{len(plain):03d}", title, tuple(turns)))
                queue = rest  # a start too short for a conversation gives its turns back
    return [_with_topic_change(c, plain, rng) if i % 2 else c for i, c in enumerate(plain)]


def _with_topic_change(conv: Conversation, pool: list[Conversation], rng) -> Conversation:
    """After 2+ of its turns, the conversation goes on about another article."""
    other = rng.choice([c for c in pool if c.title != conv.title and c.id != conv.id])
    keep = rng.randint(2, len(conv.turns) - 1)
    moved = (Turn(**{**asdict(other.turns[0]), "topic_change": True}),) + other.turns[1:3]
    return Conversation(conv.id, f"{conv.title} -> {other.title}", conv.turns[:keep] + moved)


def coqa(path: Path, n: int | None = None, max_turns: int = 10, seed: int = 0):
    """(passages, conversations) from CoQA's validation set as OLMo's eval packs it
    (``path``: its ``requests.jsonl.gz``): all its stories, and the first ``max_turns``
    turns of ``n`` seeded conversations, every other one changing topic like ``build``'s."""
    stories: dict[str, dict] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)["doc"] if line.strip() else None
            if doc and doc["id"].endswith("_turn0"):
                stories[doc["id"].rsplit("_turn", 1)[0]] = doc
    passages = {passage_id(d["story"].strip()): Passage(passage_id(d["story"].strip()),
                                                       d["story"].strip()) for d in stories.values()}
    keys = sorted(stories)
    rng = random.Random(seed)
    keys = sorted(rng.sample(keys, n)) if n and n < len(keys) else keys
    plain = []
    for key in keys:
        doc = stories[key]
        pid = passage_id(doc["story"].strip())
        # each turn's answer is the one its conversation gave (previous_qa holds them all)
        turns = [Turn(qa["question"].strip(), qa["question"].strip(), (qa["answer"].strip(),),
                      passage_file_name(pid)) for qa in doc["previous_qa"][:max_turns]]
        turns[0] = Turn(doc["question"].strip(), doc["question"].strip(),
                        tuple(dict.fromkeys(a.strip() for a in doc["answers"])),
                        passage_file_name(pid))
        plain.append(Conversation(f"{doc['source']}-{key}", doc["source"], tuple(turns)))
    # a topic change names its new subject, as a first question about a story may not
    named = [c for c in plain if _NAMED.search(c.turns[0].question)]
    convs = [_with_topic_change(c, named, rng) if i % 2 else c for i, c in enumerate(plain)]
    return passages, convs


def load_or_build(path: Path, make) -> list[Conversation]:
    """The conversations in ``path``, or ``make()``'s written there first."""
    if path.exists():
        return [Conversation.from_json(line) for line in path.read_text(encoding="utf-8")
                .splitlines() if line.strip()]
    convs = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(c.to_json() + "\n" for c in convs), encoding="utf-8")
    return convs
