"""Training answers for the shipped draft model, from public questions it is never benchmarked on.

The draft model is a general 0.5B instruct model: on the e2e slices about a third of its
drafts miss the gold answer (it quotes the right passage about the wrong thing, restates
the question, or answers from what it knows of the world when the passage says otherwise).
This module builds (prompt, answer) pairs that teach it to answer from its one chunk:

- **questions**: HaluEval-QA items and SQuAD questions over *train-split* paragraphs
  (``training.data.split_of``), and counterfactual SQuAD questions on train-split
  paragraphs whose answer was swapped inside the chunk (``training.swaps``), so the target
  follows the passage, not the world. Every item the e2e benchmark can sample
  (``bench_items``: its seeded samples for the usual ``--n``) and every paragraph such an
  item reads are left out;
- **prompts**: exactly what the served draft sees (``tune.distill.draft_chunks``: the same
  retrieval, reranker pick and cut, through ``pipeline.prompts.build_messages``) on a
  collection holding the dataset's passages;
- **answers** (rejection sampling, then rationalisation as in STaR): the model's own
  draft when it contains the gold answer and the verifier finds it grounded in the draft's
  chunk; otherwise the model drafts again with the gold answer given as a hint, and that
  draft is the target under the same two checks. When the draft's chunk is not the
  question's passage the target can be the abstention (``The documents do not say.``), at
  most ``ABSTAIN_SHARE`` of the pairs (none by default: see the constant).

``collect(...)`` appends one JSON line per question to a file and skips questions already
there, so a stopped run resumes. Deliberately not here: the training (``draft_train``) and
any heavy-model call (the hint replaces a teacher: on 2 cores the 1.5B heavy model costs
4x the draft per answer and is right less often than the gold).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from dataclasses import replace
from pathlib import Path

from specrag.bench.slices import load_counterfactual_squad
from specrag.datasets import QAItem, _sample, load_halueval_qa, load_squad, passage_file_name
from specrag.generators.base import collect as collect_stream
from specrag.grounding.text import strip_citations
from specrag.pipeline.prompts import NOT_FOUND, build_messages
from specrag.retrieval.embedder import Embedder
from specrag.settings import Settings
from specrag.training.answer_kinds import for_items
from specrag.training.data import split_of
from specrag.training.swaps import answer_pools, swap_answer, whole
from specrag.training.swaps import swap as swap_text
from specrag.tune.distill import draft_chunks
from specrag.tune.fit import right

BENCH_N = (20, 30, 40, 50, 60, 100, 150, 200)  # the e2e bench's usual --n, seed 0
# abstention pairs: none by default; at 10% the adapter gave up 19 times where the base
# gave up once, on chunks that held the answer (BENCHMARKS.md)
ABSTAIN_SHARE = 0.0
HINT = ("\nThe correct answer is: {gold}. Reply with one short sentence that gives this "
        "answer as the document states it, citing the document.")
_LEAK = re.compile(r"\b(hint|told|correct answer)\b", re.I)


def bench_items(settings: Settings, embedder=None) -> tuple[set[str], set[str]]:
    """(item ids, passage ids) the e2e benchmark may ask about: kept out of training."""
    ids, pids = set(), set()
    full = {"halueval-qa": load_halueval_qa(settings).items, "squad": load_squad(settings).items,
            "counterfactual-squad": load_counterfactual_squad(settings, embedder=embedder).items}
    for items in full.values():
        for n in BENCH_N:
            for it in _sample(items, n, 0):
                ids.add(it.id)
                pids.add(it.gold_passage_id)
    sq = {it.id: it.gold_passage_id for it in full["squad"]}
    for it in full["counterfactual-squad"]:  # "cf-squad-X" reads squad-X's paragraph
        pids.add(sq.get(it.id[3:], ""))
    return ids, pids


def training_items(settings: Settings, n_halueval: int, n_squad: int, n_counter: int,
                   seed: int = 0) -> list[tuple[str, QAItem, tuple | None]]:
    """(dataset, item, swap) triples, interleaved so that a stopped run holds every kind;
    ``swap`` is (the gold in the paragraph, its replacement) for counterfactual items."""
    embedder = Embedder(settings).warm_up()  # one load: the slice's swaps and ours
    ids, pids = bench_items(settings, embedder)
    rng = random.Random(seed)

    def pool(items, need_train_split: bool):
        out = [it for it in items if it.id not in ids and it.gold_passage_id not in pids
               and (not need_train_split or split_of(it.gold_passage_id) == "train")]
        rng.shuffle(out)
        return out

    halu = pool(load_halueval_qa(settings).items, False)[:n_halueval]
    ds = load_squad(settings)
    texts = {p.id: p.text for p in ds.passages}
    found = [(it.gold_passage_id, texts[it.gold_passage_id], it.question, a) for it in ds.items
             for a in it.answers[:1] if re.search(whole(a), texts[it.gold_passage_id])]
    pools = answer_pools(found)
    like = for_items(found, embedder)  # swaps of the same kind, as the slice's
    squad = pool(ds.items, True)
    # one counterfactual per paragraph, on paragraphs no plain SQuAD training item reads
    counter, seen = [], set()
    for it in squad:
        if len(counter) < n_counter and it.gold_passage_id not in seen:
            if (swap := swapped(it, texts[it.gold_passage_id], pools, rng, like)) is not None:
                counter.append(("counterfactual", it, swap))
                seen.add(it.gold_passage_id)
    plain = [("squad", it, None) for it in squad if it.gold_passage_id not in seen][:n_squad]
    lists = [[("halueval-qa", it, None) for it in halu], plain, counter]
    out = []
    for i in range(max(map(len, lists), default=0)):
        out.extend(lst[i] for lst in lists if i < len(lst))
    return out


def swapped(item: QAItem, passage_text: str, pools, rng, like=None) -> tuple[str, str] | None:
    """(the gold answer in the paragraph, its replacement) or None when no clean swap;
    ``like``: same-kind candidates (``answer_kinds``)."""
    a = next((a for a in item.answers if a and re.search(whole(a), passage_text)), None)
    if a is None:
        return None
    out = swap_answer(passage_text, item.question, a, pools, rng, like)
    return (a, out[1]) if out else None


def _draft(engine, messages) -> str:
    g = engine.settings.generation
    text, _ = asyncio.run(collect_stream(engine.draft, messages, max_tokens=g.draft_max_tokens,
                                         temperature=0.0))
    return text.strip()


def judge(engine, text: str, gold: tuple[str, ...], chunks, question: str) -> dict:
    """Right (contains the gold / token F1 >= 0.5) and grounded in the draft's chunks."""
    if not text or NOT_FOUND in text:
        return {"right": False, "grounding": 0.0}
    v = engine.verifier.verify(strip_citations(text), chunks, question)
    return {"right": bool(right(text, gold)), "grounding": round(float(v.grounding), 4)}


def one(engine, kind: str, item: QAItem, collection: str, swap=None) -> dict:
    """The record for one question: prompt messages, drafts tried and the target chosen."""
    chunks = draft_chunks(engine, item.question, collection)
    gold = item.answers
    source = passage_file_name(item.gold_passage_id)
    has_gold = any(c.source == source for c in chunks)
    if swap is not None:  # the paragraph says otherwise than the world: so does the chunk
        old, new = swap
        chunks = [replace(c, text=swap_text(c.text, old, new)) if c.source == source else c
                  for c in chunks]
        gold = (new,)
    messages = build_messages(item.question, chunks, "draft")
    rec = {"id": item.id, "kind": kind, "question": item.question, "gold": list(gold),
           "has_gold_chunk": has_gold, "messages": messages, "target": None, "why": ""}
    if not has_gold:
        rec.update(target=NOT_FOUND, why="passage not in the draft's chunk")
        return rec
    threshold = engine.settings.verify.threshold
    draft = _draft(engine, messages)
    rec["draft"], rec["draft_judge"] = draft, judge(engine, draft, gold, chunks, item.question)
    if rec["draft_judge"]["right"] and rec["draft_judge"]["grounding"] >= threshold:
        rec.update(target=draft, why="own draft")
        return rec
    hinted = [dict(m) for m in messages]
    hinted[-1]["content"] += HINT.format(gold=gold[0])
    second = _draft(engine, hinted)
    rec["hinted"], rec["hinted_judge"] = second, judge(engine, second, gold, chunks, item.question)
    if (rec["hinted_judge"]["right"] and rec["hinted_judge"]["grounding"] >= threshold
            and not _LEAK.search(second)):
        rec.update(target=second, why="hinted draft")
    else:
        rec["why"] = "no right, grounded draft"
    return rec


def collect(engines: dict, items: list[tuple], out: Path, *, progress: bool = True) -> dict:
    """Append a record per item to ``out`` (JSON lines), resuming; returns counts by why.
    ``engines``: dataset name ("halueval-qa", "squad") -> (engine, collection)."""
    from tqdm import tqdm

    done = set()
    if out.is_file():
        done = {json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()
                if line.strip()}
    todo = [t for t in items if t[1].id not in done]
    counts: dict[str, int] = {}
    with open(out, "a", encoding="utf-8") as fh:
        for kind, it, swap in tqdm(todo, desc="draft answers", unit="q", disable=not progress):
            engine, collection = engines["halueval-qa" if kind == "halueval-qa" else "squad"]
            rec = one(engine, kind, it, collection, swap)
            counts[rec["why"]] = counts.get(rec["why"], 0) + 1
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
    return counts
