"""LoRA fine-tuning of a causal language model on (prompt, answer) pairs, on the CPU.

``LoRALinear`` wraps one ``nn.Linear``: the base weight stays frozen and a rank-``r``
update ``scale * B @ A`` learns beside it (B starts at zero, so step 0 is the base
model). ``attach(model, targets, rank, alpha)`` wraps the attention projections named in
``targets`` of every decoder layer; ``deltas(model)`` returns the merged updates by
module name, which ``tune.gguf_model.write_merged`` adds to the GGUF's own tensors.

``train(model, examples, ...)`` runs AdamW over the examples, the loss on the answer's
tokens only. The language-model head (151k outputs for Qwen) runs only on those
positions: on a 500-token prompt with a 20-token answer that is most of the head's cost
saved. Under ``bf16`` the forward runs in bfloat16 autocast (AVX-512 BF16 CPUs: 5.2 s
instead of 7.9 s per 475-token example of the 0.5B); the adapter's own weights and the
optimiser stay in float32. It runs on whatever device the model is on (a lent GPU).

Deliberately not here: where the examples come from (``tune.distill``), the model's
loading and writing (``tune.gguf_model``), gradient checkpointing or batching several
examples (on 2 cores one 500-token example is already a full batch).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import torch
from torch import nn

TARGETS = ("q_proj", "v_proj")


class LoRALinear(nn.Module):
    """``base(x) + scale * (x @ A.T) @ B.T`` with ``base`` frozen."""

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0):
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.rank, self.scale = rank, alpha / rank
        self.a = nn.Parameter(torch.empty(rank, base.in_features))
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))  # as nn.Linear initialises

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.a.to(x.dtype).T @ self.b.to(x.dtype).T) * self.scale

    def delta(self) -> torch.Tensor:
        """The update to add to the base weight, shape (out, in)."""
        return (self.b @ self.a * self.scale).detach().cpu()


def attach(model: nn.Module, targets=TARGETS, rank: int = 8, alpha: float = 16.0) -> list[str]:
    """Freeze ``model`` and wrap each ``targets`` projection of its layers; returns the
    wrapped modules' names (``model.layers.3.self_attn.q_proj``)."""
    for p in model.parameters():
        p.requires_grad_(False)
    names = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name in targets and isinstance(child, nn.Linear):
                setattr(module, child_name, LoRALinear(child, rank, alpha))
                names.append(f"{name}.{child_name}" if name else child_name)
    if not names:
        raise ValueError(f"no {', '.join(targets)} layers in {type(model).__name__}")
    return names


def deltas(model: nn.Module) -> dict[str, torch.Tensor]:
    """Merged updates by module name (``...q_proj``), for every LoRA layer."""
    return {name: m.delta() for name, m in model.named_modules() if isinstance(m, LoRALinear)}


def factors(model: nn.Module) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(A, B) of every LoRA layer by module name, for an adapter file (``scale`` apart)."""
    return {name: (m.a.detach().cpu().float(), m.b.detach().cpu().float())
            for name, m in model.named_modules() if isinstance(m, LoRALinear)}


@dataclass(frozen=True)
class Example:
    """Token ids of the prompt and of the answer the model should give after it."""

    prompt: list[int]
    answer: list[int]


def answer_loss(model, ex: Example, max_tokens: int = 1024) -> torch.Tensor:
    """Mean cross-entropy of the answer tokens given the prompt (head on those only)."""
    ids = (ex.prompt + ex.answer)[-max_tokens:]
    n = min(len(ex.answer), len(ids) - 1)
    x = torch.tensor([ids], device=model.device)
    hidden = model.model(input_ids=x).last_hidden_state  # (1, T, H): no head yet
    logits = model.lm_head(hidden[0, -n - 1:-1])  # positions that predict the answer
    return nn.functional.cross_entropy(logits.float(), x[0, -n:])


def train(model, examples: list[Example], *, epochs: int = 2, lr: float = 2e-4,
          bf16: bool = False, seed: int = 0, max_tokens: int = 1024, progress=None) -> dict:
    """Fit the LoRA layers of ``model`` on ``examples``; returns the loss history.

    ``progress(step, total, loss)`` is called after each example (a tqdm bar's update)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("no trainable parameters: attach() LoRA layers first")
    if not examples:
        raise ValueError("nothing to train on")
    torch.manual_seed(seed)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    total = epochs * len(examples)
    # linear warm-up over the first 10%, then linear decay: a short run must not overshoot
    warm = max(1, total // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    model.train()
    history, step, t0 = [], 0, time.perf_counter()
    for epoch in range(epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        losses = []
        for i in order:
            with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = answer_loss(model, examples[i], max_tokens)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            step += 1
            if progress:
                progress(step, total, losses[-1])
        history.append(round(sum(losses) / len(losses), 4))
    model.eval()
    return {"epoch_loss": history, "examples": len(examples), "epochs": epochs,
            "seconds": round(time.perf_counter() - t0, 1), "trainable": sum(p.numel() for p in params)}


@torch.no_grad()
def mean_loss(model, examples: list[Example], bf16: bool = False, max_tokens: int = 1024) -> float:
    """Mean answer loss over ``examples`` (no update): held-out loss before and after."""
    model.eval()
    total = 0.0
    for ex in examples:
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
            total += answer_loss(model, ex, max_tokens).item()
    return round(total / max(1, len(examples)), 4)
