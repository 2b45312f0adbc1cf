"""Export a Hugging Face encoder to ONNX once, and quantize it to int8, cached.

``ensure_onnx(model_dir, cache)`` returns the paths of ``model-fp32.onnx`` and
``model-int8.onnx`` for a local model folder, exporting with ``torch.onnx.export``
and quantizing with onnxruntime's dynamic per-channel int8 the first time only.
Per-channel weights keep all-MiniLM-L6-v2's embeddings within cosine 0.99 of fp32;
per-tensor int8 dropped to 0.92 in our measurement, so it is not offered.

Deliberately not here: tokenization, pooling and inference (see ``embedder``). We
do not use ``sentence-transformers[onnx]``/optimum: they pin an older transformers.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
RECIPE = "opset17-int8-per-channel-constb"  # part of the cache key: change it to re-export


def cache_key(model_dir: Path) -> str:
    """Changes whenever the weights or config change, so a stale export is never reused."""
    h = hashlib.sha1(f"{RECIPE}:{model_dir.resolve()}".encode())
    for name in sorted(os.listdir(model_dir)):
        p = model_dir / name
        if p.is_file():
            st = p.stat()
            h.update(f"{name}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


def ensure_onnx(model_dir: Path, cache: Path) -> dict[str, Path]:
    """Paths of the fp32 and int8 ONNX files for ``model_dir``, building them if missing."""
    out = cache / "onnx" / cache_key(model_dir)
    paths = {"fp32": out / "model-fp32.onnx", "int8": out / "model-int8.onnx"}
    if all(p.exists() for p in paths.values()):
        return paths
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".export-") as tmp:
        fp32 = Path(tmp) / "model-fp32.onnx"
        int8 = Path(tmp) / "model-int8.onnx"
        input_names = _export(model_dir, fp32)
        _quantize(fp32, int8)
        (out / "inputs.txt").write_text("\n".join(input_names))
        # rename last so a crash never leaves a half-written model behind a valid name
        os.replace(int8, paths["int8"])
        os.replace(fp32, paths["fp32"])
    return paths


def _export(model_dir: Path, dest: Path) -> list[str]:
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as err:  # pragma: no cover
        raise ImportError("exporting to ONNX needs torch and transformers: "
                          "pip install torch==2.13.0 transformers") from err

    model = AutoModel.from_pretrained(str(model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    enc = tok(["specrag export", "a second, longer example sentence"], return_tensors="pt",
              padding=True)
    names = [n for n in INPUTS if n in enc]

    class Encoder(torch.nn.Module):
        # keyword call: transformers 5 changed positional argument order
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return self.inner(**dict(zip(names, args))).last_hidden_state

    axes = {n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]}
    with torch.no_grad():
        torch.onnx.export(Encoder(model), tuple(enc[n] for n in names), str(dest),
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    return names


def _quantize(src: Path, dest: Path) -> None:
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    # onnxruntime logs a "consider pre-processing" warning on the root logger; it does not apply
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        # weights only: attention's activation x activation MatMuls stay fp32, which is
        # both faster (no dynamic quantisation of two inputs) and more accurate
        quantize_dynamic(str(src), str(dest), per_channel=True, weight_type=QuantType.QInt8,
                         extra_options={"MatMulConstBOnly": True})
    finally:
        root.setLevel(level)
