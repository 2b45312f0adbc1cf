"""The shipped int8 cross-encoders load offline and behave; HF folders load through the same interface."""

import numpy as np
import pytest

from specrag.grounding.crossencoder import CrossEncoder
from specrag.sources import BUILTIN_DIR

pytestmark = pytest.mark.slow

SUPPORTED = [
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
     "The Eiffel Tower was completed in 1889."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
     "Marie Curie won a Nobel Prize in Chemistry."),
    ("The Amazon river flows through Brazil, Peru and Colombia before reaching the Atlantic.",
     "The Amazon flows through Peru."),
    ("Employees receive 25 days of paid vacation per year, plus public holidays.",
     "Employees get 25 days of paid vacation a year."),
]
UNSUPPORTED = [
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
     "The Eiffel Tower was completed in 1925."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
     "Marie Curie never won a Nobel Prize."),
    ("The Amazon river flows through Brazil, Peru and Colombia before reaching the Atlantic.",
     "The Amazon flows into the Pacific Ocean."),
    ("Employees receive 25 days of paid vacation per year, plus public holidays.",
     "The company headquarters are located in Berlin."),
]


@pytest.mark.parametrize("role", ["verifier", "reranker"])
def test_shipped_models_are_small_int8_with_tokenizer(role):
    folder = BUILTIN_DIR / role
    assert (folder / "model-int8.onnx").stat().st_size < 30e6
    for name in ("tokenizer.json", "specrag.json", "README.md"):
        assert (folder / name).exists()


def test_shipped_verifier_separates_supported_from_unsupported(settings):
    ce = CrossEncoder(settings, "verifier").warm_up()
    assert ce.backend == "onnx-int8" and ce.model_dir == BUILTIN_DIR / "verifier"
    pos, neg = ce.predict(SUPPORTED), ce.predict(UNSUPPORTED)
    assert ((0 <= pos) & (pos <= 1)).all()
    # every pair on the right side of 0.5 (shipped model: 0.89-0.97 vs 0.01-0.38)
    assert (pos > 0.8).all() and (neg < 0.5).all(), (pos, neg)
    assert pos.mean() - neg.mean() > 0.6, (pos, neg)


def test_shipped_verifier_verdict_end_to_end(settings):
    from specrag.grounding.verifier import Verifier

    chunks = [p for p, _ in SUPPORTED] + ["Unrelated text about cooking pasta in salted water."]
    v = Verifier(settings.with_values(**{"verify.threshold": 0.5}))
    good = v.verify("The Eiffel Tower was completed in 1889 [1]. Employees get 25 days of paid "
                    "vacation a year [4].", chunks)
    bad = v.verify("The Eiffel Tower was completed in 1889 [1]. Marie Curie never won a Nobel "
                   "Prize [2].", chunks)
    assert good.score > bad.score and good.accepted and not bad.accepted
    assert [s.best_chunk for s in good.sentences] == [0, 3]


def test_shipped_reranker_puts_the_relevant_passage_first(settings):
    docs = ["The Eiffel Tower is a wrought-iron tower in Paris completed in 1889.",
            "Paris is the capital of France and its largest city.",
            "The Statue of Liberty was a gift from France to the United States."]
    ranked = CrossEncoder(settings, "reranker").rank("When was the Eiffel Tower finished?", docs,
                                                     top_k=2, return_documents=True)
    assert [r["corpus_id"] for r in ranked][:1] == [0] and len(ranked) == 2
    assert ranked[0]["text"] == docs[0] and ranked[0]["score"] >= ranked[1]["score"]


def test_local_hf_folder_loads_through_the_same_interface(settings, tmp_path):
    """A sentence-transformers/HF CrossEncoder folder (what a Hub id resolves to)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from specrag import sources

    base = sources.resolve("embedder", settings)
    AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(tmp_path)
    ce = CrossEncoder(settings, "reranker", model=str(tmp_path)).warm_up()
    assert ce.backend == "torch"
    # as the verifier: nothing is quantised in torch, so pairs run batched, not one by one
    as_verifier = CrossEncoder(settings, "verifier", model=str(tmp_path)).warm_up()
    assert (as_verifier.batch_size, as_verifier.cache_size) == (32, 0)
    with pytest.raises(ValueError, match="at least 1"):
        CrossEncoder(settings.with_values(**{"verify.batch_size": 0}), "verifier")
    scores = ce.predict([("a query", "a passage"), ("another", "text")])
    assert scores.shape == (2,) and np.all((scores >= 0) & (scores <= 1))
    ranked = ce.rank("a query", ["x", "y", "z"], top_k=2)
    assert len(ranked) == 2 and ranked[0]["score"] >= ranked[1]["score"]


def test_unknown_builtin_names_the_setting(settings):
    from specrag.types import ModelUnavailable

    s = settings.with_values(**{"models.verifier": "builtin:nope"})
    with pytest.raises(ModelUnavailable, match="models.verifier"):
        CrossEncoder(s, "verifier").warm_up()


def test_cli_verify_pairs_context_and_rerank(tmp_path, capsys, monkeypatch):
    import json

    from specrag.cli.main import main
    from tests.support.env import CACHE

    monkeypatch.setenv("SPECRAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SPECRAG_CACHE_DIR", CACHE)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps({"premise": p, "hypothesis": h})
                               for p, h in SUPPORTED[:1] + UNSUPPORTED[:1]) + "\n")
    assert main(["verify", "--pairs", str(pairs)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and rows[0]["score"] > rows[1]["score"]

    ctx = tmp_path / "ctx.txt"
    ctx.write_text(SUPPORTED[0][0] + "\n\n" + SUPPORTED[3][0] + "\n")
    assert main(["verify", "--context", str(ctx), "--answer",
                 "The Eiffel Tower was completed in 1889 [1].", "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["sentences"][0]["best_chunk"] == 0 and "best_chunk_text" in verdict["sentences"][0]
    # the verify.* settings reach the command's verifier (the one serving builds)
    monkeypatch.setenv("SPECRAG_VERIFY__AGGREGATE", "mean")
    assert main(["verify", "--context", str(ctx), "--answer",
                 "The Eiffel Tower was completed in 1889 [1].", "--threshold", "0.5", "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["aggregate"], verdict["threshold"]) == ("mean", 0.5)

    passages = tmp_path / "p.jsonl"
    passages.write_text("\n".join(json.dumps({"text": t}) for t in
                                  ["Bananas are yellow fruit.", "The Eiffel Tower opened in 1889."]))
    assert main(["rerank", "--query", "When did the Eiffel Tower open?", "--passages",
                 str(passages), "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["corpus_id"] == 1 and first["rank"] == 1


def test_served_verifier_follows_the_passage_not_the_world_nor_another_role(settings):
    """The shipped model with its head and the shipped threshold: a passage that
    contradicts world knowledge, a name of the passage put in another role, and a bare
    answer checked together with its question."""
    from specrag.pipeline.build import build_verifier

    v = build_verifier(settings).warm_up()
    assert v.head is not None and "displaced" in v.head.features
    tower = ("The tower, designed by Karl Brenner and completed in 1889, stands 1,063 feet "
             "tall in Paris. Gustave Eiffel's company supplied the iron.")
    film = ("Beetlejuice is a 1988 American comedy-fantasy film directed by Tim Burton. "
            "It stars Alec Baldwin, Geena Davis, Winona Ryder and Catherine O'Hara.")
    t = settings.verify.threshold

    def grounded(draft, chunk, question=None):
        return v.verify(draft, [chunk], question).grounding

    assert grounded("Karl Brenner designed the tower.", tower) >= t
    assert grounded("Gustave Eiffel designed the tower.", tower) < t  # the world's answer
    assert grounded("Beetlejuice was directed by Tim Burton.", film) >= t
    assert grounded("Catherine O'Hara directed Beetlejuice.", film) < t  # cast, not director
    asked = "When was the tower completed?"
    assert grounded("1889.", tower, asked) >= t > grounded("1887.", tower, asked)


def test_pairs_are_batched_by_length_so_short_ones_are_not_padded_to_long_ones():
    from specrag.grounding.crossencoder import length_batches

    sizes = [120, 50, 59, 98, 65, 106, 91, 96, 99]
    order = np.argsort(sizes, kind="stable")
    batches = length_batches(order, sizes, batch_size=32)
    assert [sorted(sizes[i] for i in b) for b in batches] == [[50, 59, 65], [91, 96, 98, 99, 106, 120]]
    assert sorted(int(i) for b in batches for i in b) == list(range(len(sizes)))  # each once
    assert [len(b) for b in length_batches(order, [10] * 9, batch_size=4)] == [4, 4, 1]


def test_length_batching_leaves_the_scores_as_they_were(settings):
    import specrag.grounding.crossencoder as ce_module

    ce = CrossEncoder(settings, "verifier", batch_size=32).warm_up()  # batched, by length
    pairs = SUPPORTED + UNSUPPORTED + [(p + " " + p + " " + p, h) for p, h in SUPPORTED]
    split = ce.predict(pairs)
    one = ce._onnx_batch(pairs)  # every pair padded to the longest, as before
    assert len(ce_module.length_batches(np.argsort([len(a) + len(b) for a, b in pairs]),
                                        [len(a) + len(b) for a, b in pairs], 32)) > 1
    # dynamic int8 quantisation scales per batch: these pairs move by far less than a step
    assert np.abs(split - one).max() < 0.02


def test_one_pair_per_run_scores_each_pair_whatever_runs_beside_it(settings):
    """int8 activations are quantised per run: with ``verify.batch_size`` 1 a pair scores
    the same alone and among others, so a sentence checked while the draft streams and
    again in the whole draft gets one score."""
    s = settings.with_values(**{"verify.batch_size": 1})
    ce = CrossEncoder(s, "verifier").warm_up()
    assert ce.batch_size == 1 and CrossEncoder(s, "reranker").batch_size == 32
    long = [(p + " " + p + " " + p, h) for p, h in SUPPORTED]
    pairs = SUPPORTED + UNSUPPORTED + long
    together = ce.predict(pairs)
    alone = np.array([ce.predict([p])[0] for p in pairs])
    assert np.array_equal(together, alone)
    assert CrossEncoder(settings.with_values(**{"verify.batch_size": 8}), "verifier").batch_size == 8


def test_pairs_scored_alone_are_remembered_and_forgotten_on_request(settings, monkeypatch):
    ce = CrossEncoder(settings.with_values(**{"verify.batch_size": 1}), "verifier",
                      cache_size=3).warm_up()
    runs = []
    real = ce._onnx_batch
    monkeypatch.setattr(ce, "_onnx_batch", lambda pairs: runs.append(len(pairs)) or real(pairs))
    first = ce.predict(SUPPORTED[:2])
    assert runs == [1, 1]
    again = ce.predict(SUPPORTED[:2] + UNSUPPORTED[:1])  # two remembered, one new
    assert runs == [1, 1, 1] and np.array_equal(again[:2], first)
    ce.predict(UNSUPPORTED[1:2])  # a fourth pair: the oldest is dropped (3 kept)
    assert len(ce._cache) == 3 and SUPPORTED[0] not in ce._cache
    ce.clear_cache()
    ce.predict(SUPPORTED[1:2])
    assert runs[-1] == 1 and len(runs) == 5
    batched = CrossEncoder(settings.with_values(**{"verify.batch_size": 32}), "verifier")
    assert batched.cache_size == 0  # a batched score depends on its batch: never remembered


def test_a_sentence_checked_while_drafting_is_not_scored_again_in_the_verdict(settings,
                                                                             monkeypatch):
    """The early check (one sentence, as ``pipeline.early`` runs it) and the whole draft's
    verdict score the sentence alike; the verdict asks the model only for the new one."""
    from specrag.grounding.verifier import Verifier

    v = Verifier.from_settings(settings).warm_up()  # served: one pair per run, remembered
    ce = v.scorer
    ce.clear_cache()
    runs = []
    real = ce._onnx_batch
    monkeypatch.setattr(ce, "_onnx_batch", lambda pairs: runs.append(len(pairs)) or real(pairs))
    chunks = [p for p, _ in SUPPORTED]
    first = "Construction of the Eiffel Tower finished in 1889."
    early = v.verify(first, chunks)
    assert runs == [1] * v.per_sentence  # one run per (sentence, chunk) pair
    whole = v.verify(first + " Marie Curie received a Nobel Prize for chemistry.", chunks)
    assert runs == [1] * (2 * v.per_sentence)  # the second sentence's pairs only
    assert whole.sentences[0].score == early.sentences[0].score

def test_a_yes_answer_is_judged_as_the_claim_it_makes(settings):
    """ "Yes, ..." used to count as a name missing from the passage: the shipped model gave
    the right draft P(right) 0.21 against 0.47 for the same sentence without "Yes,"."""
    from specrag.grounding.verifier import Verifier

    chunks = ["Employees may work remotely up to two days a week with their manager's "
              "approval. Offices open at 8 am.", "The cafeteria serves lunch from noon."]
    question = "Can employees work from home?"
    v = Verifier(settings)
    yes = v.verify("Yes, employees may work remotely up to two days a week.", chunks, question)
    plain = v.verify("Employees may work remotely up to two days a week.", chunks, question)
    wrong = v.verify("Yes, employees may work remotely every day.", chunks, question)
    assert yes.relevance is not None and yes.signals == pytest.approx(plain.signals, abs=0.05)
    assert yes.score == pytest.approx(plain.score, abs=0.03)
    assert yes.grounded > 0.8 and wrong.grounded < yes.grounded - 0.2
