"""Draft distillation: LoRA on the CPU, the merge into the GGUF, llama.cpp's quantize, and
which heavy answers become training targets.

The weight path runs on a tiny random qwen2 GGUF that carries the real draft model's
tokenizer (``tests.support.tiny_gguf``): transformers trains it, the merge writes it, and
llama.cpp must then compute what the trained torch model computes. A wrong tensor
name, a transposed update or a lost bias shows up as different logits.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from specrag import sources
from specrag.pipeline.prompts import NOT_FOUND
from specrag.tune.questions import TuneQuestion
from specrag.types import Chunk, SpecragError
from tests.support.env import make_settings

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


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    from tests.support.tiny_gguf import write_tiny_qwen2

    real = sources.resolve("draft", make_settings(tmp_path_factory.mktemp("draft")))
    return write_tiny_qwen2(real, tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from tests.support.tiny_gguf import write_tiny_qwen2

    real = sources.resolve("draft", make_settings(tmp_path_factory.mktemp("draft")))
    return write_tiny_qwen2(real, tmp_path_factory.mktemp("tiny") / "llama.gguf", arch="llama")


def _llama_logits(path, ids, lora_path=""):
    from specrag.generators.worker_child import load_llama

    # loaded as the product loads a model: no repacking into AMX buffers, whose first
    # multiply faults on some virtualised Intel hosts and would end the whole test run
    llm = load_llama(str(path), {"n_ctx": 64, "logits_all": True, "n_threads": 2,
                                 "use_extra_bufts": False, "lora_path": str(lora_path)})
    llm.eval(ids)
    out = np.array(llm.scores[:len(ids)])
    llm.close()
    return out


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
    base_llama = _llama_logits(tiny_gguf, ids)
    lora.attach(model, rank=4)
    lora.train(model, [lora.Example(ids[:-3], ids[-3:])], epochs=15, lr=5e-2)
    with torch.no_grad():
        trained = model(torch.tensor([ids])).logits[0].numpy()
    changed = gguf_model.write_merged(tiny_gguf, tmp_path / "f16.gguf",
                                      {k: v.numpy() for k, v in lora.deltas(model).items()})
    assert sorted(changed) == sorted(f"blk.{i}.attn_{p}.weight" for i in range(2) for p in "qv")
    merged = _llama_logits(tmp_path / "f16.gguf", ids)
    assert np.abs(merged - trained).max() < 0.05 * np.abs(trained).max()
    assert np.abs(merged - base_llama).max() > 0.2 * np.abs(trained).max()
    if arch == "llama":  # the same update written unpermuted: llama.cpp computes another model
        from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

        undo = LlamaTensorProcessor({"num_attention_heads": 4, "num_key_value_heads": 2})
        raw = {k: undo.process(v.numpy(), gguf_model.gguf_name(k)).weights
               for k, v in lora.deltas(model).items()}  # permuted back by write_merged
        gguf_model.write_merged(tiny_gguf, tmp_path / "raw.gguf", raw)
        wrong = _llama_logits(tmp_path / "raw.gguf", ids)
        assert np.abs(wrong - trained).max() > 3 * np.abs(merged - trained).max()
    gguf_model.quantize(tmp_path / "f16.gguf", tmp_path / "q8.gguf", 7)  # Q8_0
    assert gguf_model.file_type(tmp_path / "q8.gguf") == 7
    q8 = _llama_logits(tmp_path / "q8.gguf", ids)
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
    base_llama = _llama_logits(tiny_gguf, ids)
    lora.attach(model, rank=4, alpha=8.0)
    lora.train(model, [lora.Example(ids[:-3], ids[-3:])], epochs=15, lr=5e-2)
    with torch.no_grad():
        trained = model(torch.tensor([ids])).logits[0].numpy()
    n = gguf_model.write_adapter(tiny_gguf, tmp_path / "a.gguf",
                                 {k: (a.numpy(), b.numpy()) for k, (a, b) in lora.factors(model).items()},
                                 alpha=8.0)
    assert n == 2 * 2 * 2  # (A, B) x (q, v) x 2 layers
    adapted = _llama_logits(tiny_gguf, ids, tmp_path / "a.gguf")
    assert np.abs(adapted - trained).max() < 0.05 * np.abs(trained).max()
    assert np.abs(adapted - base_llama).max() > 0.2 * np.abs(trained).max()
    assert np.abs(_llama_logits(tiny_gguf, ids) - base_llama).max() == 0  # base unchanged


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
        _llama_logits(tiny_gguf, [1, 2, 3], tmp_path / "llama-a.gguf")


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


# -- which heavy answers the draft learns from ------------------------------------------

LEAVE = Chunk(id="c1", doc_id="d1", source="leave.md", text="Employees receive 25 days of paid "
              "annual leave per calendar year. Unused days expire at the end of March.",
              index=0, start=0, end=10, content_hash="h1", version="v1")
PARKING = Chunk(id="c2", doc_id="d2", source="parking.md", text="Staff parking is on level -2 "
                "of the north garage. Visitors park on level 0.", index=0, start=0, end=10,
                content_hash="h2", version="v1")


class _Engine:
    """The parts ``distill.target`` reads: the served verifier and settings."""

    def __init__(self, settings):
        from specrag.pipeline.build import build_verifier

        self.settings = settings
        self.verifier = build_verifier(settings)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return _Engine(make_settings(tmp_path_factory.mktemp("served")))


def q(kind="fact", answer="25 days", chunk="c1"):
    return TuneQuestion("q1", kind, "How many days of paid leave per year?", answer, (chunk,), "leave.md")


def test_targets_are_right_grounded_and_cite_the_drafts_own_numbering(served):
    from specrag.tune.distill import target

    got, why = target(served, q(), "Employees get 25 days of paid annual leave per year [6].",
                      [PARKING, LEAVE])
    assert why == "reference" and got.endswith("[2].") and "[6]" not in got
    assert target(served, q(), "Employees get 30 days of leave.", [LEAVE]) == (None, "teacher wrong")
    # right, but the draft never sees the passage: it should learn to say so
    assert target(served, q(), "25 days per year.", [PARKING]) == (
        NOT_FOUND, "passage not in the draft's chunks")
    assert target(served, q("none", NOT_FOUND), NOT_FOUND, [LEAVE]) == (NOT_FOUND, "unanswerable")
    assert target(served, q("none", NOT_FOUND), "25 days.", [LEAVE])[0] is None


def test_a_remote_draft_is_not_distilled(tmp_path):
    from specrag.tune.distill import distill

    eng = _Engine.__new__(_Engine)
    eng.settings = make_settings(tmp_path, **{"generation.draft": "openai:qwen"})
    with pytest.raises(SpecragError, match="fine-tunes a local GGUF draft"):
        distill(eng, [], [], "hr", tmp_path)


# -- the tune step, end to end on the tiny model ------------------------------------------

def _teacher():
    """Writes questions from each passage's first long words and answers them with those
    words when its documents hold the passage (else abstains): right and grounded."""
    import re

    from tests.support.fakes import ScriptedGenerator

    class Teacher(ScriptedGenerator):
        def reply_for(self, messages):
            text = messages[-1]["content"]
            if text.startswith("Write one question"):
                words = re.findall(r"[A-Za-z]{4,}", text.split("Passage 1:", 1)[1])
                if "does not answer" in text.split("\n")[0]:
                    return f"Q: Which budget covers {words[0]} travel to Mars?"
                return f"Q: What does the handbook say about {words[0]} {words[1]}?\nA: {words[3]}"
            asked = re.search(r"about (\w+) (\w+)\?", text)
            for doc in re.findall(r"<document[^>]*>\n(.*?)\n</document>", text, re.S):
                words = re.findall(r"[A-Za-z]{4,}", doc)
                if asked and words[:2] == [asked[1], asked[2]]:
                    return " ".join(words[:6]) + " [1]."
            return NOT_FOUND

    return Teacher("claude-sonnet-4-6", [], NOT_FOUND, name="anthropic")


@pytest.mark.slow
def test_tune_distils_the_draft_and_the_collection_can_run_it(tiny_gguf, embedder, tmp_path):
    from specrag.ingest.ingestor import Ingestor
    from specrag.resilience.chains import tier_from_settings
    from specrag.testing.stand_ins import OrderRanker
    from specrag.tune import profile
    from specrag.tune.run import tune
    from specrag.ui.sample import SAMPLE_DIR
    from tests.support.fakes import handbook_engine

    s = make_settings(tmp_path, **{"models.draft": str(tiny_gguf)})
    Ingestor(s, embedder=embedder).ingest([str(SAMPLE_DIR)], "hb")
    eng = handbook_engine(s, embedder, draft_delay=0, heavy_delay=0)
    eng.heavy = _teacher()
    eng.reranker = OrderRanker()  # the teacher sees the retrieval order, as the draft does
    eng.draft = tier_from_settings("draft", s)  # llama.cpp on the tiny model
    report = tune(s, "hb", questions=12, engine=eng, progress=False, steps=["distill"])
    d = report["distill"]
    assert d["examples"] >= 4 and sum(d["used"].values()) >= d["examples"], d["used"]
    assert d["tensors_changed"] == 4 and d["epoch_loss"][-1] < d["train_loss_before"]
    assert len(d["held_out_loss"]) == 2 and (d["held_out_answers"] == 0) == (
        d["held_out_loss"][0] is None)
    folder = profile.folder(s, "hb")
    assert d["path"] == str(folder / "draft.gguf") and not (folder / "draft-f16.gguf").exists()
    assert gguf_model.file_type(folder / "draft.gguf") == gguf_model.file_type(tiny_gguf)
    held = [json.loads(x) for x in (folder / "rows-distilled.jsonl").read_text().splitlines()]
    assert held and {r["policy"] for r in held} == {"draft-only"}
    assert len(held) == report["questions"]["held_out"]
    assert set(d) >= {"acceptance_rate", "accepted_precision", "correct", "total_p50_ms"}
    # answerable held-out questions each draft gave up on, counted from the rows
    qs = [json.loads(x) for x in (folder / "questions.jsonl").read_text().splitlines()]
    answerable = {q["id"] for q in qs if q["kind"] != "none"}
    assert d["gave_up"]["distill"] == sum(1 for r in held
                                          if r["id"] in answerable and r["abstained"])
    assert d["gives_up_more"] == (d["gave_up"]["distill"] > d["gave_up"]["before"])
    # kept only when the held-out replay is better and gives up no more often; either
    # way the view can serve it
    kept = "models.draft" in report["settings_written"]
    assert kept == (d["correct"] >= report["before"]["correct"] and (
        d["total_p50_ms"] < report["before"]["total_p50_ms"]
        or d["heavy_tokens"] < report["before"]["heavy_tokens"])
        and not d["gives_up_more"])
    # a rerun with the same questions and recipe keeps the model instead of training again
    stamp = (folder / "draft.gguf").stat().st_mtime_ns
    rows = (folder / "rows-distilled.jsonl").read_text()
    again = tune(s, "hb", questions=12, engine=eng, progress=False, steps=["distill"])
    assert again["distill"]["resumed"] and (folder / "draft.gguf").stat().st_mtime_ns == stamp
    assert (folder / "rows-distilled.jsonl").read_text() == rows  # its drafts are kept too
    # a model trained again (another recipe) drafts the held-out questions again
    (folder / "distill.json").unlink()
    third = tune(s, "hb", questions=12, engine=eng, progress=False, steps=["distill"])
    assert not third["distill"].get("resumed")
    assert (folder / "rows-distilled.jsonl").stat().st_mtime_ns > (folder / "draft.gguf").stat().st_mtime_ns
    profile.write(s, "hb", {"models.draft": d["path"]}, ["distill"])
    view = profile.view(eng, "hb")
    assert view.draft is not eng.draft and profile.view(eng, "other").draft is eng.draft
    answer = eng.ask("What does the handbook say about annual leave?", collection="hb",
                     policy="draft-only")
    assert answer.tier == "draft" and answer.draft.usage.model == "draft"  # draft.gguf


def test_drafts_are_compared_at_one_precision():
    from specrag.tune.fit import acceptance_at

    def row(p, ok, abstained=False):
        return {"policy": "draft-only", "draft": "x", "verdict_score": p, "draft_right": ok,
                "abstained": abstained}

    rows = [row(0.9, True), row(0.8, True), row(0.7, False), row(0.6, True),
            row(0.95, True, abstained=True), {"policy": "heavy-only"}]
    assert acceptance_at(rows, 1.0) == 2 / 5  # the two best are right: 0.9 and 0.8
    assert acceptance_at(rows, 0.75) == 4 / 5  # 3 of 4 right down to 0.6
    assert acceptance_at([row(0.9, False)], 0.5) == 0.0
    assert acceptance_at([], 0.5) is None


@pytest.mark.slow
def test_train_draft_fits_an_adapter_llama_cpp_loads(tiny_gguf, tmp_path):
    """``specrag train draft``'s last step on answer records: the adapter file, its
    record, and llama.cpp serving it over the model it was trained for."""
    from specrag.pipeline.prompts import build_messages
    from specrag.training.draft_train import fit_adapter

    chunk = [Chunk("c1", "d1", "leave.md", "Employees receive 25 days of paid leave.", 0, 0, 40,
                   "h", "v")]
    lines = []
    for i in range(12):
        q = f"How many days of leave, case {i}?"
        lines.append(json.dumps({"id": f"q{i}", "kind": "squad", "question": q, "gold": ["25"],
                                 "has_gold_chunk": True, "messages": build_messages(q, chunk),
                                 "draft": "Employees receive 25 days [1].",
                                 "draft_judge": {"right": True, "grounding": 0.9}}))
    (tmp_path / "records.jsonl").write_text("\n".join(lines), encoding="utf-8")
    s = make_settings(tmp_path, **{"models.draft": str(tiny_gguf)})
    stats = fit_adapter(s, tmp_path / "records.jsonl", tmp_path / "out", progress=False,
                        recipe={"rank": 4, "alpha": 8.0, "epochs": 2, "lr": 5e-2})
    assert stats["train"] == 11 and stats["held_out"] == 1
    assert stats["held_out_loss"][1] < stats["held_out_loss"][0]  # the same kind of answer
    assert json.loads((tmp_path / "out" / "specrag.json").read_text())["base"] == tiny_gguf.name
    ids = [1, 2, 3, 4]
    assert np.abs(_llama_logits(tiny_gguf, ids, tmp_path / "out" / "draft-lora.gguf")
                  - _llama_logits(tiny_gguf, ids)).max() > 0
