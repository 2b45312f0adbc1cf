"""Hard verifier pairs from real passages: counterfactual, paraphrased, near-miss, noisy.

Every pair keeps the ``Pair`` shape of ``training.data`` and its split: the split of the
passage it was made from (``split_of(passage id)``), so a ``test`` pair is built only
from passages no training pair saw. Sets (``Pair.source``):

- ``counterfactual``: a SQuAD or HaluEval-QA passage with its answer span swapped, in
  every place it occurs, for another value of the same type (a year or number shifted,
  a month changed, a name taken from the answers of other questions with the same wh-word).
  Claims: the answer sentence and the question as a claim (``qa_claim``), once with the
  passage's new value (supported) and once with the original, world-known value (not).
- ``counterfactual-vitc``: VitaminC supported pairs whose claim shares a number or name
  with the evidence; the span is changed in the evidence, and the claim with the new
  value is supported, the untouched claim not. Never trained on (a set unlike training).
- ``paraphrase``: from unchanged passages, supported claims reworded by rule (question
  form, a leading phrase moved to the end, parentheses and appositions dropped, common
  words swapped for synonyms) against near misses (``kind``: one changed number, year,
  month, a name swapped for *another name of the same passage*, a negation, a
  quantifier or order word such as all/some, before/after, first/last).
- ``noisy``: a copied sentence or its near miss against the passage as a real chunk
  would hold it: a markdown heading, a bullet list and a table flattened to text from
  another passage around it.

Deliberately not here: reading the raw datasets (``datasets``, ``training.data``) and
model-written paraphrases (no model runs here: the sets must be rebuilt in seconds).
"""

from __future__ import annotations

import random
import re

from specrag.datasets import load_halueval_qa, load_squad
from specrag.datasets.pairs import Pair, qa_claim, split_of, vitaminc
from specrag.datasets.swaps import (
    YEAR,
    answer_pools,
    answer_type,
    gone,
    shifted,
    swap,
    swap_answer,
    whole,
)
from specrag.grounding.spans import key_spans
from specrag.grounding.text import WORD, split_sentences

SETS = ("counterfactual", "counterfactual-vitc", "paraphrase", "noisy")
_SYNONYMS = {"began": "started", "begin": "start", "large": "big", "largest": "biggest",
             "located": "situated", "approximately": "about", "roughly": "about",
             "purchased": "bought", "famous": "well known", "received": "got",
             "established": "set up", "founded": "set up", "built": "constructed",
             "constructed": "built", "created": "made", "demonstrated": "showed",
             "required": "needed", "attempted": "tried", "assisted": "helped",
             "numerous": "many", "initially": "at first", "commenced": "began",
             "nearly": "almost", "often": "frequently", "ended": "finished",
             "important": "significant", "died": "passed away", "obtained": "got",
             "however": "yet", "also": "as well", "popular": "well liked"}
_QUANT = [("all", "some"), ("always", "sometimes"), ("most", "few"), ("many", "few"),
          ("more", "less"), ("before", "after"), ("after", "before"), ("first", "last"),
          ("last", "first"), ("largest", "smallest"), ("highest", "lowest"),
          ("increased", "decreased"), ("won", "lost"), ("north", "south"), ("east", "west")]
_NEG = re.compile(r"\b(is|was|are|were|has|had|can|could|will|would|does|did)\b(?!\s+not)")


def _norm(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def qa_items(settings) -> list[tuple[str, str, str, str]]:
    """(passage id, passage, question, answer) whose answer is in the passage, SQuAD + HaluEval."""
    out = []
    for ds in (load_squad(settings), load_halueval_qa(settings)):
        by_id = ds.passages_by_id()
        for it in ds.items:
            p = by_id[it.gold_passage_id]
            for a in it.answers:
                if a and re.search(whole(a), p.text):
                    out.append((p.id, p.text, it.question, a))
                    break
    return out


def counterfactual(items, seed: int = 0, limit: int | None = None) -> list[Pair]:
    rng = random.Random(seed)
    pools = answer_pools(items)
    out = []
    for pid, text, q, a in items[:limit]:
        swapped = swap_answer(text, q, a, pools, rng)
        if swapped is None:
            continue
        passage, new = swapped
        kind = answer_type(q, a)
        sent = next((s for s in split_sentences(text) if re.search(whole(a), s)), None)
        split = split_of(pid)
        out += [Pair(passage, qa_claim(q, new), 1.0, "counterfactual", split, f"qa-{kind}"),
                Pair(passage, qa_claim(q, a), 0.0, "counterfactual", split, f"qa-{kind}")]
        if sent and 5 <= len(sent.split()) <= 60:
            out += [Pair(passage, swap(sent, a, new), 1.0, "counterfactual", split, f"sentence-{kind}"),
                    Pair(passage, sent, 0.0, "counterfactual", split, f"sentence-{kind}")]
    return out


def counterfactual_vitc(vitc_pairs: list[Pair], seed: int = 0) -> list[Pair]:
    """From VitaminC supported pairs: change a span shared by claim and evidence."""
    rng = random.Random(seed)
    names = sorted({s for p in vitc_pairs for k, s in key_spans(p.hypothesis) if k == "name"})
    out = []
    for p in vitc_pairs:
        if p.label < 0.5:
            continue
        shared = [(k, s) for k, s in key_spans(p.hypothesis)
                  if re.search(whole(s), p.premise)]
        if not shared:
            continue
        kind, span = rng.choice(shared)
        if kind == "number":
            new = shifted(span, "year" if YEAR.match(span) else "number", rng)
        elif kind == "month":
            new = shifted(span, "month", rng).lower() if span.islower() else shifted(span, "month", rng)
        else:  # a few draws: the first may be a name the evidence already holds
            new = next((n for n in (rng.choice(names) for _ in range(5))
                        if n.lower() not in p.premise.lower()), None)
            if new is None:
                continue
        premise, claim = swap(p.premise, span, new), swap(p.hypothesis, span, new)
        if premise == p.premise or claim == p.hypothesis or not gone(span, premise):
            continue
        out += [Pair(premise, claim, 1.0, "counterfactual-vitc", p.split, kind),
                Pair(premise, p.hypothesis, 0.0, "counterfactual-vitc", p.split, kind)]
    return out


def paraphrase(sentence: str, question: str = "", answer: str = "",
               rng: random.Random | None = None) -> str | None:
    """A supported rewording of ``sentence`` by rule, or None when no rule applies."""
    rng = rng or random.Random(0)
    s = sentence.strip().rstrip(".")
    changed = False
    m = re.match(r"^((?:In|On|By|During|After|Before|At|From|Since)\s[^,]{3,40}),\s+(.+)$", s)
    if m:
        s = f"{m[2][0].upper()}{m[2][1:]} {m[1][0].lower()}{m[1][1:]}"
        changed = True
    shorter = re.sub(r"\s*\([^)]*\)", "", s)
    shorter = re.sub(r",\s+(?:which|who)\s[^,]{3,80},", "", shorter)
    if shorter != s and len(shorter.split()) >= 5:
        s, changed = shorter, True
    words = s.split(" ")
    for i, w in enumerate(words):
        key = w.lower().strip(",;")
        if key in _SYNONYMS and rng.random() < 0.8:
            words[i] = w.replace(w.strip(",;"), _SYNONYMS[key])
            changed = True
    s = " ".join(words)
    if not changed:
        if question and answer:
            return qa_claim(question, answer)
        return None
    return s + "."


def near_miss(sentence: str, passage: str, rng: random.Random) -> tuple[str, str] | None:
    """One minimal unsupported change of ``sentence`` and its kind."""
    spans = key_spans(sentence)
    # another name of the same passage, sharing no word with the sentence's names (an
    # abbreviation or a surname of the same entity would make a supported claim)
    taken = {w for k, s in spans if k == "name" for w in s.lower().split()}
    others = [s for k, s in key_spans(passage) if k == "name"
              and s.lower() not in sentence.lower() and not taken & set(s.lower().split())]
    options = []
    for kind, span in spans:
        if kind == "number":
            options.append(("year" if YEAR.match(span) else "number", span,
                            shifted(span, "year" if YEAR.match(span) else "number", rng)))
        elif kind == "month":
            options.append(("month", span, shifted(span, "month", rng).lower()))
        elif others:
            options.append(("name-in-passage", span, rng.choice(others)))
    for a, b in _QUANT:
        if re.search(rf"\b{a}\b", sentence):
            options.append(("quantifier", a, b))
    if (m := _NEG.search(sentence)):
        options.append(("negation", m[0], m[0] + " not"))
    rng.shuffle(options)
    for kind, old, new in options:
        out = swap(sentence, old, new) if kind != "negation" else sentence.replace(old, new, 1)
        if out != sentence:
            return out, kind
    return None


def paraphrase_set(items, seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    out, seen = [], set()
    for pid, text, q, a in items:
        if pid in seen:
            continue
        seen.add(pid)
        sents = [s for s in split_sentences(text) if 6 <= len(s.split()) <= 50]
        if not sents:
            continue
        sent = next((s for s in sents if a in s), rng.choice(sents))
        split = split_of(pid)
        para = paraphrase(sent, q if a in sent else "", a if a in sent else "", rng)
        if para:
            out.append(Pair(text, para, 1.0, "paraphrase", split, "paraphrase"))
        # the near miss of a reworded sentence, never of a question-form claim (a name
        # swapped inside the question would leave its answer supported)
        base = para if para and not para.startswith("The answer to") else sent
        miss = near_miss(base, text, rng)
        if miss and _norm(miss[0]) not in _norm(text):
            out.append(Pair(text, miss[0], 0.0, "paraphrase", split, miss[1]))
    return out


def noisy_chunk(text: str, title: str, other: str, rng: random.Random) -> str:
    """``text`` as a real chunk holds it: a heading, a list and a flattened table around it."""
    other_sents = split_sentences(other)[:3]
    bullets = "\n".join(f"- {s}" for s in other_sents)
    spans = [s for _, s in key_spans(other)][:6] or ["n/a"]
    table = "| Item | Value |\n|---|---|\n" + "\n".join(
        f"| {s} | {rng.randint(2, 990)} |" for s in spans)
    parts = [f"## {title or 'Overview'}", text, bullets, table]
    if rng.random() < 0.5:
        parts[1:3] = [bullets, text]
    return "\n\n".join(parts)


def noisy_set(items, seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    passages = list(dict.fromkeys((pid, text) for pid, text, _, _ in items))
    out = []
    for i, (pid, text) in enumerate(passages):
        sents = [s for s in split_sentences(text) if 6 <= len(s.split()) <= 50]
        if not sents:
            continue
        sent = rng.choice(sents)
        other = passages[(i + 1 + rng.randrange(len(passages) - 1)) % len(passages)][1]
        chunk = noisy_chunk(text, " ".join(sent.split()[:4]), other, rng)
        split = split_of(pid)
        out.append(Pair(chunk, sent, 1.0, "noisy", split, "copied"))
        if (miss := near_miss(sent, text, rng)) and _norm(miss[0]) not in _norm(chunk):
            out.append(Pair(chunk, miss[0], 0.0, "noisy", split, miss[1]))
    return out


def hard_pairs(settings, seed: int = 0, sets: tuple[str, ...] = SETS) -> list[Pair]:
    """Every pair of the chosen sets, every split (callers pick ``test`` or ``train``)."""
    items = qa_items(settings)
    out: list[Pair] = []
    if "counterfactual" in sets:
        out += counterfactual(items, seed)
    if "counterfactual-vitc" in sets:
        out += counterfactual_vitc(vitaminc(settings), seed)
    if "paraphrase" in sets:
        out += paraphrase_set(items, seed)
    if "noisy" in sets:
        out += noisy_set(items, seed)
    return out
