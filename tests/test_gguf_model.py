"""The draft's weights: LoRA on the CPU, the merge into the GGUF, adapter files, and
llama.cpp computing what the trained torch model computes.

Runs on a tiny random qwen2 (and llama) GGUF that carries the real draft model's
tokenizer (``tests.support.tiny_gguf``, fixtures ``tiny_gguf``/``tiny_llama`` in
conftest): transformers trains it, the merge writes it, and llama.cpp must then compute
what the trained torch model computes. A wrong tensor name, a transposed update or a
lost bias shows up as different logits.
"""

from __future__ import annotations

import numpy as np
import pytest

from specrag.types import SpecragError
from tests.support.tiny_gguf import llama_logits

torch = pytest.importorskip("torch")
pytest.importorskip("gguf", reason="gguf is in requirements.txt")

from specrag.tune import gguf_model, lora  # noqa: E402  (needs torch)


def tiny_lm(vocab=50, seed=0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      initializer_range=0.2)  # wide enough that attention matters
    return Qwen2ForCausalLM(cfg).eval()


def test_lora_starts_as_the_base_model_and_learns_only_its_adapters():
    model = tiny_lm()
    x = torch.tensor([[1, 5, 7, 9, 11]])
    with torch.no_grad():
        base = model(x).logits
    names = lora.attach(model, rank=4)
    assert names == [f"model.layers.{i}.self_attn.{p}" for i in range(2) for p in ("q_proj", "v_proj")]
    with torch.no_grad():
        assert torch.allclose(model(x).logits, base, atol=1e-6)  # B = 0: the base model
    frozen = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
    ex = [lora.Example([1, 5, 7, 9], [11, 13, 2])]
    before = lora.mean_loss(model, ex)
    fit = lora.train(model, ex, epochs=40, lr=1e-2)
    assert lora.mean_loss(model, ex) < before * 0.5
    assert fit["trainable"] == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)


def test_merged_update_computes_what_the_adapter_computes():
    model = tiny_lm()
    lora.attach(model, rank=4)
    lora.train(model, [lora.Example([3, 4, 5, 6], [7, 8])], epochs=10, lr=1e-2)
    x = torch.tensor([[3, 4, 5, 6, 7]])
    with torch.no_grad():
        adapted = model(x).logits
    plain = tiny_lm()
    with torch.no_grad():
        for name, d in lora.deltas(model).items():
            plain.get_submodule(name).weight += d
        assert torch.allclose(plain(x).logits, adapted, atol=1e-4)
        assert not torch.allclose(plain(x).logits, tiny_lm()(x).logits, atol=1e-3)


def test_module_names_map_to_gguf_tensors():
    assert gguf_model.gguf_name("model.layers.3.self_attn.q_proj") == "blk.3.attn_q.weight"
    assert gguf_model.gguf_name("model.layers.12.mlp.down_proj") == "blk.12.ffn_down.weight"
    with pytest.raises(SpecragError, match="no GGUF tensor"):
        gguf_model.gguf_name("lm_head")


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_trained_gguf_round_trip_through_llama_cpp(arch, request, tmp_path):
    """Train in torch, merge into the GGUF, quantise with llama.cpp: llama.cpp then gives
    the trained model's logits, not the base model's. llama: the q rows are stored
    permuted, so an update added unpermuted would give other logits."""
    tiny_gguf = request.getfixturevalue("tiny_gguf" if arch == "qwen2" else "tiny_llama")
    model, tok = gguf_model.load_for_training(tiny_gguf)
    assert model.config.model_type == arch
    ids = tok("Employees receive 25 days of paid leave", add_special_tokens=False)["input_ids"]
    base_llama = llama_logits(tiny_gguf, ids)
    lora.attach(model, rank=4)
    lora.train(model, [lora.Example(ids[:-3], ids[-3:])], epochs=15, lr=5e-2)
    with torch.no_grad():
        trained = model(torch.tensor([ids])).logits[0].numpy()
    changed = gguf_model.write_merged(tiny_gguf, tmp_path / "f16.gguf",
                                      {k: v.numpy() for k, v in lora.deltas(model).items()})
    assert sorted(changed) == sorted(f"blk.{i}.attn_{p}.weight" for i in range(2) for p in "qv")
    merged = llama_logits(tmp_path / "f16.gguf", ids)
    assert np.abs(merged - trained).max() < 0.05 * np.abs(trained).max()
    assert np.abs(merged - base_llama).max() > 0.2 * np.abs(trained).max()
    if arch == "llama":  # the same update written unpermuted: llama.cpp computes another model
        from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

        undo = LlamaTensorProcessor({"num_attention_heads": 4, "num_key_value_heads": 2})
        raw = {k: undo.process(v.numpy(), gguf_model.gguf_name(k)).weights
               for k, v in lora.deltas(model).items()}  # permuted back by write_merged
        gguf_model.write_merged(tiny_gguf, tmp_path / "raw.gguf", raw)
        wrong = llama_logits(tmp_path / "raw.gguf", ids)
        assert np.abs(wrong - trained).max() > 3 * np.abs(merged - trained).max()
    gguf_model.quantize(tmp_path / "f16.gguf", tmp_path / "q8.gguf", 7)  # Q8_0
    assert gguf_model.file_type(tmp_path / "q8.gguf") == 7
    q8 = llama_logits(tmp_path / "q8.gguf", ids)
    assert (q8.argmax(-1) == trained.argmax(-1)).mean() >= 0.8
    with pytest.raises(SpecragError, match="could not quantize"):
        gguf_model.quantize(tmp_path / "missing.gguf", tmp_path / "x.gguf", 7)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_adapter_file_gives_llama_cpp_the_trained_model(arch, request, tmp_path):
    """The LoRA factors written as a llama.cpp adapter and added at run time: llama.cpp
    computes the trained model (llama: B's q rows permuted as the base stores q), and the
    base file itself is untouched."""
    tiny_gguf = request.getfixturevalue("tiny_gguf" if arch == "qwen2" else "tiny_llama")
    model, tok = gguf_model.load_for_training(tiny_gguf)
    ids = tok("Employees receive 25 days of paid leave", add_special_tokens=False)["input_ids"]
    base_llama = llama_logits(tiny_gguf, ids)
    lora.attach(model, rank=4, alpha=8.0)
    lora.train(model, [lora.Example(ids[:-3], ids[-3:])], epochs=15, lr=5e-2)
    with torch.no_grad():
        trained = model(torch.tensor([ids])).logits[0].numpy()
    n = gguf_model.write_adapter(tiny_gguf, tmp_path / "a.gguf",
                                 {k: (a.numpy(), b.numpy()) for k, (a, b) in lora.factors(model).items()},
                                 alpha=8.0)
    assert n == 2 * 2 * 2  # (A, B) x (q, v) x 2 layers
    adapted = llama_logits(tiny_gguf, ids, tmp_path / "a.gguf")
    assert np.abs(adapted - trained).max() < 0.05 * np.abs(trained).max()
    assert np.abs(adapted - base_llama).max() > 0.2 * np.abs(trained).max()
    assert np.abs(llama_logits(tiny_gguf, ids) - base_llama).max() == 0  # base unchanged


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_an_adapter_file_reads_back_as_the_updates_it_adds(arch, request, tmp_path):
    """What a collection's distillation folds into the weights it starts from."""
    base = request.getfixturevalue("tiny_gguf" if arch == "qwen2" else "tiny_llama")
    model, _ = gguf_model.load_for_training(base)
    lora.attach(model, rank=4, alpha=8.0)
    for m in model.modules():
        if isinstance(m, lora.LoRALinear):
            torch.nn.init.normal_(m.b)
    gguf_model.write_adapter(base, tmp_path / "a.gguf",
                             {k: (a.numpy(), b.numpy()) for k, (a, b) in lora.factors(model).items()},
                             alpha=8.0)
    back = gguf_model.read_adapter(tmp_path / "a.gguf", base)
    want = {k: v.numpy() for k, v in lora.deltas(model).items()}
    assert sorted(back) == sorted(want)
    for k in want:
        assert np.allclose(back[k], want[k], atol=1e-5)


def test_an_adapter_for_another_model_is_a_clear_error(tiny_gguf, tiny_llama, tmp_path):
    model, _ = gguf_model.load_for_training(tiny_llama)
    lora.attach(model, rank=4)
    gguf_model.write_adapter(tiny_llama, tmp_path / "llama-a.gguf",
                             {k: (a.numpy(), b.numpy()) for k, (a, b) in lora.factors(model).items()},
                             alpha=8.0)
    with pytest.raises(RuntimeError, match="could not load the LoRA adapter"):
        llama_logits(tiny_gguf, [1, 2, 3], tmp_path / "llama-a.gguf")


def test_another_architecture_is_refused_not_silently_broken(tmp_path):
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "gemma.gguf"), arch="gemma")
    writer.add_block_count(1)
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((4, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(SpecragError, match="'gemma' \\(not supported yet\\)"):
        gguf_model.write_merged(tmp_path / "gemma.gguf", tmp_path / "x.gguf",
                                {"model.layers.0.self_attn.q_proj": np.zeros((4, 4))})
    with pytest.raises(SpecragError, match="qwen2 or llama"):
        gguf_model.check_mergeable(tmp_path / "gemma.gguf")


def test_llama_q_and_k_updates_are_permuted_as_llama_cpp_stores_them():
    """The permutation of llama.cpp's converter, undone by transformers' GGUF loader."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((64, 64)), rng.standard_normal((32, 64))
    undo = LlamaTensorProcessor({"num_attention_heads": 4, "num_key_value_heads": 2})
    stored_q = gguf_model.to_file_layout("blk.0.attn_q.weight", q, "llama", 4, 2)
    stored_k = gguf_model.to_file_layout("blk.0.attn_k.weight", k, "llama", 4, 2)
    assert not np.allclose(stored_q, q) and not np.allclose(stored_k, k)
    assert np.array_equal(undo.process(stored_q, "blk.0.attn_q.weight").weights, q)
    assert np.array_equal(undo.process(stored_k, "blk.0.attn_k.weight").weights, k)
    v = rng.standard_normal((32, 64))  # v, o and the MLP are stored as transformers holds them
    assert gguf_model.to_file_layout("blk.0.attn_v.weight", v, "llama", 4, 2) is v
    assert gguf_model.to_file_layout("blk.0.attn_q.weight", q, "qwen2", 4, 2) is q


def test_an_update_that_does_not_fit_is_refused(tiny_gguf, tmp_path):
    with pytest.raises(SpecragError, match="does not fit"):
        gguf_model.write_merged(tiny_gguf, tmp_path / "x.gguf",
                                {"model.layers.0.self_attn.q_proj": np.zeros((32, 64))})
