"""Which questions the answer checker's drafts are written for, and in what order.

``plan(datasets, bench_ids, bench_pids, n, seed, kinds_of)`` returns up to ``n``
``Planned`` questions drawn from the sets of ``checker_sources`` by ``SHARES`` (what
is left short by a small set goes to HaluEval-QA's answerable questions), spread evenly
over the list so that a run stopped anywhere holds every dataset and kind in proportion:

- ``answerable`` (or ``number`` / ``yes-no`` by the gold, ``checker_label.kind_of``):
  the question over a collection that holds its passage;
- ``counterfactual``: the answer swapped in the passage for another value of its kind
  (``training.swaps.swap_answer``, names of the same kind when ``kinds_of`` ranks them,
  ``answer_kinds``), the new value the gold; the swap is made in every retrieved chunk
  that holds the old value (``checker_data.Steered``), so no chunk contradicts it;
- ``unanswerable``: the question asked without its passage and without any chunk that
  holds a gold span (the right draft abstains).

Each kind draws from the questions the kinds before it left, shuffled again, so its list
is not ordered by what they took. Every item the e2e benchmark may sample (``bench_ids``) and every item over a passage it
reads (``bench_pids``) is left out, and within a dataset each question serves one kind
only. ``corpus(datasets, bench_pids)`` is what each collection ingests: the passages less
the benchmark's, so none can even be retrieved. Deliberately not here: the drafts
(``checker_data``) and the labels (``checker_label``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from specrag.bench.metrics import containment, normalize
from specrag.datasets import QADataset, QAItem, passage_file_name
from specrag.training.checker_label import kind_of
from specrag.training.swaps import answer_pools, swap_answer, whole

# share of n per (dataset, kind); "answerable" also stands for number and yes-no by gold
SHARES = {
    ("halueval-qa", "answerable"): 0.30, ("halueval-qa", "counterfactual"): 0.10,
    ("halueval-qa", "unanswerable"): 0.12, ("squad", "answerable"): 0.03,
    ("squad", "counterfactual"): 0.04, ("sciq", "answerable"): 0.05,
    ("sciq", "unanswerable"): 0.02, ("boolq", "answerable"): 0.18,
    ("boolq", "unanswerable"): 0.02, ("drop", "answerable"): 0.08,
}
FILLER = ("halueval-qa", "answerable")  # takes what the others cannot fill
ORDER = ("counterfactual", "unanswerable", "answerable")  # who draws from a set's pool first


@dataclass(frozen=True)
class Planned:
    id: str  # the row's id: unique over kinds ("cf:", "un:" prefixes)
    base_id: str  # the source question's id: split the checker's data by this
    dataset: str
    kind: str
    question: str
    gold: tuple[str, ...]
    passage_id: str
    swap: tuple[str, str] | None = None  # (the world's value, the passage's) when counterfactual

    @property
    def source(self) -> str:
        return passage_file_name(self.passage_id)

    def to_dict(self) -> dict:
        return {"id": self.id, "base_id": self.base_id, "dataset": self.dataset,
                "kind": self.kind, "question": self.question, "gold": list(self.gold),
                "passage_id": self.passage_id, "swap": list(self.swap) if self.swap else None}

    @classmethod
    def from_dict(cls, d: dict) -> "Planned":
        return cls(d["id"], d["base_id"], d["dataset"], d["kind"], d["question"],
                   tuple(d["gold"]), d["passage_id"], tuple(d["swap"]) if d.get("swap") else None)


def collection(dataset: str) -> str:
    return f"checker-{dataset}"


def corpus(datasets: dict[str, QADataset], bench_pids: set[str]) -> dict[str, list]:
    """dataset -> the (file name, bytes) its collection ingests: no benchmark passage."""
    return {name: [(passage_file_name(p.id), p.document().encode()) for p in ds.passages
                   if p.id not in bench_pids] for name, ds in datasets.items()}


def quotas(n: int, available: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    out = {key: min(available.get(key, 0), round(share * n)) for key, share in SHARES.items()}
    out[FILLER] = min(available.get(FILLER, 0), out.get(FILLER, 0) + max(0, n - sum(out.values())))
    return out


def _answer_in(item: QAItem, text: str) -> str | None:
    """The first gold answer written in the passage and not in the question."""
    return next((a for a in item.answers if a and re.search(whole(a), text)
                 and not containment(item.question, [a])), None)


def _swaps(items: list[QAItem], texts: dict[str, str], want: int, rng, kinds_of) -> list:
    """(item, (old, new)) for up to ``want`` items whose answer swaps cleanly."""
    found = [(it.gold_passage_id, texts[it.gold_passage_id], it.question, a, it)
             for it in items[:max(0, 3 * want)] if (a := _answer_in(it, texts[it.gold_passage_id]))]
    pools = answer_pools([f[:4] for f in found])
    like = kinds_of([f[:4] for f in found]) if kinds_of and found else None
    out = []
    for _, text, q, a, it in found:
        if len(out) >= want:
            break
        if (res := swap_answer(text, q, a, pools, rng, like)) is not None:
            out.append((it, (a, res[1])))
    return out


def _hideable(item: QAItem) -> bool:
    """An unanswerable version needs gold spans that can be searched for in chunks (not
    yes/no, not a bare number found everywhere) or a set whose passages are one each."""
    return all(normalize(a) not in ("yes", "no") and kind_of((a,)) != "number"
               for a in item.answers)


def plan(datasets: dict[str, QADataset], bench_ids: set[str], bench_pids: set[str], n: int,
         seed: int = 0, kinds_of=None) -> list[Planned]:
    """Up to ``n`` questions (see the module docstring); ``kinds_of(found)``: same-kind
    swap candidates (``answer_kinds.for_items``), None for any answer of the wh-word."""
    streams: dict[tuple[str, str], list[Planned]] = {}
    for name, ds in datasets.items():
        rng = random.Random(f"{seed}:{name}")
        texts = {p.id: p.text for p in ds.passages}
        pool = [it for it in ds.items if it.id not in bench_ids
                and it.gold_passage_id not in bench_pids and it.gold_passage_id in texts]
        rng.shuffle(pool)
        used: set[str] = set()
        for kind in ORDER:
            key = (name, kind)
            if key not in SHARES:
                continue
            # shuffled again: what an earlier kind took (names only) must not leave the
            # front of this kind's list to the rest (yes/no answers only)
            free = [it for it in pool if it.id not in used]
            rng.shuffle(free)
            want = min(len(free), round(SHARES[key] * n) + (n if key == FILLER else 0))
            if kind == "counterfactual":
                got = [_planned(name, kind, it, swap) for it, swap in
                       _swaps(free, texts, want, rng, kinds_of)]
            elif kind == "unanswerable":
                got = [_planned(name, kind, it) for it in free
                       if name == "boolq" or _hideable(it)][:want]
            else:
                got = [_planned(name, kind_of(it.answers) if name != "boolq" else "yes-no", it)
                       for it in free[:want]]
            used |= {p.base_id for p in got}
            streams[key] = got
    take = quotas(n, {k: len(v) for k, v in streams.items()})
    return _spread([streams[k][:take[k]] for k in SHARES if k in streams])


def _planned(dataset: str, kind: str, it: QAItem, swap=None) -> Planned:
    prefix = {"counterfactual": "cf:", "unanswerable": "un:"}.get(kind, "")
    gold = (swap[1],) if swap else tuple(it.answers)
    if kind == "answerable" and normalize(gold[0]) in ("yes", "no"):
        kind = "yes-no"
    return Planned(prefix + it.id, it.id, dataset, kind, it.question, gold, it.gold_passage_id,
                   swap)


def _spread(streams: list[list[Planned]]) -> list[Planned]:
    """The streams merged so each is spread evenly over the whole list."""
    keyed = [((j + 0.5) / len(s), i, p) for i, s in enumerate(streams) for j, p in enumerate(s)]
    return [p for _, _, p in sorted(keyed, key=lambda t: (t[0], t[1]))]
