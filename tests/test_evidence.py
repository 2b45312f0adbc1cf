"""Evidence cut: the sentences of a chunk most about a claim, in order, within a word budget."""

import numpy as np

from specrag.grounding.evidence import select
from specrag.grounding.text import split_sentences
from specrag.grounding.verifier import Verifier

CHUNK = ("The company was founded in 1998 in Oslo. It sells bicycles across Europe. "
         "Its chief executive is Maria Lund, who joined in 2015. Revenue grew to 40 million "
         "euros last year. The head office moved to Bergen in 2021. Staff numbers are not public.")


def test_short_premises_are_kept_whole():
    assert select("One short premise. Two.", "anything at all", max_words=64) == \
        "One short premise. Two."
    assert select(CHUNK, "x", max_words=0) == CHUNK


def test_keeps_the_sentences_sharing_the_claims_words_in_document_order():
    got = select(CHUNK, "Maria Lund became chief executive in 2015.", max_words=20)
    assert "Its chief executive is Maria Lund, who joined in 2015." in got
    assert "Revenue" not in got and len(got.split()) <= 20  # budget: one neighbour at most
    two = select(CHUNK, "Founded in Oslo, it moved its head office to Bergen.", max_words=20)
    assert two == ("The company was founded in 1998 in Oslo. "
                   "The head office moved to Bergen in 2021.")


def test_a_claim_sharing_nothing_still_gets_some_evidence():
    got = select(CHUNK, "Zebras are striped.", max_words=15)
    assert got and set(split_sentences(got)) <= set(split_sentences(CHUNK))


class RecordingScorer:
    def __init__(self):
        self.pairs = []

    def predict(self, pairs):
        self.pairs += list(pairs)
        return np.full(len(pairs), 0.9)


def test_the_verifier_scores_the_cut_and_reports_the_whole_chunk(settings):
    scorer = RecordingScorer()
    v = Verifier(settings, scorer=scorer, threshold=0.5, evidence_words=20)
    verdict = v.verify("Maria Lund has been chief executive since 2015.", [CHUNK])
    (premise, hypothesis), = scorer.pairs
    assert premise != CHUNK and "Maria Lund" in premise and len(premise.split()) <= 20
    assert verdict.to_dict([CHUNK])["sentences"][0]["best_chunk_text"] == CHUNK
    whole = RecordingScorer()
    Verifier(settings, scorer=whole, threshold=0.5, evidence_words=0).verify(
        "Maria Lund has been chief executive since 2015.", [CHUNK])
    assert whole.pairs[0][0] == CHUNK


def test_the_cut_splits_premises_as_the_shipped_verifier_was_trained():
    """The verifier learned on premises cut with the rough split (no abbreviation rule); the
    serving cut must stay that split, or the model is served what it never saw."""
    from specrag.grounding.evidence import select
    from specrag.grounding.text import rough_sentences, split_sentences

    text = "The fund was set up by Dr. Alma Reyes in 1990. " + "Filler words here. " * 30
    assert rough_sentences(text)[:2] == ["The fund was set up by Dr.", "Alma Reyes in 1990."]
    assert split_sentences(text)[0] == "The fund was set up by Dr. Alma Reyes in 1990."
    # the claim's best sentence under the rough split is "Alma Reyes in 1990.", alone
    assert select(text, "Alma Reyes founded it in 1990.", max_words=4) == "Alma Reyes in 1990."
