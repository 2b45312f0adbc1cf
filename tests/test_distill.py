"""Draft distillation: which heavy answers become training targets, the tune's distill
step end to end, and ``specrag train draft`` fitting an adapter llama.cpp loads.

The weight path itself (LoRA, merge, adapter files through llama.cpp) is
``test_gguf_model``; both use the tiny GGUF fixtures of conftest.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from specrag.pipeline.prompts import NOT_FOUND
from specrag.tune.questions import TuneQuestion
from specrag.types import Chunk, SpecragError
from tests.support.env import make_settings
from tests.support.tiny_gguf import llama_logits

torch = pytest.importorskip("torch")
pytest.importorskip("gguf", reason="gguf is in requirements.txt")

from specrag.tune import gguf_model  # noqa: E402  (needs torch)

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
    from specrag.pipeline import profile
    from specrag.resilience.chains import tier_from_settings
    from specrag.testing.stand_ins import OrderRanker
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
    assert np.abs(llama_logits(tiny_gguf, ids, tmp_path / "out" / "draft-lora.gguf")
                  - llama_logits(tiny_gguf, ids)).max() > 0
