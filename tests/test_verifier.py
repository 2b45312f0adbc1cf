"""Verdict logic with a fake scorer: splitting, citations, aggregation, abstention, threshold."""

import numpy as np
import pytest

from specrag.grounding.text import claims, split_sentences, strip_citations
from specrag.grounding.verdict import is_abstention
from specrag.grounding.verifier import Verifier, affirmed
from specrag.training.calibrate import choose_threshold, write_threshold


class FakeScorer:
    """Score = 0.9 when the sentence's first word appears in the chunk, else 0.1."""

    def __init__(self):
        self.calls = []

    def predict(self, pairs):
        self.calls.append(list(pairs))
        return np.array([0.9 if h.split()[0].lower() in p.lower() else 0.1 for p, h in pairs])


def test_split_sentences_keeps_abbreviations_and_splits_glued_text():
    assert split_sentences("Dr. Smith came in 2009.Stock rose. It was 5 p.m. Then rain!") == [
        "Dr. Smith came in 2009.", "Stock rose.", "It was 5 p.m.", "Then rain!"]
    assert split_sentences("  ") == []


def test_citations_are_stripped_and_fragments_merged():
    assert strip_citations("Paris is the capital [1]. It is big [2, 3][doc 4].") == \
        "Paris is the capital. It is big."
    assert claims("Yes. Paris is the capital of France [1]. Indeed.") == [
        "Yes. Paris is the capital of France. Indeed."]


def test_one_batched_call_max_over_chunks_min_over_sentences(settings):
    scorer = FakeScorer()
    v = Verifier(settings, scorer=scorer, threshold=0.5)
    chunks = ["paris is in france", "berlin is in germany", "madrid is in spain"]
    verdict = v.verify("Paris is the capital of France. Berlin is the capital of Germany.", chunks)
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 6
    assert [s.best_chunk for s in verdict.sentences] == [0, 1]
    assert verdict.score == pytest.approx(0.9) and verdict.accepted
    bad = v.verify("Paris is lovely in spring. Rome is the capital of Italy.", chunks)
    assert bad.score == pytest.approx(0.1) and not bad.accepted
    assert [round(s.score, 1) for s in bad.sentences] == [0.9, 0.1]
    mean = Verifier(settings, scorer=FakeScorer(), aggregate="mean", threshold=0.45).verify(
        "Paris is lovely in spring. Rome is the capital of Italy.", chunks)
    assert mean.score == pytest.approx(0.5, abs=1e-6) and mean.accepted


def test_lexical_prefilter_scores_fewer_pairs(settings):
    scorer = FakeScorer()
    chunks = ["paris is in france", "berlin is in germany", "madrid is in spain", "rome italy"]
    v = Verifier(settings, scorer=scorer, threshold=0.5, per_sentence=1)
    verdict = v.verify("Berlin is the capital of Germany. Rome is the capital of Italy.", chunks)
    assert len(scorer.calls[0]) == 2 and [s.best_chunk for s in verdict.sentences] == [1, 3]
    assert verdict.accepted


def test_threshold_comes_from_settings(settings):
    strict = settings.with_values(**{"verify.threshold": 0.95})
    verdict = Verifier(strict, scorer=FakeScorer()).verify("Paris is nice today.", ["paris"])
    assert verdict.threshold == 0.95 and not verdict.accepted


def test_abstention_is_not_a_hallucination(settings):
    assert is_abstention("The documents do not say when the office opens.")
    assert is_abstention("I could not find this in the provided context.")
    assert not is_abstention("The office opens at 9 am.")
    scorer = FakeScorer()
    v = Verifier(settings, scorer=scorer, threshold=0.5)
    only = v.verify("The documents do not say when the office opens.", ["paris"])
    assert only.accepted and only.abstained and only.score == 1.0 and scorer.calls == []
    mixed = v.verify("The documents do not say when it opens. Rome is in Italy.", ["paris"])
    assert not mixed.accepted and not mixed.abstained
    assert mixed.sentences[0].abstention and mixed.sentences[1].score == pytest.approx(0.1)


def test_empty_draft_and_no_chunks_are_rejected(settings):
    v = Verifier(settings, scorer=FakeScorer(), threshold=0.5)
    assert not v.verify("", ["paris"]).accepted
    verdict = v.verify("Paris is in France.", [])
    assert verdict.score == 0.0 and not verdict.accepted and verdict.sentences[0].best_chunk is None


def test_choose_threshold_reaches_target_precision():
    scores = np.linspace(0, 1, 101)
    labels = scores > 0.6  # perfectly separable above 0.6
    r = choose_threshold(scores, labels, 0.95)
    assert r["target_met"] and r["precision"] >= 0.95 and 0.55 <= r["threshold"] <= 0.62
    r = choose_threshold(scores, np.zeros(101), 0.95)  # unreachable
    assert not r["target_met"]


def test_write_threshold_keeps_other_settings(tmp_path):
    from specrag.settings import Settings

    path = tmp_path / "specrag.yaml"
    path.write_text("retrieval:\n  top_k: 7\n")
    write_threshold(path, 0.731)
    s, origins = Settings.load(path, env={})
    assert s.verify.threshold == pytest.approx(0.731) and s.retrieval.top_k == 7
    assert origins["verify.threshold"].startswith("file:")


def test_a_sentence_copied_whole_from_a_chunk_is_supported(tmp_path):
    from specrag.grounding.verifier import Verifier
    from tests.support.env import make_settings

    class Doubtful:  # a weak model that doubts everything
        def predict(self, pairs):
            return [0.3] * len(pairs)

    v = Verifier(make_settings(tmp_path), scorer=Doubtful(), threshold=0.72)
    chunks = ["On-call. The on-call engineer acknowledges every page within 15 minutes. "
              "Handover is on Mondays.", "Laptops are encrypted."]
    quoted = v.verify("The on-call engineer acknowledges every page within 15 minutes [1].", chunks)
    assert quoted.accepted and quoted.score == 1.0 and quoted.sentences[0].best_chunk == 0
    changed = v.verify("The on-call engineer acknowledges every page within 50 minutes.", chunks)
    assert not changed.accepted and changed.score < 0.72
    partial = v.verify("Handover is on Mondays and Fridays.", chunks)  # not a whole sentence
    assert not partial.accepted


def test_a_copied_sentence_costs_no_cross_encoder_run(settings):
    """The copy is its own evidence: only the other sentences are scored."""
    scorer = FakeScorer()
    v = Verifier(settings, scorer=scorer, threshold=0.5)
    chunks = ["Laptops are encrypted with a key held by IT. Backups run every single night.",
              "paris is in france"]
    verdict = v.verify("Backups run every single night [1]. Paris is the capital of France.", chunks)
    assert [h for call in scorer.calls for _, h in call] == ["Paris is the capital of France."] * 2
    copied, other = verdict.sentences
    assert (copied.score, copied.best_chunk) == (1.0, 0)
    assert other.score == pytest.approx(0.9) and other.best_chunk == 1 and verdict.accepted
    scorer.calls.clear()
    assert v.verify("Backups run every single night.", chunks).score == 1.0 and scorer.calls == []


def test_the_latency_benchmark_times_sentences_the_cross_encoder_must_score():
    """Copied sentences skip the cross-encoder, so the benchmark's draft rewords its chunks."""
    from specrag.bench.verifier import latency_case
    from specrag.grounding.verifier import QUOTE_MIN_WORDS, _norm
    from specrag.training.data import Pair

    passages = [f"Passage {i} says the depot {i} opened in {1900 + i}. It has {i} doors."
                for i in range(12)]
    pairs = [Pair(p, f"Depot number {i} was opened in the year {1900 + i}.", 1.0, "paraphrase",
                  "test", "paraphrase") for i, p in enumerate(passages)]
    pairs += [Pair(p, f"Depot {i} opened in {1800 + i}.", 0.0, "paraphrase", "test", "year")
              for i, p in enumerate(passages)]
    chunks, draft = latency_case(pairs)
    assert chunks == passages[:10]
    sents = claims(draft)
    assert len(sents) == 3 and all(len(s.split()) >= QUOTE_MIN_WORDS for s in sents)
    copied = {_norm(x) for c in chunks for x in split_sentences(c)}
    assert not any(_norm(s) in copied for s in sents)
    assert "1800" not in draft  # supported claims only
    # a hypothesis copied from its passage is skipped; without hard sets, changed sentences
    copy = [Pair(p, p.split(". ")[0] + ".", 1.0, "paraphrase", "test", "copied") for p in passages]
    chunks, draft = latency_case(copy + pairs)
    assert "Passage 0 says" not in draft and len(claims(draft)) == 3
    syn = [Pair(p, f"Depot {i} opened in {1800 + i}.", 0.0, "synthetic", "test", "year")
           for i, p in enumerate(passages)]
    chunks, draft = latency_case(syn)
    assert draft.startswith("Depot 0 opened in 1800.") and len(chunks) == 10
    with pytest.raises(ValueError, match="no claims to time"):
        latency_case(copy)


def test_an_opening_yes_or_no_is_not_part_of_the_claim_checked(settings):
    assert affirmed("Yes, Koundouros and Hanson were both film directors.") == \
        "Koundouros and Hanson were both film directors."
    assert affirmed("No, it was not built before 1900.") == "It was not built before 1900."
    assert affirmed("Yes, it was.") == "Yes, it was."  # a bare answer keeps its word
    assert affirmed("Yesterday the office opened at nine.") == "Yesterday the office opened at nine."
    assert affirmed("Nobody saw the tower from the river.") == "Nobody saw the tower from the river."
    scorer = FakeScorer()  # scores by the claim's first word: "Paris" is in the chunk
    verdict = Verifier(settings, scorer=scorer, threshold=0.5).verify(
        "Yes, Paris is the capital of France.", ["paris is the capital of france"])
    assert verdict.accepted and scorer.calls[0][0][1] == "Paris is the capital of France."
