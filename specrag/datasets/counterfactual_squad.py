"""``load_counterfactual_squad(settings, n, seed)`` is SQuAD with a twist built by code: for
questions over *dev- and test-split* passages (``datasets.pairs.split_of``: the
verifier's weights never saw them) whose answer is a year, number, month or name, the passage's
answer is swapped everywhere for another value of the same type
(``datasets.swaps.swap_answer``; a name for one of the five most alike of its kind,
``datasets.answer_kinds``: a river for a river, a nationality for a nationality) and the
gold answer becomes the new value. The swapped
passage replaces the original in the corpus (one question per passage, so no other
question reads a changed paragraph), so a model that answers from what it knows of the
world is wrong, and one that follows the documents is right.

Deliberately not here: the slices of the end-to-end benchmark (``bench.slices``).
"""

from __future__ import annotations

import random
import re

from specrag.datasets import Passage, QADataset, QAItem, _sample, load_squad, passage_id
from specrag.datasets.answer_kinds import for_items
from specrag.datasets.pairs import split_of
from specrag.datasets.swaps import answer_pools, swap_answer, whole
from specrag.retrieval.embedder import Embedder
from specrag.settings import Settings


def load_counterfactual_squad(settings: Settings, n: int | None = None, seed: int = 0,
                              embedder=None) -> QADataset:
    """``embedder``: the one that ranks same-kind names (the settings' own, loaded here when
    None; a caller that has it loaded already passes it)."""
    ds = load_squad(settings)
    by_id = ds.passages_by_id()
    found = []  # (passage id, text, question, answer) with the answer in the passage
    for it in ds.items:
        p = by_id[it.gold_passage_id]
        a = next((a for a in it.answers if a and re.search(whole(a), p.text)), None)
        if a:
            found.append((p.id, p.text, it.question, a, it))
    pools = answer_pools([f[:4] for f in found])
    like = for_items([f[:4] for f in found], embedder or Embedder(settings).warm_up())
    rng = random.Random(seed)
    swapped: dict[str, Passage] = {}
    items: list[QAItem] = []
    for pid, text, q, a, it in found:
        if pid in swapped or split_of(pid) == "train":
            continue
        out = swap_answer(text, q, a, pools, rng, like)
        if out is None:
            continue
        new_text, new = out
        p = Passage(passage_id(new_text), new_text, by_id[pid].title)
        swapped[pid] = p
        items.append(QAItem(f"cf-{it.id}", q, (new,), p.id))
    passages = [swapped.get(p.id, p) for p in ds.passages]
    return QADataset("counterfactual-squad", passages, _sample(items, n, seed))
