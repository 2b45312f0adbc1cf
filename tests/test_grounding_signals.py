"""Key spans, the grounding head, answer relevance and the acceptance model (no models)."""

import numpy as np
import pytest

from specrag.grounding.acceptance import AcceptanceModel, resolve
from specrag.grounding.head import GroundingHead
from specrag.grounding.relevance import (
    asked_type,
    novel,
    q_evidence,
    relevance_features,
    type_match,
)
from specrag.grounding.spans import key_spans, missing, numbers
from specrag.grounding.verifier import Verifier

PASSAGE = ("The tower, designed by Karl Brenner and completed in 1889, stands 1,063 feet "
           "tall in Paris.")


def test_key_spans_are_names_numbers_and_months_not_sentence_openers():
    assert key_spans("However, Brenner finished it in May 1889.") == [
        ("number", "1889"), ("name", "Brenner")]
    assert ("name", "Gustave Eiffel") in key_spans("Gustave Eiffel designed the tower.")
    assert key_spans("the tower is tall.") == []
    # an answer's opening "Yes," names no one (it cost every such draft its relevance)
    assert key_spans("Yes, Brenner finished it.") == [("name", "Brenner")]
    assert numbers("It cost 1,063 dollars, twelve times more.") == {1063.0, 12.0}


def test_missing_spans_of_a_claim_against_its_evidence():
    assert missing("Karl Brenner designed the tower.", PASSAGE) == 0.0
    assert missing("Gustave Eiffel designed the tower.", PASSAGE) == 1.0
    assert missing("It is 1063 feet tall.", PASSAGE) == 0.0  # 1,063 and 1063 are one value
    assert missing("It was completed in 1887.", PASSAGE) == 1.0
    assert missing("Brenner built it in 1887.", PASSAGE) == pytest.approx(0.5)
    assert missing("The tower is tall.", PASSAGE) == 0.0  # nothing to check: no penalty


def test_head_fits_on_labelled_pairs_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    y = rng.random(n) < 0.5
    # the cross-encoder is fooled half the time on negatives; their spans are missing
    ce = np.where(y, rng.uniform(0.6, 1.0, n), np.where(rng.random(n) < 0.5, rng.uniform(0.6, 1.0, n),
                                                         rng.uniform(0.0, 0.4, n)))
    gone = np.where(y, 0.0, rng.choice([0.5, 1.0], n))
    head = GroundingHead.fit(ce, gone, y, fitted_on="synthetic",
                             names=("logit", "missing", "any_missing"))
    out = head.apply(ce, gone)
    assert head.weights[1] < 0  # a missing span lowers P(supported)
    assert ((out >= 0.5) == y).mean() > ((ce >= 0.5) == y).mean() + 0.15
    head.save(tmp_path)
    assert GroundingHead.load(tmp_path) == head
    assert GroundingHead.load(tmp_path / "nowhere") is None
    (tmp_path / "head.json").write_text('{"features": ["other"], "intercept": 0, "weights": [1]}')
    with pytest.raises(ValueError, match="features"):
        GroundingHead.load(tmp_path)


def test_relevance_signals():
    assert asked_type("When was the tower finished?") == "year"
    assert asked_type("How many floors does it have?") == "number"
    assert asked_type("Who designed the tower?") == "name"
    assert asked_type("Why is it famous?") is None
    assert type_match("When was the tower finished?", "It was finished in 1889.") == 1.0
    assert type_match("When was the tower finished?", "It was finished late.") == 0.0
    assert type_match("Who designed the tower?", "Karl Brenner designed it.") == 1.0
    assert type_match("Who designed the tower?", "An engineer designed it.") == 0.0
    assert type_match("How many floors has it?", "It has 3 floors.") == 1.0
    assert novel("Who plays Alex?", "Alex plays Alex.") == 0.0  # a tautology tells nothing
    assert novel("Who plays Alex?", "Sam Reid plays Alex.") == 0.5
    assert q_evidence("Who designed the tower?", [PASSAGE]) == 1.0
    assert q_evidence("Who painted the bridge?", [PASSAGE]) == 0.0
    other = "The bridge at Olten was designed by Maria Ostwald."
    # the draft's answer is in the chunk most about the question, or only elsewhere
    f = relevance_features("Who designed the tower?", "Karl Brenner.", [PASSAGE], [PASSAGE, other])
    assert f["answer_in_focus"] == 1.0 and f["q_evidence"] == 1.0
    f = relevance_features("Who designed the tower?", "Maria Ostwald.", [other], [PASSAGE, other])
    assert f["answer_in_focus"] == 0.0
    assert relevance_features("Who designed it?", "It was designed.", [PASSAGE])["answer_in_focus"] == 0.5


def _rows(n=200, seed=0):
    rng = np.random.default_rng(seed)
    grounded, feats, y = [], [], []
    for _ in range(n):
        right = rng.random() < 0.5
        answers = right or rng.random() < 0.3
        grounded.append(float(rng.uniform(0.7, 1.0) if right or rng.random() < 0.5 else rng.uniform(0, 0.5)))
        feats.append({"type_match": float(answers), "novel": float(rng.uniform(0.5, 1) if answers else 0.1),
                      "q_evidence": float(rng.uniform(0.3, 1)),
                      "answer_in_focus": float(rng.uniform(0.5, 1) if answers else rng.uniform(0, 0.5))})
        y.append(float(right))
    return grounded, feats, y


def test_acceptance_model_fits_combines_and_resolves(tmp_path):
    grounded, feats, y = _rows()
    m = AcceptanceModel.fit(grounded, feats, y, fitted_on="synthetic rows")
    p = np.array([m.combine(g, m.relevance(f)) for g, f in zip(grounded, feats)])
    alone = np.array(grounded)
    y = np.array(y) > 0.5
    # grounding alone cannot tell a grounded non-answer from a right draft; with relevance it can
    assert ((p >= 0.5) == y).mean() > ((alone >= 0.85) == y).mean()
    assert m.relevance({**feats[0], "type_match": 1.0, "novel": 0.9, "answer_in_focus": 0.9}) > \
        m.relevance({**feats[0], "type_match": 0.0, "novel": 0.0, "answer_in_focus": 0.1})
    path = m.save(tmp_path / "acceptance.json")
    assert AcceptanceModel.load(path) == m
    assert resolve("off", tmp_path) is None
    assert resolve("builtin", tmp_path) == m and resolve("builtin", tmp_path / "x") is None
    assert resolve(str(path), None) == m
    with pytest.raises(FileNotFoundError, match="calibrate --e2e"):
        resolve(str(tmp_path / "missing.json"), None)
    with pytest.raises(ValueError, match="both right and wrong"):
        AcceptanceModel.fit(grounded, feats, [1.0] * len(grounded))


class Believer:
    """A scorer fooled by world knowledge: every claim looks supported (0.95)."""

    model_dir = None

    def predict(self, pairs):
        return np.full(len(pairs), 0.95, dtype=np.float32)


def test_the_verifier_applies_the_head_and_both_acceptance_gates(tmp_path):
    from tests.support.env import make_settings

    settings = make_settings(tmp_path)
    scorer = Believer()
    scorer.model_dir = tmp_path
    # a head fitted before roles existed names its three features and still applies
    GroundingHead(0.0, (1.0, -8.0, -2.0), features=("logit", "missing", "any_missing")).save(tmp_path)
    grounded, feats, y = _rows()
    AcceptanceModel.fit(grounded, feats, y).save(tmp_path / "acceptance.json")
    v = Verifier(settings, scorer=scorer, threshold=0.9, answer_threshold=0.5).warm_up()
    assert v.head is not None and v.acceptance_model is not None
    right = v.verify("Karl Brenner designed the tower.", [PASSAGE], "Who designed the tower?")
    world = v.verify("Gustave Eiffel designed the tower.", [PASSAGE], "Who designed the tower?")
    assert right.grounded > 0.9 and world.grounded < 0.1 and not world.accepted
    assert right.relevance is not None and right.accepted and right.supported
    assert right.label.startswith("grounded 0.95 · answers the question")
    # grounded, but it does not answer: the relevance gate rejects it
    echo = v.verify("The tower stands 1,063 feet tall.", [PASSAGE], "Who designed the tower?")
    assert echo.grounded > 0.9 and echo.relevance < right.relevance and not echo.accepted
    # no question: grounding alone decides, as before
    alone = v.verify("The tower stands in Paris.", [PASSAGE])
    assert alone.relevance is None and alone.accepted and alone.label == "grounded 0.95"
    off = Verifier(settings, scorer=scorer, threshold=0.9, head=False, acceptance="off").warm_up()
    fooled = off.verify("Gustave Eiffel designed the tower.", [PASSAGE], "Who designed the tower?")
    assert fooled.accepted and fooled.relevance is None  # what the head is there to stop


FILM = ("Beetlejuice is a 1988 American comedy-fantasy film directed by Tim Burton. "
        "It stars Alec Baldwin, Geena Davis, Winona Ryder and Catherine O'Hara. "
        "Danny Elfman composed its score.")


def test_a_name_put_in_another_role_is_displaced_its_own_role_is_not():
    from specrag.grounding.roles import displaced, evidence_sentences, qa_claim

    assert displaced("Beetlejuice is a 1988 comedy film directed by Tim Burton.", FILM) == 0.0
    # every word is in the passage, but O'Hara is named in the cast, not as the film
    role = displaced("Catherine O'Hara is a 1988 comedy film directed by Tim Burton.", FILM)
    assert role >= 0.6
    # a paraphrase keeps the name among its own words: little displacement
    assert displaced("Tim Burton directed the film Beetlejuice.", FILM) < 0.34
    assert displaced("Danny Elfman composed the film's score.", FILM) < 0.5
    assert displaced("Danny Elfman directed the film.", FILM) > 0.5  # composer, not director
    assert displaced("Gustave Eiffel directed it.", FILM) == 1.0  # never named: wholly out
    assert displaced("The film is a comedy.", FILM) == 0.0  # no name, nothing to place
    # question-answer claims are left to the cross-encoder; the reading can be shared
    assert displaced(qa_claim("Who directed Beetlejuice?", "Danny Elfman"), FILM) == 0.0
    read = evidence_sentences(FILM)
    assert displaced("Danny Elfman directed the film.", FILM, sentences=read) == role_of(
        "Danny Elfman directed the film.")


def role_of(claim: str) -> float:
    from specrag.grounding.roles import displaced

    return displaced(claim, FILM)


def test_the_head_weighs_displaced_names_and_checks_bare_answers_with_their_question(tmp_path):
    from tests.support.env import make_settings

    rng = np.random.default_rng(1)
    n = 400
    y = rng.random(n) < 0.5
    ce = rng.uniform(0.6, 1.0, n)  # fooled on every negative: only the role tells them apart
    roles = np.where(y, rng.uniform(0.0, 0.3, n), rng.uniform(0.5, 1.0, n))
    head = GroundingHead.fit(ce, np.zeros(n), y, roles)
    assert head.features[-1] == "displaced" and head.weights[-1] < 0
    assert ((head.apply(ce, np.zeros(n), roles) >= 0.5) == y).mean() > 0.9
    with pytest.raises(ValueError, match="displaced"):
        head.apply(ce, np.zeros(n))
    head.save(tmp_path)
    assert GroundingHead.load(tmp_path) == head

    seen = []

    class Recorder:
        model_dir = None

        def predict(self, pairs):
            seen.extend(h for _, h in pairs)
            return [0.9] * len(pairs)

    v = Verifier(make_settings(tmp_path), scorer=Recorder(), head=False, acceptance="off")
    v.verify("In 1889.", [PASSAGE], "When was the tower completed?")
    v.verify("In 1889.", [PASSAGE])
    v.verify("The tower was completed by Karl Brenner in 1889.", [PASSAGE], "When?")
    assert seen == ['The answer to "When was the tower completed?" is: In 1889.', "In 1889.",
                    "The tower was completed by Karl Brenner in 1889."]


def test_a_span_feature_fitted_to_raise_support_is_dropped():
    rng = np.random.default_rng(2)
    n = 400
    y = rng.random(n) < 0.5
    ce = np.where(y, rng.uniform(0.5, 1.0, n), rng.uniform(0.0, 0.6, n))
    gone = np.where(y, rng.uniform(0.3, 1.0, n), 0.0)  # here missing spans go with support
    roles = np.where(y, 0.0, rng.uniform(0.4, 1.0, n))
    head = GroundingHead.fit(ce, gone, y, roles)
    assert "missing" not in head.features and "any_missing" not in head.features
    assert head.features == ("logit", "displaced") and len(head.weights) == 2
    assert head.weights[0] > 0 and head.weights[1] < 0
