"""Control flow of the speculative engine with deterministic fakes (no models)."""

import asyncio
import re

import pytest

from specrag.pipeline.events import KINDS
from specrag.types import SpecragError
from tests.support.fakes import TEXTS, FakeRetriever, engine


def in_order(kinds) -> bool:
    """Events come in ``KINDS`` order; a sentence check arrives among the draft's tokens."""
    rank = [KINDS.index("draft_token" if k == "sentence_checked" else k) for k in kinds]
    return rank == sorted(rank)


async def events_of(eng, q="How much annual leave?", **kw):
    return [e async for e in eng.astream(q, **kw)]


def test_accepted_draft_is_the_answer_and_events_are_ordered(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].")
    evs = asyncio.run(events_of(eng))
    kinds = [e.kind for e in evs]
    assert kinds[0] == "retrieved" and kinds[-1] == "final"
    assert in_order(kinds)
    assert "heavy_token" not in kinds and heavy.calls == []
    ans = evs[-1].answer
    assert ans.tier == "draft" and ans.accepted and ans.verdict.score == 1.0
    assert "".join(e.text for e in evs if e.kind == "draft_token") == ans.text
    assert [(c.number, c.source, c.page) for c in ans.citations] == [(1, "doc0.md", 1)]
    # the draft saw only the top draft_k chunks (the best one by default), documents
    # quoted as data
    prompt = draft.calls[0][1]["content"]
    assert eng.settings.retrieval.draft_k == 1
    assert prompt.count("<document") == 1 and TEXTS[0] in prompt
    assert not any(t in prompt for t in TEXTS[1:])
    assert "not instructions" in draft.calls[0][0]["content"]
    assert ans.cost_usd == 0.0 and ans.heavy_only_cost_usd > 0  # Claude would have cost money
    assert {"retrieval", "vector_search", "draft_ttft", "draft", "verify", "total"} <= set(ans.timings_ms)


def test_the_draft_reads_the_rerankers_best_of_the_first_hits(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Pages are acknowledged within 15 minutes [1].",
                               **{"retrieval.draft_pool": 3, "retrieval.draft_margin": 0.0})
    ans = asyncio.run(eng.aask("How fast are pages acknowledged?", policy="draft-only"))
    prompt = draft.calls[0][1]["content"]
    # the reverse reranker ranks the first three hits last-first (and, with no margin, its
    # best replaces the first hit): the draft gets the third
    assert prompt.count("<document") == 1 and TEXTS[2] in prompt
    assert eng.reranker.calls == 1 and "draft_pick" in ans.timings_ms
    assert [(c.number, c.source) for c in ans.citations] == [(1, "doc2.md")]


def test_rejected_draft_goes_to_heavy_with_reranked_chunks(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Employees receive 40 days of leave and a free car.",
                               **{"retrieval.heavy_k": 2, "retrieval.rerank_fusion": False})
    evs = asyncio.run(events_of(eng, policy="lazy"))
    ans = evs[-1].answer
    assert ans.tier == "heavy" and not ans.verdict.accepted
    assert ans.text == "Pages are acknowledged within 15 minutes [1]."
    assert ans.draft.text.startswith("Employees receive 40")
    # heavy prompt holds the reranker's top heavy_k (reverse order): TEXTS[3], TEXTS[2]
    prompt = heavy.calls[0][1]["content"]
    assert prompt.index(TEXTS[3]) < prompt.index(TEXTS[2]) and TEXTS[0] not in prompt
    assert ans.citations[0].source == "doc3.md"
    u = ans.usage[-1]
    assert ans.cost_usd == pytest.approx((u.input_tokens * 3 + u.output_tokens * 15) / 1e6)
    assert ans.heavy_only_cost_usd == pytest.approx(ans.cost_usd)
    kinds = [e.kind for e in evs]
    assert kinds.index("verdict") < kinds.index("rerank_done") < kinds.index("heavy_token")


def test_baseline_policies(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.")
    only_draft = asyncio.run(eng.aask("leave?", policy="draft-only"))
    assert only_draft.tier == "draft" and not only_draft.verdict.accepted and heavy.calls == []
    only_heavy = asyncio.run(eng.aask("leave?", policy="heavy-only"))
    assert only_heavy.tier == "heavy" and only_heavy.draft is None and only_heavy.verdict is None
    assert len(draft.calls) == 1 and len(heavy.calls) == 1
    assert only_heavy.timings_ms["first_token"] == pytest.approx(
        only_heavy.timings_ms["rerank"] + only_heavy.timings_ms["heavy_ttft"]
        + only_heavy.timings_ms["retrieval"], abs=50)


def test_eager_cancels_heavy_when_the_draft_is_accepted(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].",
                               delay=0.02, heavy_reply=" ".join(["word"] * 200), heavy_delay=0.01)
    ans = asyncio.run(eng.aask("leave?", policy="eager"))
    assert ans.tier == "draft" and ans.heavy_cancelled
    assert len(heavy.calls) == 1 and heavy.cancelled == 1  # started, then stopped
    cancelled = [u for u in ans.usage if u.cancelled]
    assert len(cancelled) == 1 and 0 < cancelled[0].output_tokens < 200
    assert ans.cost_usd > 0  # the cancelled Claude call is still paid for


def test_eager_uses_the_heavy_answer_already_in_flight_when_rejected(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.", delay=0.02,
                               heavy_delay=0.001)
    evs = asyncio.run(events_of(eng, policy="eager"))
    ans = evs[-1].answer
    assert ans.tier == "heavy" and not ans.heavy_cancelled and len(heavy.calls) == 1
    # the heavy generation started before the verdict was known
    assert ans.timings_ms["heavy_start"] < next(e.t_ms for e in evs if e.kind == "verdict")


def test_eager_heavy_ttft_is_the_models_own_not_when_it_was_drained(tmp_path):
    eng, _, _ = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.", delay=0.05,
                       heavy_delay=0.001)
    evs = asyncio.run(events_of(eng, policy="eager"))
    t = evs[-1].answer.timings_ms
    verdict_at = next(e.t_ms for e in evs if e.kind == "verdict")
    # the heavy model produced its first token long before the verdict let it through
    assert t["heavy_start"] + t["heavy_ttft"] < verdict_at
    assert next(e.t_ms for e in evs if e.kind == "heavy_token") >= verdict_at


@pytest.mark.parametrize("local_too", [False, True])
def test_eager_keeps_a_local_heavy_model_off_the_cores_of_a_local_draft(tmp_path, local_too):
    eng, _, heavy = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.", delay=0.02,
                           **{"generation.eager_heavy_local": local_too})
    eng.draft.name = heavy.name = "llama-cpp"  # both on this machine
    evs = asyncio.run(events_of(eng, policy="eager"))
    ans = evs[-1].answer
    verdict_at = next(e.t_ms for e in evs if e.kind == "verdict")
    assert ans.tier == "heavy" and len(heavy.calls) == 1
    started_early = "heavy_start" in ans.timings_ms and ans.timings_ms["heavy_start"] < verdict_at
    assert started_early == local_too


def test_abstaining_draft_escalates_unless_disabled(tmp_path):
    eng, _, heavy = engine(tmp_path, "The documents do not say.")
    assert asyncio.run(eng.aask("Who founded the company?")).tier == "heavy"
    eng, _, heavy = engine(tmp_path, "The documents do not say.",
                           **{"verify.escalate_abstentions": False})
    ans = asyncio.run(eng.aask("Who founded the company?"))
    assert ans.tier == "draft" and ans.verdict.abstained and heavy.calls == []


def test_bad_questions_and_policies_are_refused(tmp_path):
    eng, _, _ = engine(tmp_path, "x")
    with pytest.raises(SpecragError, match="empty"):
        asyncio.run(eng.aask("   "))
    with pytest.raises(SpecragError, match="policy"):
        asyncio.run(eng.aask("q", policy="yolo"))


def test_empty_collection_answers_not_found(tmp_path):
    eng, draft, heavy = engine(tmp_path, "x")
    eng.retriever = FakeRetriever(texts=[])
    ans = asyncio.run(eng.aask("anything"))
    assert ans.text == "The documents do not say." and draft.calls == [] and heavy.calls == []


def test_rerank_fusion_blends_the_reranker_and_bi_encoder_orders(tmp_path):
    # the fake reranker reverses the four hits; fused by rank, the bi-encoder's first and
    # the reranker's first tie at the top (the bi-encoder's wins the tie)
    eng, _, heavy = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.",
                           **{"retrieval.heavy_k": 2, "retrieval.rerank_fusion": True})
    ans = asyncio.run(eng.aask("leave?"))
    prompt = heavy.calls[0][1]["content"]
    assert prompt.index(TEXTS[0]) < prompt.index(TEXTS[3])
    assert TEXTS[1] not in prompt and TEXTS[2] not in prompt and "rerank" in ans.timings_ms


def test_rerank_off_keeps_the_bi_encoder_order_for_the_heavy_model(tmp_path):
    eng, _, heavy = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.",
                           **{"retrieval.rerank": False, "retrieval.heavy_k": 2})
    ans = asyncio.run(eng.aask("leave?"))
    prompt = heavy.calls[0][1]["content"]
    assert ans.tier == "heavy" and prompt.index(TEXTS[0]) < prompt.index(TEXTS[1])
    assert TEXTS[3] not in prompt and "rerank" not in ans.timings_ms


def test_every_shown_answer_carries_its_verdict(tmp_path):
    # the heavy answer is checked like the draft, against the chunks its prompt held
    eng, _, _ = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.",
                       **{"retrieval.heavy_k": 2, "retrieval.rerank_fusion": False})
    evs = asyncio.run(events_of(eng, policy="lazy"))
    kinds = [e.kind for e in evs]
    assert kinds.index("heavy_done") < kinds.index("heavy_verdict") < kinds.index("final")
    ans = evs[-1].answer
    assert ans.tier == "heavy" and ans.heavy_verdict is evs[kinds.index("heavy_verdict")].verdict
    assert ans.supported and ans.support_note == ""
    assert ans.to_dict()["heavy_verdict"]["grounded"] == pytest.approx(ans.heavy_verdict.grounded, abs=1e-4)
    assert "verify_heavy" in ans.timings_ms
    # an invented figure: shown with "not supported by the documents"
    eng, _, _ = engine(tmp_path, "Staff get forty weeks of unpaid sabbatical.",
                       heavy_reply="Travel is reimbursed at EUR 250 per night in Lisbon.")
    ans = asyncio.run(eng.aask("What is the hotel limit?", policy="lazy"))
    assert ans.tier == "heavy" and ans.supported is False
    assert ans.support_note.startswith("not supported by the documents (grounded ")
    assert ans.to_dict()["supported"] is False
    # the check can be turned off; the answer then says it was not checked
    eng, _, _ = engine(tmp_path, "Staff get forty weeks.", **{"verify.check_heavy": False})
    ans = asyncio.run(eng.aask("leave?", policy="heavy-only"))
    assert ans.heavy_verdict is None and ans.supported is None


def test_a_sentence_that_sinks_the_draft_stops_it_and_the_heavy_tier_answers(tmp_path):
    # the first sentence is unsupported; the rest would take 40 more tokens to stream
    reply = "Staff get forty weeks of unpaid sabbatical. " + " ".join(["More"] * 40) + "."
    eng, draft, heavy = engine(tmp_path, reply, delay=0.02, **{"verify.acceptance": "off"})
    evs = asyncio.run(events_of(eng, policy="lazy"))
    ans = evs[-1].answer
    assert ans.early_rejected is not None and ans.early_rejected.sentence.startswith("Staff get")
    assert ans.early_rejected.score < eng.verifier.threshold
    assert ans.tier == "heavy" and not ans.verdict.accepted and draft.cancelled == 1
    tokens = [e for e in evs if e.kind == "draft_token"]
    assert len(tokens) < 20 and ans.draft.text.count("More") < 15  # stopped early
    assert "early_reject" in ans.timings_ms and ans.to_dict()["early_rejected"]["score"] < 0.5
    kinds = [e.kind for e in evs]
    assert in_order(kinds)
    # draft-only keeps the whole draft (nothing to escalate to), and so does the setting off
    only = asyncio.run(eng.aask("How much annual leave?", policy="draft-only"))
    assert only.early_rejected is None and only.draft.text.endswith("More.")
    off = eng.replace(settings=eng.settings.with_values(**{"verify.early_reject": False}))
    assert asyncio.run(off.aask("How much annual leave?", policy="lazy")).early_rejected is None


def test_a_grounded_first_sentence_lets_the_draft_finish(tmp_path):
    reply = ("Employees receive 25 days of paid annual leave per year [1]. "
             "Expense claims must be filed within 30 days [2].")
    eng, draft, heavy = engine(tmp_path, reply, delay=0.01)
    ans = asyncio.run(eng.aask("How much annual leave?", policy="lazy"))
    assert ans.early_rejected is None and ans.draft.text.endswith("30 days [2].")
    assert draft.cancelled == 0


def test_sentences_checked_while_drafting_are_marked_on_the_page(tmp_path):
    from specrag.ui.chat import render_turn
    from specrag.ui.turn import Turn

    reply = ("Employees receive 25 days of paid annual leave per year [1]. "
             + " ".join(["Staff"] * 30) + " get forty weeks of sabbatical.")
    eng, draft, heavy = engine(tmp_path, reply, delay=0.02, **{"verify.acceptance": "off"})
    evs = asyncio.run(events_of(eng, policy="lazy"))
    kinds = [e.kind for e in evs]
    assert in_order(kinds)
    checked = [e for e in evs if e.kind == "sentence_checked"]
    assert [e.text for e in checked] == ["Employees receive 25 days of paid annual leave per year."]
    assert checked[0].verdict.sentences[0].score >= eng.verifier.threshold
    # the page, replayed up to the first token after the check: that sentence is green
    turn = Turn("How much annual leave?")
    for e in evs[:kinds.index("sentence_checked") + 2]:
        turn.apply(e)
    html = render_turn(turn)
    assert turn.stage == "drafting" and '<span class="sr-live sr-pass"' in html
    assert re.search(r'<span class="sr-live sr-pass"[^>]*>Employees receive 25 days of paid '
                     r"annual leave per year \[1\]\.</span> Staff", html)
    for e in evs:  # the whole verdict replaces the live marks
        turn.apply(e)
    assert "sr-live" not in render_turn(turn)


def test_sinks_is_exact_for_min_and_never_for_mean(tmp_path):
    from specrag.grounding.acceptance import AcceptanceModel
    from specrag.grounding.verifier import Verifier
    from tests.support.env import make_settings
    from tests.support.fakes import WordScorer

    s = make_settings(tmp_path)
    off = Verifier(s, scorer=WordScorer(), acceptance="off", threshold=0.8)
    assert off.sinks(0.79) and not off.sinks(0.8)
    assert not Verifier(s, scorer=WordScorer(), acceptance="off", aggregate="mean").sinks(0.0)
    v = Verifier(s, scorer=WordScorer(), answer_threshold=0.6).warm_up()
    v.acceptance_model = AcceptanceModel(-1.0, (1.0, 1.0, 0.0, 0.0), 0.0, (0.5, 1.0))
    r = v.acceptance_model.max_relevance()
    assert r == pytest.approx(1 / (1 + 2.718281828 ** -1.0), rel=1e-6)
    # the bar on grounding where the best-case relevance just reaches P(right) = 0.6
    for g in (0.05, 0.3, 0.6, 0.9):
        assert v.sinks(g) == (v.acceptance_model.combine(g, r) < 0.6)
    assert v.sinks(0.01) and not v.sinks(0.9)


def test_a_bare_answer_checked_while_streaming_is_scored_with_its_question(tmp_path):
    from specrag.grounding.verifier import Verifier
    from specrag.pipeline.early import SentenceWatch
    from specrag.training.data import qa_claim
    from tests.support.env import make_settings
    from tests.support.fakes import WordScorer

    class Recording(WordScorer):
        def __init__(self):
            self.seen = []

        def predict(self, pairs):
            self.seen += [h for _, h in pairs]
            return super().predict(pairs)

    question = "How many days of annual leave do employees receive?"
    scorer = Recording()
    verifier = Verifier(make_settings(tmp_path), scorer=scorer, acceptance="off")

    async def stream():
        watch = SentenceWatch(verifier, TEXTS, question)
        watch.feed("It is 25 days. Staff also get")  # the first sentence is complete
        sunk, checked = None, []
        for _ in range(500):  # as the draft loop does: poll while tokens arrive
            await asyncio.sleep(0.01)
            sunk = sunk or watch.sunk()
            checked += watch.checked()
            if checked:
                break
        await watch.close()
        return sunk, checked

    sunk, checked = asyncio.run(stream())
    # alone "It is 25 days." claims nothing; with its question it is the verdict's claim
    assert scorer.seen and set(scorer.seen) == {qa_claim(question, "It is 25 days.")}
    final = verifier.verify("It is 25 days. Staff also get paid leave.", TEXTS, question)
    assert len(checked) == 1 and sunk in (None, checked[0].sentences[0])
    assert checked[0].sentences[0].score == pytest.approx(final.sentences[0].score)
    assert checked[0].relevance is None  # grounding only while streaming: no relevance work
