"""The shipped draft adapter: which answers it trains on, which questions it never sees,
and when it is applied.

The adapter itself is checked against llama.cpp in ``test_distill`` (its file gives
llama.cpp the trained model's logits); every real-model test of the draft runs with it,
since it is the offline profile's default.
"""

from __future__ import annotations

import pytest

from specrag import sources
from specrag.generators.state_folders import model_folder
from specrag.pipeline.prompts import NOT_FOUND
from specrag.training.draft_train import select
from tests.support.env import make_settings


def rec(i, *, draft="", right=False, g=0.0, hinted=None, h_right=False, h_g=0.0,
        gold_chunk=True, kind="squad"):
    r = {"id": f"q{i}", "kind": kind, "has_gold_chunk": gold_chunk, "messages": [],
         "target": None if gold_chunk else NOT_FOUND, "draft": draft,
         "draft_judge": {"right": right, "grounding": g}}
    if hinted is not None:
        r.update(hinted=hinted, hinted_judge={"right": h_right, "grounding": h_g})
    return r


def test_targets_are_right_and_grounded_drafts_own_first_then_hinted():
    records = [
        rec(1, draft="Own and right [1].", right=True, g=0.9),
        rec(2, draft="Right but unsupported.", right=True, g=0.2,
            hinted="Hinted and right [1].", h_right=True, h_g=0.8),
        rec(3, draft="Wrong.", g=0.9, hinted="The correct answer is: X.", h_right=True, h_g=0.9),
        rec(4, draft="Wrong.", g=0.9, hinted="Also wrong.", h_g=0.9),
    ]
    chosen, why = select(records, min_grounding=0.5)
    assert {r["id"]: r["target"] for r in chosen} == {"q1": "Own and right [1].",
                                                     "q2": "Hinted and right [1]."}
    assert why["own draft"] == 1 and why["hinted draft"] == 1
    assert why["no right, grounded draft"] == 2  # q3: the hint leaked; q4: wrong


def test_abstentions_are_a_bounded_share_of_the_pairs():
    answers = [rec(i, draft=f"Answer {i}.", right=True, g=0.9) for i in range(18)]
    abstain = [rec(100 + i, gold_chunk=False) for i in range(30)]
    chosen, why = select(answers + abstain, 0.5, abstain_share=0.1)
    n_abstain = sum(r["target"] == NOT_FOUND for r in chosen)
    assert n_abstain == why["abstention"] == 2  # 10% of 20
    assert why["abstention left out"] == 28
    assert len(chosen) == 20


@pytest.mark.slow
def test_training_questions_are_never_ones_the_benchmark_asks(tmp_path):
    from specrag.bench.slices import load_counterfactual_squad
    from specrag.datasets import load_halueval_qa, load_squad
    from specrag.training.data import split_of
    from specrag.training.draft_data import training_items

    s = make_settings(tmp_path)
    items = training_items(s, 300, 200, 100)
    kinds = {k for k, _, _ in items}
    assert kinds == {"halueval-qa", "squad", "counterfactual"}
    ids = {it.id for _, it, _ in items}
    pids = {it.gold_passage_id for _, it, _ in items}
    for n in (40, 60, 100, 200):
        for load in (load_halueval_qa, load_squad, load_counterfactual_squad):
            asked = load(s, n=n).items
            assert not ids & {it.id for it in asked}
            assert not pids & {it.gold_passage_id for it in asked}
    # SQuAD paragraphs of the training split only (the counterfactual slice's are dev/test),
    # and a counterfactual carries the swap that the chunk gets
    for kind, it, swap in items:
        if kind != "halueval-qa":
            assert split_of(it.gold_passage_id) == "train"
        assert (swap is not None) == (kind == "counterfactual")
        if swap:
            assert swap[0] in it.answers and swap[1] != swap[0]


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """The offline profile's adapter, whether or not this checkout ships one."""
    path = tmp_path / "shipped.gguf"
    path.write_bytes(b"adapter")
    monkeypatch.setitem(sources.PROFILES["offline"], "draft_adapter", str(path))
    return path


def test_the_default_adapter_follows_the_default_draft_only(tmp_path, shipped):
    s = make_settings(tmp_path)
    assert sources.draft_adapter(s) == shipped
    # another draft model: the shipped adapter was not trained for it
    assert sources.draft_adapter(s.with_values(**{"models.draft": str(tmp_path)})) is None
    assert sources.draft_adapter(s.with_values(**{"models.draft_adapter": "none"})) is None
    assert sources.draft_adapter(s.with_values(profile="hub")) is None
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"x")
    assert sources.draft_adapter(s.with_values(**{"models.draft_adapter": str(mine),
                                                  "models.draft": str(tmp_path)})) == mine
    with pytest.raises(Exception, match="draft_adapter"):
        sources.draft_adapter(s.with_values(**{"models.draft_adapter": str(tmp_path / "no.gguf")}))


def test_only_the_draft_gets_the_adapter(tmp_path, shipped):
    from specrag.generators.factory import _Lazy

    s = make_settings(tmp_path)
    draft, heavy = _Lazy("draft", "llama-server", s).build(), _Lazy("heavy", "llama-server", s).build()
    assert draft.config["lora_path"] == str(shipped)
    assert heavy.config["lora_path"] == ""
    off = _Lazy("draft", "llama-server", s.with_values(**{"models.draft_adapter": "none"})).build()
    assert off.config["lora_path"] == ""
    # its prompt states live in a folder of their own (``test_prompt_states_of_...``)
    assert draft.files.folder != off.files.folder


def test_prompt_states_of_the_adapted_model_live_apart(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"m")
    adapter = tmp_path / "a.gguf"
    adapter.write_bytes(b"a")
    plain = model_folder(tmp_path, model, {"n_ctx": 4096})
    adapted = model_folder(tmp_path, model, {"n_ctx": 4096, "lora_path": str(adapter)})
    assert plain != adapted
    assert model_folder(tmp_path, model, {"n_ctx": 4096, "lora_path": ""}) == plain
    adapter.write_bytes(b"another adapter")  # retrained: its states are another model's
    assert model_folder(tmp_path, model, {"n_ctx": 4096, "lora_path": str(adapter)}) != adapted
