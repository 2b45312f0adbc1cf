"""The end-to-end harness on a tiny slice: real retrieval, deterministic generators."""

import json

import pytest

from specrag.bench import e2e, e2e_report
from specrag.generators.base import Timer, Usage
from specrag.grounding.verifier import Verifier
from specrag.pipeline.engine import SpeculativeRAG
from specrag.routing.features import FEATURES
from specrag.testing.mockapi import first_sentence_answer
from specrag.testing.stand_ins import OrderRanker
from tests.support.docs import write_handbook
from tests.support.env import make_settings
from tests.support.fakes import WordScorer

pytestmark = pytest.mark.slow


class Extractive:
    """Answers with the first sentence of the first document it is shown."""

    def __init__(self, name):
        self.name, self.model, self.calls = name, name, 0

    def warm_up(self):
        return self

    async def stream(self, messages, max_tokens=256, temperature=0.0):
        self.calls += 1
        timer = Timer()
        words = first_sentence_answer(messages).split(" ")
        for i, w in enumerate(words):
            timer.token()
            yield w if i == 0 else " " + w
        yield Usage(self.name, self.model, 100, len(words), timer.ttft_ms, timer.total_ms)


QUESTIONS = [
    {"question": "How many weeks of parental leave do new parents get?",
     "answer": ["16 weeks"], "gold_source": "leave.pdf"},
    {"question": "Which encryption must laptops use?", "answer": "full-disk encryption",
     "gold_source": "security.html"},
    {"question": "When is the office kitchen cleaned?", "answer": ["every Friday afternoon",
                                                                   "Friday"],
     "gold_source": "notes.txt"},
]


@pytest.fixture
def byod(tmp_path):
    write_handbook(tmp_path / "corpus")
    path = tmp_path / "my.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    return str(path), str(tmp_path / "corpus")


def run(tmp_path, byod, embedder, gens):
    dataset, corpus = byod
    settings = make_settings(tmp_path / "unused")

    def make_engine(s, retriever):
        retriever.embedder = embedder
        return SpeculativeRAG(s, retriever=retriever, draft=gens["draft"], heavy=gens["heavy"],
                              verifier=Verifier(s, scorer=WordScorer()),
                              reranker=OrderRanker())

    return e2e.run(settings, dataset, n=3, corpus=corpus, out_dir=str(tmp_path / "out"),
                   make_engine=make_engine, progress=False)


def test_harness_scores_every_policy_and_resumes(tmp_path, byod, embedder):
    gens = {"draft": Extractive("fake"), "heavy": Extractive("anthropic")}
    gens["heavy"].model = "claude-sonnet-4-6"
    result = run(tmp_path, byod, embedder, gens)
    out = tmp_path / "out"
    rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 15 and {r["policy"] for r in rows} == set(e2e.POLICIES)
    routed = [r for r in rows if r["policy"] == "routed"]
    assert all(r["route"] in ("draft", "heavy") and 0 <= r["p_draft"] <= 1 for r in routed)
    assert all(set(r["route_features"]) == set(FEATURES) for r in rows)  # train router from rows
    assert all((r["draft"] is None) == (r["route"] == "heavy") for r in routed)
    pol = result["policies"]
    assert pol["heavy-only"]["vs_heavy_only"]["contains"] == 1.0
    assert pol["draft-only"]["heavy_tokens"] == 0 and pol["heavy-only"]["heavy_tokens"] > 0
    assert pol["heavy-only"]["cost_usd"] > 0 and pol["draft-only"]["cost_usd"] == 0
    assert pol["heavy-only"]["gold_retrieved"] == 1.0
    # the prompt sizes it ran with (set by SPECRAG_RETRIEVAL__* or not) are in the record
    assert result["meta"]["retrieval"]["draft_k"] == make_settings(tmp_path).retrieval.draft_k
    for p in ("draft-only", "lazy"):
        assert pol[p]["acceptance_rate"] is not None
    assert 0 <= pol["lazy"]["contains"] <= 1
    assert len(result["sweep"]) == 21 and result["sweep"][0]["acceptance_rate"] == 1.0
    assert "plotly" in (out / "e2e.html").read_text()[:200000]
    md = (out / "e2e.md").read_text()
    assert "| contains gold |" in md and "Threshold sweep" in md and "| routed to draft |" in md

    # a killed run: the last answers are missing and the last line is cut mid-way
    lines = (out / "rows.jsonl").read_text().splitlines()
    (out / "rows.jsonl").write_text("\n".join(lines[:7]) + "\n" + lines[7][:40])
    fresh = {"draft": Extractive("fake"), "heavy": Extractive("anthropic")}
    again = run(tmp_path, byod, embedder, fresh)
    redone = fresh["draft"].calls + fresh["heavy"].calls
    assert 0 < redone <= 8 * 2  # only the 8 missing answers were generated again
    rows = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 15 and len({(r["id"], r["policy"]) for r in rows}) == 15
    assert again["policies"]["heavy-only"]["n"] == 3

    (out / "e2e.md").unlink()
    e2e_report.render(str(out / "e2e.json"))
    assert "| exact match |" in (out / "e2e.md").read_text()


def test_reverify_rescores_the_stored_drafts_without_generating(tmp_path, byod, embedder):
    from specrag.bench import reverify

    gens = {"draft": Extractive("fake"), "heavy": Extractive("anthropic")}
    run(tmp_path, byod, embedder, gens)
    calls = gens["draft"].calls + gens["heavy"].calls
    out = tmp_path / "out"
    s = make_settings(tmp_path / "unused")
    never = reverify.run(out, s, out=tmp_path / "never", embedder=embedder,
                         verifier=Verifier(s, scorer=WordScorer(), threshold=1.01))
    always = reverify.run(out, s, out=tmp_path / "always", embedder=embedder,
                          verifier=Verifier(s, scorer=WordScorer(), threshold=0.0))
    assert gens["draft"].calls + gens["heavy"].calls == calls  # nothing generated again
    assert never["drafts"] == always["drafts"] == 3
    # (the fake drafts copy a sentence, so they score 1.0; the thresholds decide)
    # rejecting every draft replays heavy-only; accepting every one needs no heavy tokens
    lz = never["replayed_lazy"]
    assert lz["acceptance_rate"] == 0.0 and lz["tokens_vs_heavy_only"] == 1.0
    assert lz["accuracy"] == lz["heavy_only_accuracy"]
    assert always["replayed_lazy"]["acceptance_rate"] == 1.0
    assert always["replayed_lazy"]["heavy_tokens"] == 0
    assert "replayed lazy vs heavy-only" in (tmp_path / "always" / "reverify.md").read_text()
    stored = [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines()]
    assert len(stored) == 15  # the run's own rows are left as they were


def test_slices_report_each_slice_and_all_pooled(tmp_path, byod, embedder):
    from specrag.bench import slices

    gens = {"draft": Extractive("fake"), "heavy": Extractive("anthropic")}
    rows = run(tmp_path, byod, embedder, gens)["rows"]
    # the same three questions as two slices: pooled, they stay six distinct questions
    summaries = slices.combined({"squad": rows, "halueval-qa": rows[:10]}, {"n": 3})
    assert set(summaries) == {"squad", "halueval-qa", "overall"}
    overall, one = summaries["overall"]["policies"], summaries["squad"]["policies"]
    assert overall["heavy-only"]["n"] == one["heavy-only"]["n"] + summaries["halueval-qa"][
        "policies"]["heavy-only"]["n"]
    assert overall["heavy-only"]["heavy_tokens"] > one["heavy-only"]["heavy_tokens"]
    md = slices.to_markdown(summaries)
    assert "## squad (single-hop, 3 questions)" in md and "## overall (all slices" in md
    assert "| routed |" in md and "routed to draft" in md
    html = slices.to_html(summaries)
    assert "Correct (contains gold) per slice" in html and "halueval-qa" in html


def test_unknown_policy_and_missing_corpus(tmp_path, byod):
    with pytest.raises(ValueError, match="unknown policies"):
        e2e.run(make_settings(tmp_path), byod[0], policies=("fast",), corpus=byod[1])
    # the served prompt cache would let lazy reuse draft-only's prompt for the same question
    with pytest.raises(ValueError, match="one policy"):
        e2e.run(make_settings(tmp_path), byod[0], policies=("draft-only", "lazy"),
                corpus=byod[1], prompt_cache=True)
    with pytest.raises(ValueError, match="--corpus"):
        e2e.load_questions(make_settings(tmp_path), byod[0], 3, 0, None)
