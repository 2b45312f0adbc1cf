"""Draft distillation: fine-tune the draft model to answer as the heavy tier does.

``examples(engine, questions, rows)`` turns the tune's training split into (prompt, answer)
pairs. The prompt is exactly what the served draft sees for that question: the same
retrieval, the chunks ``pipeline.draft_pick`` gives, ``retrieval.draft_words`` cut and
``pipeline.prompts.build_messages`` through the model's own chat template. The answer is
the heavy tier's reference, kept only when it can be trusted as a target:

- it is right against the question writer's answer (``tune.fit.right``), or it abstains
  on a question written to be unanswerable;
- the draft's chunks support it (the served verifier, grounding alone, at
  ``verify.threshold``): a reference drawn from chunks the draft never sees would teach
  the draft to invent. When the question's own passage is not among the draft's chunks
  at all, the target is the abstention (``The documents do not say.``), which escalates;
- its citations are renumbered for the draft's prompt: each sentence cites the draft
  chunk the verifier found supporting it (the heavy tier numbered 8 reranked chunks).

``distill(...)`` loads the draft GGUF into torch (``tune.gguf_model``), trains LoRA on
the attention's q/v projections (``tune.lora``, bfloat16 on CPUs with AVX-512 BF16 or
AMX), merges the update into the GGUF's tensors and quantises through llama.cpp to the
base file's type. The result, ``draft.gguf`` in the tune folder, is the collection's
draft model once its held-out replay is better (``tune.run``); the base stays the
fallback for every other collection.

Deliberately not here: generating the references (``tune.collect``), deciding whether the
distilled model is kept (``tune.run``), GPU training (a lent GPU is never required).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from specrag import sources
from specrag.grounding.text import strip_citations
from specrag.pipeline import draft_pick
from specrag.pipeline.prompts import NOT_FOUND, build_messages, cut_for
from specrag.tune.fit import right
from specrag.types import SpecragError


# bf16 matmuls native: ~1.5x here (``training.train`` picks its precision with it too)
def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Whether the CPU does bf16 arithmetic natively (AVX-512 BF16 or AMX). Without it,
    torch emulates bf16 matmuls and autocast is slower than fp32, so "auto" must not pick it."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:  # not Linux: stay on the safe side
            return False
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                  if line.startswith("flags")), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags


def draft_chunks(engine, question: str, collection: str) -> list:
    """The chunks the served draft prompt holds for ``question``."""
    r = engine.settings.retrieval
    hits = engine.retriever.search(question, None, collection).hits
    picked = draft_pick.pick(question, hits, r, engine.reranker)
    return cut_for(question, [h.chunk for h in picked], r.draft_words)


def target(engine, q, reference: str | None, chunks: list) -> tuple[str | None, str]:
    """(the answer to train on or None, why)."""
    if q.kind == "none":
        return (NOT_FOUND, "unanswerable") if reference and NOT_FOUND in reference else (
            None, "teacher answered an unanswerable question")
    if not reference or not right(reference, [q.answer]):
        return None, "teacher wrong"
    if not any(c.id in q.chunk_ids for c in chunks):
        return NOT_FOUND, "passage not in the draft's chunks"
    clean = strip_citations(reference)
    verdict = engine.verifier.verify(clean, chunks)
    if verdict.grounding < engine.settings.verify.threshold:
        return None, "not supported by the draft's chunks"
    out = []
    for s in verdict.sentences:
        cite = f" [{s.best_chunk + 1}]" if s.best_chunk is not None else ""
        text = s.sentence.rstrip()
        end = text[-1] if text and text[-1] in ".!?" else ""
        out.append(f"{text[:len(text) - len(end)]}{cite}{end}")
    return " ".join(out) if out else clean, "reference"


def examples(engine, tokenizer, questions, rows: list[dict], collection: str) -> tuple[list, dict]:
    """Token pairs for LoRA, and why each question was or was not used."""
    from specrag.tune.lora import Example  # heavy: torch

    refs = {r["id"]: r.get("prediction") for r in rows if r["policy"] == "heavy-only"}
    out, why = [], {}
    for q in questions:
        if q.id not in refs:
            continue
        chunks = draft_chunks(engine, q.question, collection)
        answer, reason = target(engine, q, refs[q.id], chunks)
        why[reason] = why.get(reason, 0) + 1
        if answer is None:
            continue
        prompt = tokenizer.apply_chat_template(build_messages(q.question, chunks, "draft"),
                                               tokenize=False, add_generation_prompt=True)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        # the answer ends as the model ends a turn: its end-of-sequence token (ChatML's
        # <|im_end|> for Qwen and SmolLM2), so the student learns to stop there
        a_ids = tokenizer(answer + (tokenizer.eos_token or "<|im_end|>"),
                          add_special_tokens=False)["input_ids"]
        out.append(Example(p_ids, a_ids))
    return out, why


def distill(engine, questions, rows: list[dict], collection: str, folder: Path, *,
            held=(), epochs: int = 2, rank: int = 8, lr: float = 2e-4,
            progress: bool = True) -> dict:
    """Train, merge and quantise; returns stats and ``path`` (None when nothing to learn).
    ``held``: held-out questions whose references' loss is measured before and after
    (never trained on)."""
    from specrag.tune import gguf_model, lora  # heavy: torch

    backend = engine.settings.generation.draft.split(":", 1)[0]
    if backend not in ("llama-server", "llama-cpp"):
        raise SpecragError(f"draft distillation fine-tunes a local GGUF draft model; the draft "
                           f"tier is '{engine.settings.generation.draft}': tune with --steps "
                           "calibrate,router, or set generation.draft to llama-server")
    base = sources.resolve("draft", engine.settings)
    # resumable: the same base, questions and recipe give the same model; keep it
    adapter = sources.draft_adapter(engine.settings)
    recipe = {"base": str(base), "adapter": str(adapter or ""),
              "questions": sorted(q.id for q in questions), "epochs": epochs, "rank": rank,
              "lr": lr}
    done = folder / "distill.json"
    if done.is_file():
        kept = json.loads(done.read_text(encoding="utf-8"))
        if kept.get("recipe") == recipe and kept.get("path") and Path(kept["path"]).is_file():
            return {**kept, "resumed": True}
    t0 = time.perf_counter()
    try:
        gguf_model.check_mergeable(base)  # before minutes of training, not after
    except SpecragError as err:
        return {"base": str(base), "path": None, "skipped": str(err)}
    import torch

    model, tok = gguf_model.load_for_training(base)
    # the draft as served: with the shipped adapter (``models.draft_adapter``) in its
    # weights, so the collection's model starts from it and keeps it once merged
    served = gguf_model.read_adapter(adapter, base) if adapter else {}
    for name, d in served.items():
        model.get_submodule(name).weight.data += torch.from_numpy(d)
    seconds = {"load": round(time.perf_counter() - t0, 1)}
    pairs, why = examples(engine, tok, questions, rows, collection)
    stats = {"base": str(base), "examples": len(pairs), "used": why, "path": None}
    if len(pairs) < 4:
        stats["skipped"] = f"only {len(pairs)} usable reference answers (at least 4 needed)"
        return stats
    checks, _ = examples(engine, tok, held, rows, collection)
    lora.attach(model, rank=rank, alpha=2.0 * rank)
    if torch.cuda.is_available():  # a lent GPU trains it; never required
        model.to("cuda")
    bf16 = model.device.type == "cuda" or cpu_has_bf16()
    before = lora.mean_loss(model, pairs, bf16)
    held_before = lora.mean_loss(model, checks, bf16) if checks else None
    from tqdm import tqdm

    bar = tqdm(total=epochs * len(pairs), desc="distill", unit="ex", disable=not progress)
    fitted = lora.train(model, pairs, epochs=epochs, lr=lr, bf16=bf16,
                        progress=lambda step, total, loss: (bar.update(1),
                                                            bar.set_postfix(loss=f"{loss:.3f}")))
    bar.close()
    seconds["train"] = fitted["seconds"]
    held_after = lora.mean_loss(model, checks, bf16) if checks else None
    t = time.perf_counter()
    f16 = folder / "draft-f16.gguf"
    deltas = {k: v.numpy() for k, v in lora.deltas(model).items()}
    for k, d in served.items():
        deltas[k] = deltas[k] + d if k in deltas else d
    changed = gguf_model.write_merged(base, f16, deltas)
    del model
    out = folder / "draft.gguf"
    tmp = folder / "draft.gguf.tmp"
    gguf_model.quantize(f16, tmp, gguf_model.file_type(base))
    tmp.replace(out)  # the served file changes only once it is whole
    f16.unlink(missing_ok=True)
    seconds["merge_quantize"] = round(time.perf_counter() - t, 1)
    stats.update({"path": str(out), "train_loss_before": before,
                  "held_out_loss": [held_before, held_after], "held_out_answers": len(checks),
                  "epoch_loss": fitted["epoch_loss"], "bf16": bf16, "rank": rank,
                  "epochs": epochs, "trainable": fitted["trainable"],
                  "tensors_changed": len(changed), "size_mb": round(out.stat().st_size / 2**20, 1),
                  "base_size_mb": round(base.stat().st_size / 2**20, 1), "seconds": seconds,
                  "recipe": recipe})
    done.write_text(json.dumps(stats, indent=1), encoding="utf-8")
    return stats
