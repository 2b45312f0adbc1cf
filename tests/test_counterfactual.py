"""The hard verifier sets are built by code from passages: swaps, paraphrases, near misses."""

import random

from specrag.training import counterfactual as cf
from specrag.training.data import Pair, split_of

P1 = ("The Lyon Tower is a lattice tower in Lyon. It was designed by Karl Brenner and "
      "completed in 1889. All of the rivets were made in Lyon.")
P2 = ("The Ostwald Bridge crosses the Rhine at Basel. It opened in 1921 after a design by "
      "Maria Ostwald. Maria Ostwald also designed the station at Olten.")
ITEMS = [("p1", P1, "Who designed the Lyon Tower?", "Karl Brenner"),
         ("p1", P1, "When was the Lyon Tower completed?", "1889"),
         ("p2", P2, "Who designed the Ostwald Bridge?", "Maria Ostwald"),
         ("p2", P2, "When did the Ostwald Bridge open?", "1921")]


def test_answer_types():
    assert cf.answer_type("When?", "1889") == "year"
    assert cf.answer_type("How many?", "1,200") == "number"
    assert cf.answer_type("Who designed it?", "Karl Brenner") == "person"
    assert cf.answer_type("Where is it?", "Lyon") == "name:where"
    assert cf.answer_type("What colour?", "dark red paint") is None


def test_counterfactual_swaps_the_answer_everywhere_and_labels_both_claims():
    pairs = cf.counterfactual(ITEMS, seed=1)
    person = [p for p in pairs if p.kind == "qa-person" and "Lyon Tower" in p.hypothesis]
    assert {p.label for p in person} == {0.0, 1.0}
    sup = next(p for p in person if p.label == 1.0)
    neg = next(p for p in person if p.label == 0.0)
    assert "Maria Ostwald" in sup.hypothesis and "Maria Ostwald" in sup.premise
    assert "Karl Brenner" in neg.hypothesis and "Karl Brenner" not in neg.premise
    years = [p for p in pairs if p.kind == "sentence-year" and "Lyon" in p.premise]
    new_year = next(p for p in years if p.label == 1.0)
    assert "1889" not in new_year.premise and "1889" not in new_year.hypothesis
    assert all(p.split == split_of(pid) for pid in ("p1",) for p in pairs if "Lyon" in p.premise)
    # a partial swap would leave the world's answer half in the passage: no pair then
    partial = [("p3", 'John "Joe" Orton (1933-1967) was a playwright. Joe Orton wrote Loot.',
                "Who wrote Loot?", "Joe Orton")]
    assert cf.counterfactual(partial + ITEMS, seed=1)[0].premise != partial[0][1]
    assert not [p for p in cf.counterfactual(partial + ITEMS, seed=1) if "Loot" in p.premise]
    assert cf.gone("Joe Orton", 'John "Joe" Smith') is False and cf.gone("1,889", "in 1889") is False


def test_counterfactual_vitaminc_changes_the_shared_span():
    vitc = [Pair("Thrift Shop: it has over 436 million views on YouTube.",
                 "Thrift Shop had over 436 million views.", 1.0, "vitaminc", "test"),
            Pair("Blank Space: a 2014 song.", "Blank Space is a song.", 1.0, "vitaminc", "test"),
            Pair("Blank Space: a 2014 song.", "Blank Space is a poem.", 0.0, "vitaminc", "test")]
    for seed in range(6):
        out = [p for p in cf.counterfactual_vitc(vitc, seed=seed) if "views" in p.hypothesis]
        assert [p.label for p in out] == [1.0, 0.0]
        changed, world = out
        assert changed.premise == world.premise != vitc[0].premise
        assert world.hypothesis == vitc[0].hypothesis  # the world's value, now unsupported
        assert ("436" not in changed.premise) or ("Thrift Shop" not in changed.premise)


def test_near_misses_change_one_thing():
    rng = random.Random(0)
    kinds = set()
    for seed in range(40):
        rng = random.Random(seed)
        out = cf.near_miss("It was designed by Karl Brenner and completed in 1889.", P1 + " " + P2, rng)
        assert out and out[0] != "It was designed by Karl Brenner and completed in 1889."
        kinds.add(out[1])
    assert {"year", "name-in-passage", "negation"} <= kinds
    # another name of the passage, never a part of the sentence's own name
    for seed in range(20):
        miss = cf.near_miss("Karl Brenner designed it.", "Karl Brenner and Brenner Tower.",
                            random.Random(seed))
        assert miss is None or "Brenner Tower" not in miss[0]
    assert cf.near_miss("all of the rivets came from Lyon", "", rng)[1] == "quantifier"


def test_paraphrases_reword_without_changing_the_facts():
    para = cf.paraphrase("In 1889, the tower (a lattice) was built by Karl Brenner.")
    assert para in ("The tower was constructed by Karl Brenner in 1889.",
                    "The tower was built by Karl Brenner in 1889.")  # synonyms are drawn
    assert cf.paraphrase("Plain words here.", "Who?", "Karl") == 'The answer to "Who?" is: Karl.'
    assert cf.paraphrase("Plain words here.") is None


def test_noisy_chunks_hold_the_passage_a_heading_a_list_and_a_table():
    chunk = cf.noisy_chunk(P1, "Brenner Tower", P2, random.Random(0))
    assert chunk.startswith("## Brenner Tower") and P1 in chunk
    assert "| Item | Value |" in chunk and "- The Ostwald Bridge" in chunk
    pairs = cf.noisy_set(ITEMS, seed=0)
    assert {p.label for p in pairs} == {0.0, 1.0} and all("## " in p.premise for p in pairs)


def test_answer_kinds_put_a_river_for_a_river(embedder):
    """Same-kind candidates with the real embedder, none of them the old value respelt."""
    import random

    from specrag.training.answer_kinds import typed_candidates
    from specrag.training.swaps import LIKE_TOP, swap_answer

    rivers = ["Elbe", "Volga", "Mississippi", "The Elbe River"]
    people, firms = ["Isaac Newton", "Charles Dickens", "Jane Austen"], ["Toyota", "Nokia", "IBM"]
    like = typed_candidates(rivers + people + firms, embedder)
    assert like["Volga"][0] in rivers
    assert like["Isaac Newton"][:2] and set(like["Isaac Newton"][:2]) <= set(people)
    assert not set(like["Toyota"][:2]) & set(people + rivers)
    assert not any("Elbe" in c for c in like["Elbe"])  # a near-copy is no swap
    text = "The Volga is the longest river in Europe. The Volga flows into the Caspian Sea."
    for seed in range(5):
        passage, new = swap_answer(text, "What is the longest river in Europe?", "Volga", {},
                                   random.Random(seed), like)
        assert new in like["Volga"][:LIKE_TOP] and "Volga" not in passage and passage.count(new) == 2
