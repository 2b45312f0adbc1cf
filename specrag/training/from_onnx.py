"""Recover a trainable torch ``PairScorer`` from a shipped int8 ONNX cross-encoder.

``load_scorer(model_dir, base_dir)`` reads ``model-int8.onnx`` (what ``specrag train``
ships: dynamic per-channel int8 weights, fp32 biases and LayerNorms), dequantizes every
weight (``(q - zero_point) * scale``) and loads it into the same ``PairScorer`` that
``training.train.load_base`` builds, so ``fit(..., init=model_dir)`` continues training a
shipped model instead of starting from the bi-encoder.

Why: the torch checkpoint of a training run stays in the cache of the machine that ran
it (``cache/training/runs``), and a fresh machine has only the shipped ONNX. Dequantized
int8 weights differ from the fp32 originals by at most half a quantization step; the
scores of the recovered model match the int8 model's to about 0.01.

The MatMul weights of an exported graph are unnamed (``onnx::MatMul_902``); each is named
here by the bias its output is added to (``...attention.self.query.bias`` -> ``query``).
Deliberately not here: training (``training.train``), and any other graph layout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _dequantized(inits: dict, name: str, axis: int) -> np.ndarray:
    from onnx import numpy_helper

    q = numpy_helper.to_array(inits[name + "_quantized"]).astype(np.float32)
    scale = numpy_helper.to_array(inits[name + "_scale"]).astype(np.float32)
    zero = numpy_helper.to_array(inits[name + "_zero_point"]).astype(np.float32)
    if scale.ndim == 0:
        return (q - zero) * scale
    shape = [1] * q.ndim
    shape[axis] = -1
    return (q - zero.reshape(shape)) * scale.reshape(shape)


def onnx_weights(path: Path) -> dict[str, np.ndarray]:
    """``PairScorer`` state-dict names -> fp32 arrays, from an int8 export."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    inits = {i.name: i for i in graph.initializer}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    out: dict[str, np.ndarray] = {}
    for name, init in inits.items():
        if name.startswith("inner.") and not name.endswith(("_quantized", "_scale", "_zero_point")):
            out[name[len("inner."):]] = numpy_helper.to_array(init).astype(np.float32)
    for emb in ("word", "position", "token_type"):
        key = f"inner.encoder.embeddings.{emb}_embeddings.weight"
        axis = 1 if numpy_helper.to_array(inits[key + "_scale"]).size == 384 else 0
        out[key[len("inner."):]] = _dequantized(inits, key, axis)
    out["head.weight"] = _dequantized(inits, "inner.head.weight_Transposed", 1).T
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        weight = node.input[1][: -len("_quantized")]
        if weight.startswith("inner.head"):
            continue
        bias = _bias_after(node.output[0], consumers)
        out[bias[len("inner."):-len(".bias")] + ".weight"] = _dequantized(inits, weight, 1).T
    return out


def _bias_after(output: str, consumers: dict, depth: int = 6) -> str:
    """The ``*.bias`` initializer added to a MatMul's result a few nodes downstream."""
    frontier = [output]
    for _ in range(depth):
        nxt = []
        for name in frontier:
            for node in consumers.get(name, []):
                bias = [i for i in node.input if i.endswith(".bias")]
                if node.op_type == "Add" and bias:
                    return bias[0]
                nxt += list(node.output)
        frontier = nxt
    raise ValueError(f"no bias found after {output}: not a specrag cross-encoder export")


def load_scorer(model_dir: Path, base_dir: Path):
    """(PairScorer with the shipped model's weights, tokenizer)."""
    import torch

    # cycle: training.train loads scorers through this module
    from specrag.training.train import load_base

    model, tok = load_base(base_dir)
    weights = onnx_weights(Path(model_dir) / "model-int8.onnx")
    state = model.state_dict()
    # the pooler is unused (mean pooling) and so absent from the export: it keeps the base's
    missing = [k for k in state if k not in weights and not k.endswith("position_ids")
               and ".pooler." not in k]
    if missing:
        raise ValueError(f"{model_dir}: no weights for {missing[:5]}")
    model.load_state_dict({k: torch.from_numpy(weights[k]) if k in weights else v
                           for k, v in state.items()})
    return model, tok
