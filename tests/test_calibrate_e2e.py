"""Calibration on end-to-end rows (accepted draft right?), with a word-overlap scorer."""

import json

import numpy as np
import pytest

from specrag.grounding.verifier import Verifier
from specrag.training.calibrate_e2e import calibrate_e2e, choose, label, split_of
from specrag.types import SpecragError
from tests.support.env import make_settings
from tests.support.fakes import WordScorer


def _run(tmp_path, n=80):
    rows = []
    for i in range(n):
        name, year = f"Bridge{i}", str(1900 + i)
        chunk = f"The {name} crosses the river at Basel. The {name} opened in {year}."
        kind = i % 3
        draft = {0: f"The {name} opened in {year}.",  # right and grounded
                 1: f"The {name} crosses the river at Basel.",  # grounded, does not answer
                 2: f"The {name} opened in {int(year) + 7}."}[kind]  # a wrong year
        rows.append({"id": f"q{i}", "policy": "draft-only", "question": f"When did the {name} open?",
                     "answers": [year], "draft": draft, "gold_retrieved": True,
                     "verify_chunks": [chunk, "Unrelated text about trains."]})
    run = tmp_path / "run"
    run.mkdir()
    (run / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return run


def test_labels_and_splits_are_stable():
    assert label({"draft": "It opened in 1921.", "answers": ["1921"], "gold_retrieved": True}) == 1.0
    assert label({"draft": "It opened in 1921.", "answers": ["1921"], "gold_retrieved": False}) == 0.0
    assert label({"draft": "It opened late.", "answers": ["1921"]}) == 0.0
    assert split_of("run/q1") == split_of("run/q1") and {split_of(f"r/{i}") for i in range(20)} == {"dev", "test"}


def test_choose_takes_the_pair_that_accepts_most_at_the_target():
    g = np.array([0.9, 0.95, 0.99, 0.92, 0.3, 0.97])
    p = np.array([0.9, 0.8, 0.2, 0.7, 0.9, 0.3])
    y = np.array([1, 1, 0, 1, 0, 0])
    r = choose(g, p, y, 1.0, min_accepted=2)
    assert r["target_met"] and r["accepted"] == 3 and r["precision"] == 1.0
    assert r["threshold"] > 0.3 and 0.3 < r["answer_threshold"] <= 0.7
    fixed = choose(g, p, y, 1.0, min_accepted=2, grounding=0.95)  # the pair-calibrated gate kept
    assert fixed["threshold"] == 0.95 and fixed["accepted"] == 2 and fixed["precision"] == 0.5
    assert not fixed["target_met"]


def test_calibrate_e2e_fits_relevance_and_beats_grounding_alone(tmp_path):
    settings = make_settings(tmp_path, **{"verify.acceptance": "off"})
    verifier = Verifier(settings, scorer=WordScorer(), acceptance="off")
    r = calibrate_e2e([_run(tmp_path)], settings, 0.9, verifier=verifier)
    test = r["per_split"]["test"]
    # a grounded sentence that does not answer "when" is what grounding alone lets through
    assert r["target_met"] and test["precision"] >= 0.9 and test["acceptance"] > 0.2
    assert r["grounding_only"]["test"]["precision"] < test["precision"]
    assert r["model"].relevance_weights[0] > 0  # asked for a year, states one: more likely right


def test_rows_without_chunks_need_the_runs_store(tmp_path):
    run = _run(tmp_path, n=4)
    rows = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines()]
    (run / "rows.jsonl").write_text("\n".join(json.dumps({**r, "verify_chunks": None}) for r in rows))
    with pytest.raises(SpecragError, match="store"):
        calibrate_e2e([run], make_settings(tmp_path), verifier=Verifier(make_settings(tmp_path),
                                                                        scorer=WordScorer()))
