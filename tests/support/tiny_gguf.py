"""A tiny random qwen2 or llama GGUF with the real draft model's tokenizer, for
distillation tests.

Two layers, width 64: transformers and llama.cpp both load it in a second, so a test can
train, merge, write and quantise through the real code paths and compare the two
runtimes' logits. The tokenizer, chat template and the rest of the metadata are copied
from the shipped draft GGUF, so prompts tokenise as in production. The llama one has no
attention biases (as SmolLM2) and its q/k rows are random, so they may stand for rows
already permuted the way llama.cpp stores them: transformers un-permutes them on load.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SHAPE = {"block_count": 2, "embedding_length": 64, "feed_forward_length": 128,
         "attention.head_count": 4, "attention.head_count_kv": 2, "context_length": 1024}


def write_tiny_qwen2(real: Path, out: Path, seed: int = 0, arch: str = "qwen2") -> Path:
    import gguf

    reader = gguf.GGUFReader(str(real))
    writer = gguf.GGUFWriter(str(out), arch=arch)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        name = arch + field.name[len("qwen2"):] if field.name.startswith("qwen2.") else field.name
        key = field.name.removeprefix("qwen2.")
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        if key in SHAPE:
            writer.add_key_value(name, SHAPE[key], kind)
        elif field.name == "general.file_type":
            writer.add_key_value(name, 0, kind)  # all F32
        else:
            writer.add_key_value(name, field.contents(), kind, sub_type=sub)
    rng = np.random.default_rng(seed)
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    h, f, kv = 64, 128, 2 * 16

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.08).astype(np.float32)

    writer.add_tensor("token_embd.weight", rand(vocab, h))
    writer.add_tensor("output.weight", rand(vocab, h))
    writer.add_tensor("output_norm.weight", np.ones(h, np.float32))
    for i in range(SHAPE["block_count"]):
        b = f"blk.{i}."
        for name, shape in (("attn_norm.weight", (h,)), ("attn_q.weight", (h, h)),
                            ("attn_q.bias", (h,)), ("attn_k.weight", (kv, h)),
                            ("attn_k.bias", (kv,)), ("attn_v.weight", (kv, h)),
                            ("attn_v.bias", (kv,)), ("attn_output.weight", (h, h)),
                            ("ffn_norm.weight", (h,)), ("ffn_gate.weight", (f, h)),
                            ("ffn_up.weight", (f, h)), ("ffn_down.weight", (h, f))):
            if arch != "qwen2" and name.endswith(".bias"):
                continue
            writer.add_tensor(b + name, np.ones(shape, np.float32) if "norm" in name
                              else rand(*shape))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def llama_logits(path, ids, lora_path="") -> np.ndarray:
    """Logits at every position of ``ids`` from llama.cpp (with an adapter file, if given)."""
    import llama_cpp.llama_cpp as low  # the compiled extra, which quantising needs anyway
    from llama_cpp import Llama

    # no repacking into AMX buffers, whose first multiply faults on some virtualised
    # Intel hosts and would end the whole test run; ``Llama`` has no argument for it
    original = low.llama_model_default_params

    def defaults():
        p = original()
        p.use_extra_bufts = False
        return p

    low.llama_model_default_params = defaults
    try:
        llm = Llama(str(path), n_ctx=64, logits_all=True, n_threads=2, verbose=False)
    finally:
        low.llama_model_default_params = original
    if lora_path:
        _set_adapter(llm, lora_path)
    llm.eval(ids)
    out = np.array(llm.scores[:len(ids)])
    llm.close()
    return out


def _set_adapter(llm, lora_path) -> None:
    """Add the LoRA adapter at ``lora_path`` to ``llm``'s context, as llama.cpp's server
    does at load time; a RuntimeError when llama.cpp refuses it (another base model)."""
    import ctypes

    import llama_cpp.llama_cpp as low

    adapter = low.llama_adapter_lora_init(llm._model.model, str(lora_path).encode("utf-8"))
    if not adapter:
        llm.close()
        raise RuntimeError(f"llama.cpp could not load the LoRA adapter {lora_path} "
                           "(another base model?)")
    llm._stack.callback(lambda: low.llama_adapter_lora_free(adapter))
    adapters = (low.llama_adapter_lora_p_ctypes * 1)(adapter)
    if low.llama_set_adapters_lora(llm._ctx.ctx, adapters, 1, (ctypes.c_float * 1)(1.0)):
        llm.close()
        raise RuntimeError(f"llama.cpp could not set the LoRA adapter {lora_path}")
