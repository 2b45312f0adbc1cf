"""Questions from a collection's own chunks, written by a model, for ``specrag tune``.

``sample(store, collection, n, seed)`` takes chunks round-robin across the collection's
documents (current versions only), so one long manual does not crowd out the rest.
``write_questions(generator, chunks, ...)`` asks the generator (the engine's heavy tier:
Claude when configured, else the local heavy model; observed and PII-redacted like any
call) for three kinds:

- ``fact``: one question the chunk answers, with its answer in a few words;
- ``multi``: one question that needs two chunks together: two neighbours in a document,
  or, for a one-chunk document, the chunk and its nearest chunk in another document
  (``partner``), the bridge questions a corpus of short documents is asked;
- ``none``: a question on the chunk's topic that the documents do not answer (its
  expected answer is the abstention, ``prompts.NOT_FOUND``).

Each question must parse, end in "?", be 4-40 words, not contain its own answer (a
leak), not be a passage sentence turned into a question, and not repeat an earlier one
(content-word Jaccard >= 0.7). ``held_out(q)`` splits by the source chunk, so questions
about one chunk are never on both sides.

Deliberately not here: answering them (``tune.collect``).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from specrag.bench.metrics import normalize
from specrag.grounding.text import content_words, rough_sentences
from specrag.pipeline.prompts import NOT_FOUND
from specrag.types import Chunk

KINDS = ("fact", "multi", "none")
_ASK = {
    "fact": "Write one question that the passage below answers, and the answer in at "
            "most six words.\nReply exactly as:\nQ: <question>\nA: <answer>",
    "multi": "Write one question whose answer needs both passages below together, and the "
             "answer in at most six words.\nReply exactly as:\nQ: <question>\nA: <answer>",
    "none": "Write one question on the topic of the passage below that the passage does "
            "not answer.\nReply exactly as:\nQ: <question>",
}
_Q = re.compile(r"^\s*Q\s*[:.]\s*(.+?)\s*$", re.M)
_A = re.compile(r"^\s*A\s*[:.]\s*(.+?)\s*$", re.M)


@dataclass(frozen=True)
class TuneQuestion:
    id: str
    kind: str
    question: str
    answer: str  # a few words; NOT_FOUND for kind "none"
    chunk_ids: tuple[str, ...]
    source: str

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "question": self.question,
                "answer": self.answer, "chunk_ids": list(self.chunk_ids), "source": self.source}

    @classmethod
    def from_dict(cls, d: dict) -> "TuneQuestion":
        return cls(d["id"], d["kind"], d["question"], d["answer"], tuple(d["chunk_ids"]),
                   d["source"])


def held_out(q: TuneQuestion) -> bool:
    """About a third of the source chunks, always the same ones."""
    return int(hashlib.sha1(q.chunk_ids[0].encode()).hexdigest()[:8], 16) % 3 == 0


def sample(store, collection: str, n: int, seed: int = 0) -> list[list[Chunk]]:
    """Up to ``n`` chunks, round-robin over documents; each with its next neighbour."""
    rng = random.Random(seed)
    per_doc = []
    for info in store.documents(collection):
        got = store.chunks(collection, where={"$and": [{"doc_id": info.doc_id},
                                                       {"version": info.version}]})
        got.sort(key=lambda c: c.index)
        order = list(range(len(got)))
        rng.shuffle(order)
        per_doc.append([[got[i]] + got[i + 1:i + 2] for i in order])
    rng.shuffle(per_doc)
    out = []
    while len(out) < n and any(per_doc):
        for picks in per_doc:
            if picks and len(out) < n:
                out.append(picks.pop())
    return out


def partner(retriever, collection: str, chunk: Chunk, top_k: int = 5) -> Chunk | None:
    """The chunk of another document most like ``chunk`` (the retriever's first hit
    outside its document), or None. Without it a corpus of one-passage documents gets
    single-fact questions only, and a draft tuned on those learns to give up on the
    two-passage questions its users ask (BENCHMARKS.md, draft distillation)."""
    for hit in retriever.search(chunk.text, top_k=top_k, collection=collection).hits:
        if hit.chunk.doc_id != chunk.doc_id:
            return hit.chunk
    return None


def kind_for(i: int) -> str:
    """Six in ten single-fact, three multi-sentence, one unanswerable."""
    return ("fact", "multi", "fact", "none", "fact", "multi", "fact", "fact", "multi", "fact")[i % 10]


def parse(kind: str, text: str) -> tuple[str, str] | None:
    q = _Q.search(text or "")
    a = _A.search(text or "")
    if not q or (kind != "none" and not a):
        return None
    return q.group(1).strip(), (NOT_FOUND if kind == "none" else a.group(1).strip().rstrip("."))


def acceptable(question: str, answer: str, chunks: list[Chunk], kind: str) -> str | None:
    """Why the question is dropped, or None."""
    words = question.split()
    if not question.endswith("?") or not 4 <= len(words) <= 40:
        return "not a question"
    if kind != "none" and (not answer or normalize(answer) in normalize(question)):
        return "leaks its answer"
    qw = set(content_words(question))
    for sent in (s for c in chunks for s in rough_sentences(c.text)):
        sw = set(content_words(sent))
        if qw and sw and len(qw & sw) / len(qw | sw) >= 0.85:
            return "copies a passage sentence"
    return None


def _similar(a: str, b: str) -> bool:
    x, y = set(content_words(a)), set(content_words(b))
    return bool(x and y) and len(x & y) / len(x | y) >= 0.7


async def write_one(generator, kind: str, chunks: list[Chunk], max_tokens: int = 96):
    """The generator's reply and its ``Usage`` (None when the backend reports none)."""
    use = chunks if kind == "multi" else chunks[:1]
    passages = "\n\n".join(f"Passage {i + 1}:\n{c.text}" for i, c in enumerate(use))
    messages = [{"role": "user", "content": f"{_ASK[kind]}\n\n{passages}"}]
    parts, usage = [], None
    async for item in generator.stream(messages, max_tokens=max_tokens, temperature=0.0):
        if isinstance(item, str):
            parts.append(item)
        else:
            usage = item
    return "".join(parts), usage


def accept(kind: str, text: str, chunks: list[Chunk], kept: list[TuneQuestion]) -> TuneQuestion | str:
    """The question the reply holds, or why it was dropped."""
    got = parse(kind, text)
    if got is None:
        return "unparsed"
    question, answer = got
    why = acceptable(question, answer, chunks, kind)
    if why:
        return why
    if any(_similar(question, k.question) for k in kept):
        return "duplicate"
    use = chunks if kind == "multi" else chunks[:1]
    qid = hashlib.sha1(f"{kind}|{use[0].id}|{question}".encode()).hexdigest()[:12]
    return TuneQuestion(qid, kind, question, answer, tuple(c.id for c in use), use[0].source)
