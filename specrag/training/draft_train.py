"""Train the shipped draft adapter: LoRA on the draft model's own right, grounded answers.

``specrag train draft`` runs three steps, each resumable from its folder:

1. **collections**: the HaluEval-QA passages (~9.9k) and the SQuAD paragraphs, ingested
   as the e2e benchmark ingests them, into ``WORK/halueval-qa`` and ``WORK/squad``;
2. **answers** (``draft_data.collect``): per training question, the served draft prompt
   and a target answer, in ``WORK/records.jsonl``;
3. **adapter**: LoRA (``tune.lora``) on the attention's q/v projections of the draft GGUF
   loaded into torch (``tune.gguf_model``), the loss on the answer only, bfloat16 where
   the CPU has it; 10% of the pairs (by question) held out for the loss before and after.
   The factors are written as a llama.cpp adapter (``gguf_model.write_adapter``) with a
   ``specrag.json`` of the recipe and counts and a model card.

``select(records)`` keeps a record's own draft when it is right and grounded at
``min_grounding`` (``MIN_GROUNDING``), else its hinted draft under the
same checks, and abstentions up to ``draft_data.ABSTAIN_SHARE`` of the pairs. No
adapter trained this way has beaten the base draft on fresh questions yet, so none ships.

Deliberately not here: what the e2e benchmark then says (``bench e2e`` with the adapter
on and ``models.draft_adapter: none``), per-collection distillation (``tune.distill``).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from specrag import sources
from specrag.bench.e2e import _ingest, load_questions
from specrag.ingest.ingestor import Ingestor
from specrag.pipeline.build import build_engine
from specrag.pipeline.prompts import NOT_FOUND
from specrag.retrieval.retriever import Retriever
from specrag.settings import Settings
from specrag.training import draft_data
from specrag.training.draft_data import _LEAK, ABSTAIN_SHARE
from specrag.training.train import cpu_has_bf16

# one epoch: two over ~400 pairs fitted them (epoch loss 0.25 -> 0.14) and moved the
# held-out loss less than one did (BENCHMARKS.md, "A LoRA adapter for the draft")
RECIPE = {"rank": 16, "alpha": 32.0, "epochs": 1, "lr": 2e-4, "targets": ["q_proj", "v_proj"]}
# a target must contain the gold answer; the verifier's grounding only has to rule out a
# garbled sentence that happens to contain it (at the serving threshold, 0.79, a third of
# the right drafts would be lost, most of them plain restatements it scores 0.5-0.79)
MIN_GROUNDING = 0.5


def select(records: list[dict], min_grounding: float, abstain_share: float | None = None,
           seed: int = 0) -> tuple[list[dict], dict]:
    """(records with ``target`` set to the answer to train on, counts by reason)."""
    share = ABSTAIN_SHARE if abstain_share is None else abstain_share
    answers, abstain, why = [], [], {}
    for r in records:
        own, hint = r.get("draft_judge") or {}, r.get("hinted_judge") or {}
        if r.get("target") == NOT_FOUND and not r.get("has_gold_chunk"):
            abstain.append({**r, "target": NOT_FOUND})
            continue
        if own.get("right") and own.get("grounding", 0) >= min_grounding:
            answers.append({**r, "target": r["draft"]})
            reason = "own draft"
        elif (hint.get("right") and hint.get("grounding", 0) >= min_grounding
              and not _LEAK.search(r.get("hinted", ""))):
            answers.append({**r, "target": r["hinted"]})
            reason = "hinted draft"
        else:
            reason = "no right, grounded draft"
        why[reason] = why.get(reason, 0) + 1
    random.Random(seed).shuffle(abstain)
    keep = int(share * len(answers) / max(1e-9, 1 - share))
    why["abstention"] = min(keep, len(abstain))
    why["abstention left out"] = len(abstain) - why["abstention"]
    return answers + abstain[:keep], why


def _pairs(tok, records: list[dict]):
    from specrag.tune.lora import Example  # heavy: torch

    out = []
    for r in records:
        prompt = tok.apply_chat_template(r["messages"], tokenize=False, add_generation_prompt=True)
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        # the answer ends as the model ends a turn, so the student learns to stop there
        a_ids = tok(r["target"] + (tok.eos_token or "<|im_end|>"),
                    add_special_tokens=False)["input_ids"]
        out.append(Example(p_ids, a_ids))
    return out


def fit_adapter(settings: Settings, records_path: Path, out: Path, *, recipe: dict | None = None,
                min_grounding: float | None = None, seed: int = 0, progress: bool = True,
                max_examples: int | None = None, abstain_share: float | None = None) -> dict:
    """Train on ``records_path`` and write ``out/draft-lora.gguf``; returns the stats."""
    import torch
    from tqdm import tqdm

    from specrag.tune import gguf_model, lora  # heavy: torch

    recipe = {**RECIPE, **(recipe or {})}
    thr = MIN_GROUNDING if min_grounding is None else min_grounding
    records = [json.loads(line) for line in records_path.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    chosen, why = select(records, thr, abstain_share, seed=seed)
    rng = random.Random(seed)
    rng.shuffle(chosen)
    n_held = max(1, len(chosen) // 10)
    held, train = chosen[:n_held], chosen[n_held:][:max_examples]
    base = sources.resolve("draft", settings)
    t0 = time.perf_counter()
    model, tok = gguf_model.load_for_training(base)
    seconds = {"load": round(time.perf_counter() - t0, 1)}
    train_ex, held_ex = _pairs(tok, train), _pairs(tok, held)
    lora.attach(model, targets=tuple(recipe["targets"]), rank=recipe["rank"],
                alpha=recipe["alpha"])
    if torch.cuda.is_available():  # a lent GPU trains it; never required
        model.to("cuda")
    bf16 = model.device.type == "cuda" or cpu_has_bf16()
    held_before = lora.mean_loss(model, held_ex, bf16)
    bar = tqdm(total=recipe["epochs"] * len(train_ex), desc="draft adapter", unit="ex",
               disable=not progress)
    fitted = lora.train(model, train_ex, epochs=recipe["epochs"], lr=recipe["lr"], bf16=bf16,
                        seed=seed, progress=lambda s, t, loss: (bar.update(1),
                                                                bar.set_postfix(loss=f"{loss:.3f}")))
    bar.close()
    seconds["train"] = fitted["seconds"]
    held_after = lora.mean_loss(model, held_ex, bf16)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "draft-lora.gguf"
    tmp = out / "draft-lora.gguf.tmp"
    kinds: dict[str, int] = {}
    for r in train:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    gguf_model.write_adapter(base, tmp, {k: (a.numpy(), b.numpy())
                                         for k, (a, b) in lora.factors(model).items()},
                             recipe["alpha"], meta={"specrag.base_model": base.name})
    tmp.replace(path)
    stats = {"base": base.name, "records": len(records), "selected": why, "train": len(train),
             "held_out": len(held), "train_kinds": kinds, "min_grounding": thr,
             "recipe": recipe, "bf16": bf16, "epoch_loss": fitted["epoch_loss"],
             "held_out_loss": [held_before, held_after], "trainable": fitted["trainable"],
             "seconds": seconds, "size_kb": round(path.stat().st_size / 1024, 1)}
    (out / "specrag.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
    return stats


def workspace(settings: Settings, work: Path, progress: bool = True) -> dict:
    """Ingest each dataset's passages into ``work/<dataset>`` (skipped when done);
    returns dataset -> (engine, collection) for ``draft_data.collect``."""
    engines = {}
    for name in ("halueval-qa", "squad"):
        s = settings.with_values(data_dir=str(work / name), cache_dir=str(settings.cache_path),
                                 # the base draft, as asked (no prompt cache, no warming
                                 # of the collection beside the answers)
                                 **{"generation.prompt_cache": False,
                                    "generation.warm_states": 0,
                                    "models.draft_adapter": "none"})
        ingestor = Ingestor(s)
        marker = work / name / "ingested"
        if not marker.is_file():
            _, files = load_questions(settings, name, 1, 0, None)
            _ingest(ingestor, files, "train-draft", progress)
            marker.write_text("ok", encoding="utf-8")
        retriever = Retriever(s, embedder=ingestor.embedder, store=ingestor.store)
        engines[name] = (build_engine(s, retriever=retriever, audit=False), "train-draft")
    return engines


def run(settings: Settings, work: Path, out: Path, *, n_halueval: int = 400, n_squad: int = 300,
        n_counter: int = 250, seed: int = 0, progress: bool = True) -> dict:
    """The three steps; the adapter in ``out``."""
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    engines = workspace(settings, work, progress)
    items = draft_data.training_items(settings, n_halueval, n_squad, n_counter, seed)
    t1 = time.perf_counter()
    draft_data.collect(engines, items, work / "records.jsonl", progress=progress)
    t2 = time.perf_counter()
    for engine, _ in engines.values():
        engine.draft.close()  # its model worker: the training needs the memory and cores
    stats = fit_adapter(settings, work / "records.jsonl", out, seed=seed, progress=progress)
    stats["seconds"].update(collections=round(t1 - t0, 1), answers=round(t2 - t1, 1))
    (out / "specrag.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
    return stats
