"""Coarse kinds of name answers, so a counterfactual swap puts a river for a river.

``typed_candidates(answers, embedder)`` maps each name answer (a person, a country, a
company, a work's title...) to other answers of the same kind, the most alike first.
A kind is the nearest of ``KINDS``' centroids (the mean embedding of eight example
names each) to the answer's own embedding; within a kind, candidates are ranked by
cosine similarity to the answer, and near-copies (>= ``SAME``, or one containing the
other) are left out, so a swap cannot keep the old value under another spelling.

Why: the first swaps drew from every answer to a question with the same wh-word, so
"What is the longest river in Germany?" got "Washington and Thomas Gage" and "Of what
nationality was Martin Luther?" got "Tancred". A model that balks at such a passage
says nothing about whether it follows the documents against what it knows. Kinds by
the embedder are coarse (about seven in ten right on SQuAD's answers, by reading them),
but a same-kind, similar value is what "another entity of the same type" asks for:
on the slice's 49 questions about two in three swaps now read as the same kind of
thing (a stadium for a stadium, a nationality for a nationality), against about
half before. Tried and left out: drawing candidates from HaluEval-QA's 5,000 names as
well (closer in spelling, not in kind: "Julia Butterfly Hill" found "Sandy Hill").

Scores are rounded to two decimals and ties broken by the text, so the same answers give
the same candidates on CPUs whose float sums differ in the last bits.

Deliberately not here: the swap itself (``swaps``), years, numbers and months (shifted
there, not drawn from a pool), and a named-entity model (none ships offline).
"""

from __future__ import annotations

import numpy as np

from specrag.datasets.swaps import answer_type

KINDS: dict[str, tuple[str, ...]] = {
    "person": ("Albert Einstein", "Queen Victoria", "John Smith", "Marie Curie", "Pope Gregory",
               "Barack Obama", "Mozart", "Napoleon Bonaparte"),
    "country or region": ("France", "Japan", "Brazil", "Scandinavia", "the Middle East", "Egypt",
                          "Canada", "Siberia"),
    "city or town": ("Paris", "Chicago", "Manchester", "Hamburg", "Kyoto", "Lyon", "Boston",
                     "Vienna"),
    "river, lake or mountain": ("the Danube", "Lake Geneva", "the Alps", "the Nile",
                                "Mount Everest", "the Thames", "Lake Victoria", "the Andes"),
    "organisation or company": ("General Motors", "the United Nations", "Microsoft", "the BBC",
                                "Harvard University", "the Red Cross", "NASA", "Siemens"),
    "people or nationality": ("the French", "Christians", "Germans", "the Mongols", "Buddhists",
                              "Italians", "Catholics", "the Romans"),
    "title of a work": ("Hamlet", "The Godfather", "Star Trek", "Abbey Road", "The Simpsons",
                        "War and Peace", "Friends", "Thriller"),
    "building or venue": ("Wembley Stadium", "the Louvre", "Madison Square Garden",
                          "the Eiffel Tower", "Yankee Stadium", "St Paul's Cathedral",
                          "the Kremlin", "Carnegie Hall"),
    "sports team": ("the Chicago Bulls", "Manchester United", "the New York Yankees",
                    "the Green Bay Packers", "Real Madrid", "the Lakers", "the Boston Celtics",
                    "Arsenal"),
    "disease, organism or substance": ("malaria", "E. coli", "influenza", "penicillin", "oxygen",
                                       "tuberculosis", "bacteria", "insulin"),
    "event or era": ("World War II", "the Renaissance", "the Cold War", "the French Revolution",
                     "the Olympics", "the Middle Ages", "Super Bowl 50", "the Great Depression"),
}
SAME = 0.9  # this alike (cosine) is the same value spelt otherwise, not another one


def _unit(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def kinds(vectors: np.ndarray, embedder) -> list[str]:
    """The kind of each embedded answer: the nearest ``KINDS`` centroid."""
    names = list(KINDS)
    centroids = np.stack([_unit(_unit(embedder.encode_documents(list(KINDS[k]))).mean(0))
                          for k in names])
    scores = np.round(_unit(vectors) @ centroids.T, 2)
    return [names[int(i)] for i in np.argmax(scores, axis=1)]


def typed_candidates(answers: list[str], embedder) -> dict[str, list[str]]:
    """answer -> the other answers of its kind, most alike first (near-copies left out)."""
    names = sorted(set(answers))
    if not names:
        return {}
    vec = _unit(embedder.encode_documents(names))
    kind = kinds(vec, embedder)
    sim = np.round(vec @ vec.T, 2)
    out: dict[str, list[str]] = {}
    for i, a in enumerate(names):
        low = a.lower()
        same = [j for j in range(len(names)) if j != i and kind[j] == kind[i] and sim[i, j] < SAME
                and low not in names[j].lower() and names[j].lower() not in low]
        out[a] = [names[j] for j in sorted(same, key=lambda j: (-sim[i, j], names[j]))]
    return out


def for_items(items, embedder) -> dict[str, list[str]]:
    """``typed_candidates`` for the name answers of (passage id, text, question, answer)
    items, the shape ``swaps.answer_pools`` reads."""
    return typed_candidates([a for _, _, q, a in items
                             if (kind := answer_type(q, a)) and kind.startswith(("person", "name"))],
                            embedder)
