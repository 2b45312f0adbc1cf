"""The conversations of ``bench followups``: SQuAD questions of one article become a
conversation of 4+ turns whose later turns name the subject by a pronoun, and every
other conversation changes topic (no models, no data files)."""

from __future__ import annotations

import pytest

from specrag.bench import conversations as C
from specrag.datasets import Passage, QAItem, passage_file_name

TESLA = ("Nikola Tesla was an inventor. He was born in Smiljan and he studied in Graz. "
         "Later he moved to New York, where he worked for Edison.")
TESLA_2 = "In 1893 he showed his system at the fair. He was paid by Westinghouse."
RHINE = "The Rhine is a river. It flows from the Alps to the North Sea. It is long."


def item(i: int, question: str, pid: str, answer: str = "x") -> QAItem:
    return QAItem(f"q{i}", question, (answer,), pid)


PASSAGES = {p.id: p for p in (Passage("t1", TESLA, "Nikola Tesla"),
                              Passage("t2", TESLA_2, "Nikola Tesla"),
                              Passage("r1", RHINE, "Rhine"))}
ITEMS = [item(0, "Where was Nikola Tesla born?", "t1", "Smiljan"),
         item(1, "Where did Tesla study?", "t1", "Graz"),
         item(2, "Who did Tesla work for in New York?", "t1", "Edison"),
         item(3, "What did Tesla's system show in 1893?", "t2"),
         item(4, "Who paid Tesla?", "t2", "Westinghouse"),
         item(5, "What did Edison invent?", "t1"),  # names no subject: left out
         item(6, "Where does the Rhine flow from?", "r1", "the Alps"),
         item(7, "Where does the Rhine end?", "r1", "the North Sea"),
         item(8, "Is the Rhine long?", "r1"),
         item(9, "What is the Rhine?", "r1")]


def test_one_articles_questions_become_a_conversation_with_pronouns():
    convs = C.build(ITEMS, PASSAGES, seed=0)
    tesla = next(c for c in convs if c.title == "Nikola Tesla")
    asked = [t.question for t in tesla.turns]
    assert len(asked) >= 4 and asked[0] == tesla.turns[0].original  # turn one as SQuAD asks it
    assert "Tesla" in asked[0] and not any("Tesla" in q for q in asked[1:])
    assert {"Where did he study?", "Who did he work for in New York?", "Who paid him?",
            "What did his system show in 1893?"} <= set(asked)
    assert "What did Edison invent?" not in asked  # it could not point back
    by_question = {t.original: t for t in tesla.turns}
    assert by_question["Who paid Tesla?"].gold == passage_file_name("t2")
    assert by_question["Who paid Tesla?"].answers == ("Westinghouse",)
    assert all(not t.topic_change for t in tesla.turns)


def test_every_other_conversation_changes_topic_to_another_articles_first_question():
    convs = C.build(ITEMS, PASSAGES, seed=0)
    assert [c.title for c in convs] == ["Nikola Tesla", "Rhine -> Nikola Tesla"]
    moved = convs[1].turns
    change = next(i for i, t in enumerate(moved) if t.topic_change)
    assert change >= 2 and moved[change].question == "Where was Nikola Tesla born?"
    assert all("Rhine" not in t.question for t in moved[1:])  # it, not the name, after turn one
    assert moved[change + 1].gold.startswith("t") and "he" in moved[change + 1].question.split()


@pytest.mark.parametrize("question,name,kind,expected", [
    ("When did the Rhine flood?", "Rhine", "it", "When did it flood?"),
    ("What was the Rhine's length?", "Rhine", "it", "What was its length?"),
    ("Who met Tesla in 1888?", "Tesla", "he", "Who met him in 1888?"),
    ("When did Apollo 8 launch?", "Apollo", "it", None),  # part of a longer name
    ("Which Apollo program mission landed?", "Apollo program", "it", None),  # after "which"
    ("What funded the Apollo program?", "Apollo program", "it", "What funded that program?"),
])
def test_a_name_becomes_a_pronoun_only_where_it_stands_whole(question, name, kind, expected):
    passage = "The Apollo program flew crews. The program ended in 1972."
    assert C.follow_up(question, name, passage, kind, name) == expected


def test_conversations_are_written_once_and_read_back_the_same(tmp_path):
    path = tmp_path / "conversations.jsonl"
    made = C.build(ITEMS, PASSAGES, seed=0)
    assert C.load_or_build(path, lambda: made) == made
    assert C.load_or_build(path, lambda: pytest.fail("built again")) == made
