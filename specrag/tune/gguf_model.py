"""A llama.cpp GGUF model in and out of torch: load it to train, write the trained one back.

- ``load_for_training(path)``: the GGUF's weights dequantised into a transformers model
  (transformers' own GGUF loader, which needs the ``gguf`` package) and its tokenizer.
- ``write_merged(base, out, deltas)``: a float16 GGUF with every tensor of ``base``
  (metadata copied: architecture, tokenizer, chat template) and ``deltas`` added to the
  tensors they name (``model.layers.3.self_attn.q_proj`` -> ``blk.3.attn_q.weight``).
  Working from the base file's own tensors, not from transformers' copy, means nothing
  goes through a name or layout mapping except the few tensors that changed.
- ``write_adapter(base, out, pairs, alpha)``: the LoRA factors themselves as a llama.cpp
  adapter file (``general.type`` adapter, ``blk.3.attn_q.weight.lora_a`` / ``lora_b``),
  which llama.cpp adds at run time (``llama_adapter_lora_init``): a megabyte beside the
  base model instead of a second model file, and the update never goes through the base
  file's 4-bit quantisation.
- ``quantize(f16, out, ftype)``: llama.cpp's own ``llama_model_quantize``, in a child
  process: a crash in native code fails the tune step with a message, not the caller.
  ``ftype`` defaults to the base file's (``general.file_type``), so the distilled model
  has the base model's size and speed.

Architectures: ``qwen2`` (the Qwen drafts) stores every tensor as transformers does, so an
update adds as is. ``llama`` (SmolLM2, and Llama/Mistral-style models) is stored with the
q and k rows permuted for llama.cpp's rotary layout (``convert_hf_to_gguf.py``'s
``permute``; transformers' GGUF loader undoes it when it loads), so a q/k update is
permuted the same way before it is added (``to_file_layout``). Any other architecture is
refused before training starts (``check_mergeable``), not silently broken.

Deliberately not here: training (``tune.lora``), choosing examples (``tune.distill``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from specrag.types import SpecragError

_HF = re.compile(r"^model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)$")
_GGUF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v",
               "o_proj": "attn_output", "gate_proj": "ffn_gate", "up_proj": "ffn_up",
               "down_proj": "ffn_down"}
F16 = 1  # llama_ftype MOSTLY_F16
PERMUTED = ("llama",)  # q/k rows stored permuted (llama.cpp's rotary layout)
MERGEABLE = ("qwen2",) + PERMUTED  # qwen2: stored as transformers holds it


def require_gguf():
    try:
        import gguf
    except ImportError:
        raise SpecragError("draft distillation reads and writes GGUF files with the gguf "
                           "package: pip install gguf==0.19.0") from None
    return gguf


def gguf_name(module: str) -> str:
    """``model.layers.3.self_attn.q_proj`` -> ``blk.3.attn_q.weight``."""
    m = _HF.match(module)
    if not m or m[3] not in _GGUF_NAMES:
        raise SpecragError(f"no GGUF tensor for module '{module}'")
    return f"blk.{m[1]}.{_GGUF_NAMES[m[3]]}.weight"


def check_mergeable(path: Path) -> str:
    """The GGUF's architecture, if an update can be merged into it; else a clear error."""
    gguf = require_gguf()
    arch = gguf.GGUFReader(str(path)).fields["general.architecture"].contents()
    if arch not in MERGEABLE:
        raise SpecragError(f"distillation merges into {' or '.join(MERGEABLE)} GGUF drafts; "
                           f"{Path(path).name} is '{arch}' (not supported yet): keep a Qwen "
                           "or SmolLM2 draft to distil")
    return arch


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row permutation (``convert_hf_to_gguf.py``, ``LlamaModel.permute``):
    each head's rotary pairs go from halves (transformers) to interleaved (llama.cpp)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def to_file_layout(tensor: str, delta: np.ndarray, arch: str, heads: int,
                   heads_kv: int) -> np.ndarray:
    """An update made in transformers' layout, in the layout ``arch`` stores ``tensor`` in."""
    if arch in PERMUTED and ".attn_q." in tensor:
        return permute(delta, heads)
    if arch in PERMUTED and ".attn_k." in tensor:
        return permute(delta, heads_kv)
    return delta


def _heads(fields, arch: str) -> tuple[int, int]:
    """(attention heads, key/value heads) of a GGUF's ``arch`` model: what q/k permute by."""
    heads = int(fields[f"{arch}.attention.head_count"].contents())
    kv = fields.get(f"{arch}.attention.head_count_kv")
    return heads, int(kv.contents()) if kv is not None else heads


def load_for_training(path: Path):
    """(transformers causal LM in float32, its tokenizer) from a GGUF file."""
    require_gguf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=torch.float32)
    return model, tok


def file_type(path: Path) -> int:
    gguf = require_gguf()
    field = gguf.GGUFReader(str(path)).fields.get("general.file_type")
    return int(field.contents()) if field is not None else F16


def write_merged(base: Path, out: Path, deltas: dict) -> dict:
    """Write ``base`` with ``deltas`` (module name -> (out, in) array) added, as float16
    (1-D tensors as float32, as llama.cpp's converter writes them). Returns what changed."""
    gguf = require_gguf()
    from gguf.quants import dequantize

    arch = check_mergeable(base)
    reader = gguf.GGUFReader(str(base))
    heads, heads_kv = _heads(reader.fields, arch)
    want = {}
    for module, d in deltas.items():
        name = gguf_name(module)
        want[name] = to_file_layout(name, np.asarray(d, dtype=np.float32), arch, heads, heads_kv)
    writer = gguf.GGUFWriter(str(out), arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        # the writer writes these itself; the file type is F16 until llama.cpp quantises it
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = F16 if field.name == "general.file_type" else field.contents()
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    changed = {}
    for t in reader.tensors:
        w = dequantize(t.data, t.tensor_type).reshape([int(n) for n in reversed(t.shape)])
        if t.name in want:
            d = want.pop(t.name)
            if d.shape != w.shape:
                raise SpecragError(f"{t.name}: update {d.shape} does not fit the weight {w.shape}")
            changed[t.name] = float(np.abs(d).mean() / max(1e-12, float(np.abs(w).mean())))
            w = w + d
        writer.add_tensor(t.name, w.astype(np.float32 if w.ndim == 1 else np.float16))
    if want:
        raise SpecragError(f"{base} has no tensor {sorted(want)[0]}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return changed


def module_name(tensor: str) -> str:
    """``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj`` (``gguf_name``'s inverse)."""
    layer, part = tensor.split(".")[1:3]
    proj = {v: k for k, v in _GGUF_NAMES.items()}[part]
    return f"model.layers.{layer}.{'self_attn' if part.startswith('attn') else 'mlp'}.{proj}"


def read_adapter(path: Path, base: Path) -> dict:
    """The updates a llama.cpp LoRA adapter file adds to ``base``, by module name, in
    transformers' layout (``write_adapter``'s inverse: ``alpha / rank * B @ A``)."""
    gguf = require_gguf()
    arch = check_mergeable(base)
    reader = gguf.GGUFReader(str(path))
    heads, heads_kv = _heads(gguf.GGUFReader(str(base)).fields, arch)
    alpha = float(reader.fields["adapter.lora.alpha"].contents())
    tensors = {t.name: np.asarray(t.data, dtype=np.float32) for t in reader.tensors}
    out = {}
    for name, a in tensors.items():
        if not name.endswith(".lora_a"):
            continue
        b = tensors[name[:-len("_a")] + "_b"]
        d = (alpha / a.shape[0]) * (b @ a)
        tensor = name[:-len(".lora_a")]
        if arch in PERMUTED and (".attn_q." in tensor or ".attn_k." in tensor):
            n = heads if ".attn_q." in tensor else heads_kv
            d = d.reshape(n, d.shape[0] // n // 2, 2, d.shape[1]).swapaxes(1, 2).reshape(d.shape)
        out[module_name(tensor)] = d
    return out


def write_adapter(base: Path, out: Path, pairs: dict, alpha: float,
                  meta: dict | None = None) -> int:
    """Write ``pairs`` (module name -> (A (rank, in), B (out, rank))) as a llama.cpp LoRA
    adapter for ``base`` (llama.cpp scales B @ A by ``alpha / rank``, as ``tune.lora``
    does); ``meta``: extra string fields (``specrag.*``). Returns the tensor count."""
    gguf = require_gguf()
    arch = check_mergeable(base)
    reader = gguf.GGUFReader(str(base))
    heads, heads_kv = _heads(reader.fields, arch)
    writer = gguf.GGUFWriter(str(out), arch=arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(alpha))
    for key, value in (meta or {}).items():
        writer.add_string(key, str(value))
    n = 0
    for module, (a, b) in sorted(pairs.items()):
        name = gguf_name(module)
        # a row permutation of the update is one of B's rows: A stays as it is
        b = to_file_layout(name, np.asarray(b, dtype=np.float32), arch, heads, heads_kv)
        writer.add_tensor(f"{name}.lora_a", np.asarray(a, dtype=np.float32))
        writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b))
        n += 2
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return n


def quantize(src: Path, out: Path, ftype: int, *, threads: int = 0, timeout: float = 1800) -> None:
    """``llama_model_quantize(src, out, ftype)`` in a child process."""
    args = json.dumps([str(src), str(out), int(ftype), int(threads)])
    proc = subprocess.run([sys.executable, "-m", "specrag.tune.gguf_model", args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not Path(out).is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise SpecragError(f"llama.cpp could not quantize {src.name} (exit {proc.returncode}): "
                           + " | ".join(tail))


def _quantize_here(src: str, out: str, ftype: int, threads: int) -> int:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    return llama_cpp.llama_model_quantize(src.encode(), out.encode(), params)


if __name__ == "__main__":  # the child of ``quantize``
    sys.exit(_quantize_here(*json.loads(sys.argv[1])))
