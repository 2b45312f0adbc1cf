"""Do follow-ups find their passages? Second-turn retrieval recall with and without the
rewrite, and the time the rewrite adds.

Two sets of two-turn conversations. ``HANDBOOK``: follow-ups written for the sample
handbook (``assets/handbook``), each with the file that answers it. HaluEval-QA: each
multi-hop question is split in two by code: turn one asks about the entity the question
names ("Tell me about Arthur's Magazine."), turn two is the question with that entity
replaced by "it", so it means nothing without the first turn. For every second turn the
broad set (``retrieval.top_k``) is searched for: the follow-up as asked, the draft
model's rewrite (``chat.rewrite: model``), the previous question followed by the
follow-up (``chat.rewrite: previous``), the follow-up with the conversation's names and
words (``chat.rewrite: turns``, the default) and the original question (the ceiling).
Conversations of 4+ turns are ``bench.multiturn`` (``bench followups`` without
``--two-turn``). The rewrite's time is the model's. Recall@1/3/10: the gold file among
the top k.

Deliberately not here: answer quality (``bench e2e``); the rewrite's text is recorded
in the rows for a reader to judge.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from pathlib import Path

from specrag.bench.e2e import load_questions
from specrag.datasets import load_dataset
from specrag.ingest.ingestor import Ingestor
from specrag.ingest.sample import SAMPLE_DIR
from specrag.pipeline import conversation, followup
from specrag.pipeline.build import build_engine
from specrag.retrieval.retriever import Retriever
from specrag.settings import Settings

HANDBOOK = [
    ("How long must passwords be?", "And how often do they have to be changed?", "security.html"),
    ("How many days of annual leave do employees get?", "Can they carry any of it over?",
     "leave.md"),
    ("What is the on-call allowance?", "And what happens if a page comes at night?", "oncall.md"),
    ("Who approves expense claims?", "What is the deadline for submitting them?", "expenses.md"),
    ("Can I work from another country?", "For how long at most?", "remote-work.txt"),
    ("How long is parental leave?", "Is it paid in full?", "leave.md"),
    ("What pension does the company offer?", "How much does it contribute?", "benefits.md"),
    ("How do I report a phishing email?", "How quickly must I do that?", "security.html"),
    ("What is the hotel limit per night?", "What about flights, which class may I book?",
     "expenses.md"),
    ("How fast must the on-call engineer acknowledge a page?", "Who takes over at the handover?",
     "oncall.md"),
    ("Do new employees get security training?", "And how often is it repeated?", "security.html"),
    ("Is there a home office allowance?", "How much is it?", "expenses.md"),
]
_SPAN = re.compile(r"(?<![\w'])((?:[A-Z][\w'.-]*|of|the|and|de|van|von)(?:\s+(?:[A-Z][\w'.-]*|of|"
                   r"the|and|de|van|von))*)")
_JOINERS = ("of", "the", "and", "de", "van", "von")
_KS = (1, 3, 10)
TURNS = "follow-up + the conversation's names and words (chat.rewrite: turns)"


def split_question(question: str, passage: str) -> tuple[str, str] | None:
    """(turn one, turn two) for a question naming an entity its passage names, else None."""
    spans = set()
    for m in _SPAN.finditer(question):
        words = m.group(1).split()
        while words and words[0] in _JOINERS:  # "of Ed Wood": the entity is "Ed Wood"
            words.pop(0)
        while words and words[-1] in _JOINERS:
            words.pop()
        if words and (m.start() > 0 or len(words) > 1):
            spans.update(" ".join(words).split(" and "))  # two entities joined by "and"
    for span in sorted(spans, key=len, reverse=True):
        if len(span) < 4 or span not in passage:
            continue
        second = question.replace(span, "it", 1)
        if second != question:
            return f"Tell me about {span}.", second
    return None


def _rank(hits, gold: str) -> int | None:
    return next((i for i, h in enumerate(hits, 1) if h.chunk.source == gold), None)


def _recall(ranks: list[int | None]) -> dict:
    n = max(len(ranks), 1)
    return {f"recall@{k}": sum(r is not None and r <= k for r in ranks) / n for k in _KS}


async def _measure(engine, pairs, collection: str) -> dict:
    s = engine.settings
    ranks = {"as asked": [], "rewrite by the draft model": [],
             "previous question + follow-up": [], TURNS: [], "original question": []}
    rows, ms, bypassed = [], [], 0
    for first, second, gold, original in pairs:
        history = [{"role": "user", "content": first}]
        rw = await followup.rewrite(engine.tier("draft"), second, history, method="model",
                                    turns=s.chat.history_turns,
                                    max_tokens=s.chat.rewrite_max_tokens)
        ms.append(rw.ms)
        bypassed += rw.method == "alone"
        queries = {"as asked": second, "rewrite by the draft model": rw.standalone,
                   "previous question + follow-up": f"{first} {second}",
                   TURNS: conversation.query(second, history, s.security.max_question_chars),
                   "original question": original or second}
        row = {"first": first, "second": second, "gold": gold, "rewrite": rw.standalone,
               "method": rw.method}
        for name, query in queries.items():
            hits = (await asyncio.to_thread(engine.retriever.retrieve, query, s.retrieval.top_k,
                                            collection)).hits
            ranks[name].append(_rank(hits, gold))
            row[name] = ranks[name][-1]
        rows.append(row)
    served = served_ranks(rows, history_of=lambda r: [{"role": "user", "content": r["first"]}])
    return {"n": len(pairs), "recall": {**{k: _recall(v) for k, v in ranks.items()},
                                        "chat.rewrite: previous as served":
                                            _recall(served)},
            "rewrite_ms_p50": statistics.median(ms) if ms else 0.0,
            "rewrite_ms_max": max(ms) if ms else 0.0, "bypassed": bypassed, "rows": rows}


def served_ranks(rows: list[dict], history_of) -> list[int | None]:
    """What ``chat.rewrite: previous`` serves: the previous question + follow-up, unless
    the follow-up stands alone by ``followup.stands_alone`` (then as asked)."""
    return [r["as asked"] if followup.stands_alone(r["second"], history_of(r))
            else r["previous question + follow-up"] for r in rows]


def run(settings: Settings, n: int = 40, seed: int = 0, out_dir: str | None = None) -> dict:
    out = Path(out_dir or settings.data_path / "bench" / "followups")
    s = settings.with_values(data_dir=str(out / "data"), cache_dir=str(settings.cache_path))
    ingestor = Ingestor(s)
    ingestor.ingest([SAMPLE_DIR], "handbook")
    questions, files = load_questions(settings, "halueval-qa", n * 2, seed, None)
    ingestor.ingest_bytes(files, "halueval")
    passages = {p.id: p.text for p in load_dataset("halueval-qa", settings, n=n * 2,
                                                   seed=seed).passages}
    pairs = []
    for q in questions:
        pid = q.gold_source.rsplit(".", 1)[0]
        split = split_question(q.question, passages.get(pid, ""))
        if split and len(pairs) < n:
            pairs.append((*split, q.gold_source, q.question))
    retriever = Retriever(s, embedder=ingestor.embedder, store=ingestor.store)
    engine = build_engine(s, retriever=retriever, audit=False).warm_up()
    result = {"handbook": asyncio.run(_measure(engine, [(a, b, g, "") for a, b, g in HANDBOOK],
                                               "handbook")),
              "halueval-qa (split in two turns)": asyncio.run(_measure(engine, pairs,
                                                                       "halueval"))}
    out.mkdir(parents=True, exist_ok=True)
    (out / "followups.json").write_text(json.dumps(result, indent=1))
    (out / "followups.md").write_text(to_markdown(result))
    return result


def to_markdown(result: dict) -> str:
    lines = []
    for name, r in result.items():
        lines += [f"### {name} (n={r['n']}; rewrite p50 {r['rewrite_ms_p50']:.0f} ms, max "
                  f"{r['rewrite_ms_max']:.0f} ms; {r['bypassed']} needed none)", "",
                  "| second turn searched as | recall@1 | recall@3 | recall@10 |",
                  "|---|---|---|---|"]
        for query, rec in r["recall"].items():
            if name == "handbook" and query == "original question":
                continue  # the handbook pairs have no single-turn original
            lines.append(f"| {query} | " + " | ".join(f"{rec[f'recall@{k}']:.2f}" for k in _KS)
                         + " |")
        lines.append("")
    return "\n".join(lines)
