"""Fine-tune a cross-encoder on CPU and ship it as int8 ONNX plus tokenizer.

``fit(pairs, config)`` trains a ``PairScorer`` (the embedder's MiniLM encoder, mean
pooling over the pair's tokens, one linear logit) with a plain torch loop: BCE, AdamW
(a larger learning rate for the new head), linear warmup and decay, a fixed seed and
``torch.set_num_threads``. Batches are cut from length-sorted windows so little time
goes into padding, then shuffled. ``precision`` "auto" runs the forward pass under bf16
autocast where the hardware has bf16 arithmetic (AVX-512 BF16 or AMX on the CPU, a GPU)
and fp32 elsewhere: measured 1.6-1.8x per batch on a 2-core Zen 4 (see ``resolve_precision``);
weights and the optimizer stay fp32 either way. ``first`` pairs are trained before the rest: a short
easy curriculum.

Why mean pooling and a curriculum: all-MiniLM-L6-v2 was trained as a mean-pooled
bi-encoder, so its [CLS] vector carries little; with the usual [CLS]-pooler head
(``AutoModelForSequenceClassification``) and the hard VitaminC/HaluEval mix the loss sat
at ln 2 for hundreds of steps on this CPU. Mean pooling plus ~100 steps of
copied-vs-changed synthetic pairs first gets the model off the plateau.
``export(model, tokenizer, out_dir, work_dir)`` writes ``model-int8.onnx`` (dynamic
per-channel int8, like the embedder) and the tokenizer files to ``out_dir``; the
fp32 ONNX and the torch checkpoint stay in ``work_dir`` for benchmarks.

Deliberately not here: which pairs to train on (``training.data``/``rerank_data``),
evaluation and model cards (``training.run``).
"""

from __future__ import annotations

import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from specrag.retrieval.onnx_export import _quantize
from specrag.training.from_onnx import load_scorer
from specrag.tune.distill import cpu_has_bf16

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


@dataclass(frozen=True)
class TrainConfig:
    name: str = "verifier"
    max_length: int = 256
    batch_size: int = 16
    epochs: int = 1
    lr: float = 4e-5
    head_lr: float = 1e-3  # the new linear head starts from random weights
    warmup: float = 0.06
    weight_decay: float = 0.01
    seed: int = 0
    threads: int = 2
    precision: str = "auto"  # auto | bf16 | fp32 (``resolve_precision``)

    def to_dict(self) -> dict:
        return asdict(self)


def _torch():
    try:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError as err:  # pragma: no cover
        raise ImportError("training needs torch and transformers: "
                          "pip install torch==2.13.0 transformers") from err
    return torch, AutoModelForSequenceClassification, AutoTokenizer


PRECISIONS = ("auto", "bf16", "fp32")



def resolve_precision(precision: str, device: str, cpuinfo: str | None = None) -> str:
    """"bf16" or "fp32" for this run. An explicit choice is kept (an unknown one is an error)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown training precision {precision!r}; choose one of {PRECISIONS}")
    if precision != "auto":
        return precision
    return "bf16" if device == "cuda" or cpu_has_bf16(cpuinfo) else "fp32"


def load_base(base_dir: Path):
    """MiniLM encoder weights with a fresh one-logit mean-pooled head, and its tokenizer."""
    torch, _, AutoTokenizer = _torch()
    from transformers import AutoModel

    class PairScorer(torch.nn.Module):
        """encoder -> mean over non-padding tokens -> dropout -> one logit."""

        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder
            self.dropout = torch.nn.Dropout(0.1)
            self.head = torch.nn.Linear(encoder.config.hidden_size, 1)

        @property
        def base_model(self):
            return self.encoder

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.head(self.dropout(pooled))

    # eager attention: the sdpa path exports a mask-building subgraph that made the int8
    # model ~1.7x slower in onnxruntime (61 vs 35 ms per verification on 2 cores)
    encoder = AutoModel.from_pretrained(str(base_dir), attn_implementation="eager")
    return PairScorer(encoder), AutoTokenizer.from_pretrained(str(base_dir))


def batches(pairs, batch_size: int, seed: int, window: int = 64) -> list[list]:
    """Length-bucketed batches in seeded random order."""
    rng = random.Random(seed)
    order = list(pairs)
    rng.shuffle(order)
    out = []
    span = batch_size * window
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lambda p: len(p[0]) + len(p[1]))
        out += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(out)
    return out


def fit(pairs: list[tuple[str, str, float]], config: TrainConfig, base_dir: Path,
        progress: bool = True, log=print, first: list[tuple[str, str, float]] = (),
        init: Path | None = None):
    """Train on (text_a, text_b, label) triples, ``first`` ones before the rest;
    ``init``: a shipped model folder to continue from (``training.from_onnx``) instead of
    the bi-encoder. Returns (model, tokenizer, stats)."""
    torch, _, _ = _torch()
    from tqdm import tqdm

    torch.manual_seed(config.seed)
    random.seed(config.seed)
    torch.set_num_threads(config.threads)
    if init is not None:
        model, tok = load_scorer(Path(init), base_dir)
    else:
        model, tok = load_base(base_dir)
    # a lent GPU is used when present, never required; the export moves back to the CPU
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precision = resolve_precision(config.precision, device)
    model.to(device)
    # word embeddings stay frozen: a third of the AdamW work for little gain on 10k pairs
    model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    model.train()
    plan = batches(first, config.batch_size, config.seed) if first else []
    plan += [b for e in range(config.epochs) for b in batches(pairs, config.batch_size, config.seed + e)]
    no_decay = ("bias", "LayerNorm.weight")
    params = [(n, p) for n, p in model.encoder.named_parameters() if p.requires_grad]
    groups = [{"params": [p for n, p in params if not any(k in n for k in no_decay)],
               "weight_decay": config.weight_decay},
              {"params": [p for n, p in params if any(k in n for k in no_decay)],
               "weight_decay": 0.0},
              {"params": list(model.head.parameters()), "lr": config.head_lr, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=config.lr)
    warm = max(1, int(config.warmup * len(plan)))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (len(plan) - s) / max(1, len(plan) - warm))))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    started, ema = time.time(), None
    bar = tqdm(plan, desc=f"train {config.name}", unit="batch", disable=not progress,
               mininterval=5)
    for step, batch in enumerate(bar):
        enc = tok([p[0] for p in batch], [p[1] for p in batch], truncation="longest_first",
                  max_length=config.max_length, padding=True, return_tensors="pt")
        enc = enc.to(device)
        labels = torch.tensor([p[2] for p in batch], dtype=torch.float32, device=device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(**enc).squeeze(-1)
        loss = loss_fn(logits.float(), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 20 == 0:
            bar.set_postfix(loss=f"{ema:.3f}")
        if not progress and step % 25 == 0:
            log(f"step {step}/{len(plan)} loss {ema:.4f} {time.time() - started:.0f}s")
    model.eval().to("cpu")
    stats = {"device": device, "precision": precision, "steps": len(plan), "pairs": len(pairs) + len(first),
             "seconds": round(time.time() - started, 1), "final_loss_ema": round(ema or math.nan, 4)}
    return model, tok, stats


def export(model, tok, out_dir: Path, work_dir: Path, max_length: int) -> dict[str, Path]:
    """int8 ONNX + tokenizer into ``out_dir``; fp32 ONNX + torch checkpoint into ``work_dir``."""
    torch, _, _ = _torch()

    out_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    model.encoder.save_pretrained(str(work_dir / "hf"))
    tok.save_pretrained(str(work_dir / "hf"))
    torch.save(model.state_dict(), work_dir / "hf" / "pair_scorer.pt")
    enc = tok(["specrag export", "a premise"], ["a claim", "a second, longer claim here"],
              return_tensors="pt", padding=True)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in enc]

    class Scorer(torch.nn.Module):
        # keyword call: transformers 5 changed positional argument order
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return self.inner(**dict(zip(names, args)))

    fp32 = work_dir / "model-fp32.onnx"
    axes = {n: {0: "batch", 1: "seq"} for n in names} | {"logits": {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(Scorer(model), tuple(enc[n] for n in names), str(fp32),
                          input_names=names, output_names=["logits"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    tmp = out_dir / ".model-int8.onnx.part"
    _quantize(fp32, tmp)
    os.replace(tmp, out_dir / "model-int8.onnx")
    tok.save_pretrained(str(work_dir / "tok"))
    for name in TOKENIZER_FILES:
        if (work_dir / "tok" / name).exists():
            shutil.copyfile(work_dir / "tok" / name, out_dir / name)
    (work_dir / "inputs.txt").write_text("\n".join(names))
    return {"int8": out_dir / "model-int8.onnx", "fp32": fp32, "hf": work_dir / "hf"}
