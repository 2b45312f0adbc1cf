"""The answer checker's draft data: labels, parts that resume, the plan, steered retrieval."""

from __future__ import annotations

import gzip
import json

import pytest

from specrag.datasets import passage_file_name
from specrag.training import checker_label
from specrag.training.checker_data import generate
from specrag.training.checker_parts import Parts
from specrag.training.checker_plan import Planned, corpus, plan
from tests.support.checker import checker_engine, dataset
from tests.support.env import make_settings

# -- labels ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind,draft,gold,right", [
    ("yes-no", "Yes, house tax and property tax are the same [1].", ["yes"], True),
    ("yes-no", "No. They differ [1].", ["yes"], False),
    ("yes-no", "\"Yes\" - it does [2].", ["yes"], True),
    ("number", "The army grew by 17,000 men [1].", ["17000"], True),
    ("number", "There were two passing touchdowns [1].", ["2"], True),
    ("number", "There were 3 passing touchdowns [2].", ["2"], False),  # [2] is a citation
    ("number", "About 54.6% were between 18 and 65 [1].", ["54.6"], True),
    ("answerable", "They were the base of the twelve articles [1].", ["the Twelve Articles"], True),
    ("answerable", "Spain and Italy had fewer [1].", ["Spain | Italy | Netherlands"], False),
    ("answerable", "Spain, Italy and the Netherlands [1].", ["Spain | Italy | Netherlands"], True),
    ("answerable", "The documents do not mention Paris.", ["Paris"], False),  # abstains
    ("counterfactual", "It was designed by Karl Brenner [1].", ["Karl Brenner"], True),
    ("unanswerable", "The documents do not say.", ["1990"], True),
    ("unanswerable", "The documents do not say who built it [1].", ["Kew"], True),
    ("unanswerable", "The documents do not say. It opened in 1990.", ["1990"], False),
    ("unanswerable", "It opened in 1891 [1].", ["1990"], False),  # any stated answer
    ("answerable", "", ["Paris"], False),
])
def test_label_rules(kind, draft, gold, right):
    assert checker_label.label(kind, draft, gold)[0] is right


@pytest.mark.parametrize("question,draft,gold,right,how", [
    # a yes/no question answered by a statement: its polarity, negations of both counted
    ("Does the crew 2 have a story line?", "The crew 2 has a story line [1].", "yes", True,
     "implied yes"),
    ("Does monetary neutrality mean money can never affect real GDP?",
     "Monetary neutrality implies that money does not affect real GDP [1].", "yes", True,
     "implied yes"),
    ("Has Tampa been hit by a hurricane?", "Tampa has never been hit [1].", "yes", False,
     "implied no"),
    ("Has Tampa been hit by a hurricane?", "Tampa wasn't hit [1].", "no", True, "implied no"),
])
def test_yes_no_polarity_of_a_statement(question, draft, gold, right, how):
    assert checker_label.label("yes-no", draft, [gold], question) == (right, how)


@pytest.mark.parametrize("draft,right,how", [
    ("Nelson DeMille wrote it [1].", True, "either-or: names the answer"),  # gold spelt longer
    ("Charles de Lint wrote it [1].", False, "either-or: names the other"),
    ("Nelson DeMille, not Charles de Lint, wrote it [1].", True, "either-or: first named"),
    ("Charles de Lint, not Nelson DeMille, wrote it [1].", False, "either-or: first named"),
])
def test_either_or_questions_need_the_answer_named_first(draft, right, how):
    q = 'Which of the following is a writer whose work includes "Plum Island": Charles de Lint ' \
        'or Nelson DeMille?'
    assert checker_label.label("answerable", draft, ["Nelson Richard DeMille"], q) == (right, how)


def test_label_says_why_and_refuses_unknown_kinds():
    assert checker_label.label("yes-no", "", ["yes"]) == (False, "empty draft")
    assert checker_label.label("unanswerable", "The documents do not say.", ["x"]) == (True, "abstains")
    with pytest.raises(ValueError, match="unknown kind"):
        checker_label.label("maybe", "x", ["x"])
    assert checker_label.kind_of(("1,500", "1500")) == "number"
    assert checker_label.kind_of(("Paris",)) == "answerable"


# -- parts -----------------------------------------------------------------------------

def _row(i: int) -> dict:
    return {"id": f"q{i}", "dataset": "sciq", "kind": "answerable", "right": i % 2 == 0}


def test_parts_roll_over_at_the_size_and_resume(tmp_path):
    parts = Parts(tmp_path, size=3)
    for i in range(7):
        parts.append(_row(i))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["part-0001.jsonl.gz", "part-0002.jsonl.gz", "part-0003.jsonl"]
    with gzip.open(tmp_path / "part-0002.jsonl.gz", "rt") as fh:
        assert [json.loads(x)["id"] for x in fh] == ["q3", "q4", "q5"]
    with open(tmp_path / "part-0003.jsonl", "a") as fh:
        fh.write('{"id": "q7", "datas')  # a kill mid-row
    again = Parts(tmp_path, size=3)
    assert again.done == {f"q{i}" for i in range(7)} and again.count == 1
    with pytest.raises(ValueError, match="already"):
        again.append(_row(6))
    again.append(_row(7))
    again.append(_row(8))  # the open part fills: finished, the next one opens
    assert [p.name for p in again.finished()][-1] == "part-0003.jsonl.gz"
    m = again.manifest({"draft_model": "m"})
    assert m["rows"] == 9 and m["counts"]["right"] == {"right": 5, "wrong": 4}
    assert m["counts"]["dataset/kind"]["sciq/answerable"] == {"right": 5, "wrong": 4}
    assert json.loads((tmp_path / "manifest.json").read_text())["draft_model"] == "m"


def test_same_rows_give_the_same_part_bytes(tmp_path):
    for d in ("a", "b"):
        parts = Parts(tmp_path / d, size=2)
        parts.append(_row(0))
        parts.append(_row(1))
    assert (tmp_path / "a/part-0001.jsonl.gz").read_bytes() == \
        (tmp_path / "b/part-0001.jsonl.gz").read_bytes()


# -- the plan --------------------------------------------------------------------------

_NAMES = [f"{a}{b}" for a in ("Ada", "Bram", "Cleo", "Dov", "Esme") for b in
          ("lin", "ton", "ric", "vel", "mund", "sky", "dor", "wen")]


def _sets():
    halu = dataset("halueval-qa", [
        (f"halueval-qa-{i}", f"Who founded company number {i}?", [f"{_NAMES[i]} Morlan{i}"],
         f"Company number {i} was founded by {_NAMES[i]} Morlan{i} in {1900 + i}.")
        for i in range(40)] + [("halueval-qa-99", "Are both cities in France?", ["yes"],
                                "Lyon and Paris are both in France.")])
    boolq = dataset("boolq", [(f"boolq-{i}", f"Is item {i} blue?", ["yes" if i % 2 else "no"],
                               f"Item {i} is {'blue' if i % 2 else 'red'}.") for i in range(20)])
    return {"halueval-qa": halu, "boolq": boolq}


def test_plan_leaves_out_every_bench_item_and_passage():
    sets = _sets()
    halu = sets["halueval-qa"].items
    bench_ids = {halu[0].id, halu[1].id}
    bench_pids = {halu[2].gold_passage_id}
    planned = plan(sets, bench_ids, bench_pids, n=60, seed=0)
    assert planned
    assert not {p.base_id for p in planned} & (bench_ids | {halu[2].id})
    assert not {p.passage_id for p in planned} & bench_pids
    files = {name for name, _ in corpus(sets, bench_pids)["halueval-qa"]}
    assert passage_file_name(halu[2].gold_passage_id) not in files
    assert passage_file_name(halu[0].gold_passage_id) in files  # asked nowhere, still a passage


def test_plan_kinds_are_disjoint_per_question_and_spread():
    planned = plan(_sets(), set(), set(), n=60, seed=0)
    ids = [p.id for p in planned]
    assert len(ids) == len(set(ids))
    by_base = {}
    for p in planned:
        by_base.setdefault((p.dataset, p.base_id), []).append(p.kind)
    assert all(len(k) == 1 for k in by_base.values())
    kinds = {p.kind for p in planned}
    assert {"counterfactual", "unanswerable", "yes-no", "answerable"} <= kinds
    for p in planned:
        if p.kind == "counterfactual":
            assert p.gold == (p.swap[1],) and p.swap[0] != p.swap[1]
        if p.kind == "unanswerable" and p.dataset != "boolq":
            assert p.gold[0].lower() not in ("yes", "no")  # no span to hide
    assert {p.dataset for p in planned[:10]} == {"halueval-qa", "boolq"}  # spread, not blocks
    assert [Planned.from_dict(p.to_dict()) for p in planned] == planned


# -- drafts through the served engine, steered -------------------------------------------

def test_generation_resumes_and_steers_retrieval(tmp_path):
    sets = _sets()
    halu = {it.id: it for it in sets["halueval-qa"].items}
    s = make_settings(tmp_path, **{"retrieval.draft_pool": 0, "verify.early_reject": False})
    passages = sets["halueval-qa"].passages
    planned = plan({"halueval-qa": sets["halueval-qa"]}, set(), set(), n=30, seed=0)
    cf = next(p for p in planned if p.kind == "counterfactual")
    un = next(p for p in planned if p.kind == "unanswerable")
    old, new = cf.swap
    script = [(cf.question.lower(), f"It was founded by {new} [1]."),
              (un.question.lower(), "The documents do not say.")]
    engine, steered, draft = checker_engine(s, passages, script)
    items = [cf, un] + [p for p in planned if p.kind not in ("counterfactual", "unanswerable")][:3]
    parts = Parts(tmp_path / "out", size=2)
    generate(engine, steered, items[:3], parts, {"draft_model": "fake"}, {}, log=lambda _: None)
    assert len(draft.calls) == 3
    m = generate(engine, steered, items, Parts(tmp_path / "out", size=2), {"draft_model": "fake"},
                 {}, log=lambda _: None)
    assert len(draft.calls) == 5 and m["rows"] == 4 and m["open_part"]["rows"] == 1
    rows = {r["id"]: r for r in Parts(tmp_path / "out", size=2).rows(finished_only=False)}
    assert set(rows) == {p.id for p in items}
    r = rows[cf.id]  # the passage and every chunk say the swapped value, and so does the draft
    assert r["gold_in_draft"] and r["right"] and r["label_how"] == "contains"
    assert all(old not in t for t in r["chunk_texts"].values())
    assert any(new in t for t in r["chunk_texts"].values())
    assert r["verdict"]["grounded"] is not None and r["draft_model"] == "fake"
    r = rows[un.id]  # its passage and any chunk holding the gold were never shown
    gold_source = passage_file_name(halu[un.base_id].gold_passage_id)
    assert not r["gold_in_draft"] and not r["gold_in_verify"]
    assert all(c["source"] != gold_source for c in r["verify_chunks"])
    assert all(un.gold[0] not in t for t in r["chunk_texts"].values())
    assert r["right"] and r["kind"] == "unanswerable"
    assert steered.steer is None  # nothing steers the next question


def test_cli_needs_an_out_folder(tmp_path, capsys):
    from specrag.cli.main import main

    assert main(["--data-dir", str(tmp_path), "train", "checker-data", "--n", "5"]) == 2
    assert "needs --out" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "train", "checker-data", "--out", str(tmp_path),
                 "--threads", "0"]) == 2
    assert not list(tmp_path.glob("part-*"))  # refused before anything was written


@pytest.mark.slow
def test_the_pinned_sets_load_with_their_gold(tmp_path):
    from specrag.training.checker_sources import SEP, load_all

    sets = load_all(make_settings(tmp_path), ("sciq", "boolq", "drop"))
    assert [len(sets[n].items) for n in ("sciq", "boolq", "drop")] == [887, 3270, 1000]
    assert len(sets["drop"].passages) == 405
    assert {it.answers for it in sets["boolq"].items} == {("yes",), ("no",)}
    assert all(it.question.endswith("?") for it in sets["boolq"].items)
    assert any(SEP in a for it in sets["drop"].items for a in it.answers)  # multi-span
    texts = {p.id: p.text for p in sets["sciq"].passages}
    assert all(texts[it.gold_passage_id] for it in sets["sciq"].items)


def test_what_other_kinds_took_does_not_order_the_answerable_questions():
    # names can be swapped or hidden, yes/no answers cannot: the counterfactual and
    # unanswerable questions take names only, which must not leave the front of the
    # answerable questions to yes/no ones (a run stopped early would hold mostly those)
    rows = [(f"halueval-qa-{i}", f"Who founded company number {i}?", [f"{_NAMES[i % 40]} Morlan{i}"],
             f"Company number {i} was founded by {_NAMES[i % 40]} Morlan{i}.") for i in range(60)]
    rows += [(f"halueval-qa-{100 + i}", f"Is company number {i} old?", ["yes" if i % 2 else "no"],
              f"Company number {i} is {'old' if i % 2 else 'new'}.") for i in range(20)]
    planned = plan({"halueval-qa": dataset("halueval-qa", rows)}, set(), set(), n=100, seed=0)
    answered = [p.kind for p in planned if p.kind in ("answerable", "yes-no")]
    front = answered[:10]
    assert answered.count("yes-no") == 20 and front.count("yes-no") / len(front) <= 0.6, front


@pytest.mark.parametrize("backend", ["llama-server", "transformers"])
def test_rows_name_the_local_draft_model_file(tmp_path, backend):
    from specrag.training.checker_data import draft_model

    s = make_settings(tmp_path, **{"generation.draft": backend,
                                   "models.draft": str(tmp_path / "tiny-draft.gguf")})
    (tmp_path / "tiny-draft.gguf").write_bytes(b"GGUF")
    assert draft_model(s) == f"{backend}:tiny-draft.gguf+none"
    remote = s.with_values(**{"generation.draft": "openai:qwen"})
    assert draft_model(remote) == "openai:qwen"
