"""Is a draft answer grounded in the retrieved chunks? Sentence-level checks, one verdict.

``Verifier(settings).verify(draft, chunks)``:

1. Citation markers (``[1]``, ``[2, 3]``, ``[1-3]``, ``[doc 2]``) are stripped; the draft
   is split into sentences (fragments under three words join their neighbour).
2. Every sentence is scored against every chunk in one ``predict`` call of the
   cross-encoder (premise = chunk, hypothesis = sentence; the scorer's batch size
   decides how the pairs run); a sentence's score is its max over chunks, and that
   chunk is its best support.
   With ``per_sentence=k`` each sentence is scored only against its k chunks of most
   word overlap (a cheap lexical prefilter): the cross-encoder's cost is linear in
   pairs x tokens, so 3 sentences x 10 chunks of ~200 tokens cannot run in 100 ms on
   two cores, while 3 x 1 runs in ~35 ms (served: ``verify.per_sentence`` 1, which
   replayed e2e drafts showed to accept and be right as often as 3). ``None`` (this
   class's default) scores every chunk. A sentence copied whole from a chunk (at least
   ``QUOTE_MIN_WORDS`` words) is supported by that chunk and not scored at all.
   Each chunk is first cut to its sentences most about the claim, at most
   ``evidence_words`` words (``evidence.select``; the verifier was trained on the same
   cut).
3. The draft's score aggregates the sentence scores: ``min`` by default (one
   unsupported sentence sinks the draft), or ``mean``.
   With a ``GroundingHead`` (``head.json`` beside the model, ``verify.head``), each
   cell's score is the head's calibrated P(supported) from the cross-encoder's score,
   the fraction of the sentence's key spans (names, numbers, dates) the chunk lacks
   (``spans.missing``) and how far its names sit among other words in the chunk
   (``roles.displaced``): the cross-encoder alone leans on what it knows about the
   world and misses a name put in another role.
   Given the question, a bare answer of at most ``ANSWER_WORDS`` words ("In 1869.") is
   scored as ``qa_claim(question, answer)``: alone it claims nothing checkable. A longer
   sentence that opens with "Yes," or "No," is scored without that word (``affirmed``):
   it claims the rest, and the small cross-encoder scored "Yes, A and B were both film
   directors." 0.03 against a passage saying so (0.38 without "Yes,").
4. ``grounded`` aggregates the sentence scores. Given the ``question`` and an
   ``AcceptanceModel`` (``verify.acceptance``), the verdict also asks whether the draft
   answers it (``relevance``) and ``score`` is the two combined, P(right), accepted at
   ``verify.answer_threshold`` (``specrag calibrate --e2e``); otherwise ``score`` is
   ``grounded``, accepted at ``verify.threshold`` (``specrag calibrate``), which is also
   the bar of each sentence's mark. ``supported`` = grounded >= ``verify.supported_threshold``,
   what a heavy answer is labelled by.

Honest abstentions ("the documents do not say ...", "I could not find ...") claim
nothing about the world, so they are not hallucinations: such sentences are marked
``abstention`` and left out of the aggregate. A draft made only of abstentions gets
score 1.0, ``accepted=True`` and ``abstained=True``, so the caller can decide to
escalate to a stronger model instead of treating it as a grounded answer. An empty
draft scores 0.

Deliberately not here: what a verdict holds (``verdict``), the cross-encoder itself
(``crossencoder``), what a sentence or a citation is (``text``), retrieval and any
decision about escalation.
"""

from __future__ import annotations

import copy
import re

import numpy as np

from specrag.grounding import acceptance as acceptance_models
from specrag.grounding.crossencoder import CrossEncoder
from specrag.grounding.evidence import select
from specrag.grounding.head import GroundingHead
from specrag.grounding.relevance import relevance_features
from specrag.grounding.roles import qa_claim
from specrag.grounding.text import claims, content_words, split_sentences, strip_citations
from specrag.grounding.verdict import AGGREGATES, SentenceVerdict, Verdict, aggregate, is_abstention


def prefilter(sentence: str, chunk_words: list[set[str]], k: int) -> list[int]:
    """Indices of the ``k`` chunks sharing the most content words with ``sentence``."""
    words = content_words(sentence)
    overlap = [len(words & cw) for cw in chunk_words]
    return sorted(sorted(range(len(chunk_words)), key=lambda i: -overlap[i])[:k])


QUOTE_MIN_WORDS = 4
ANSWER_WORDS = 4  # a draft sentence this short is a bare answer: checked with its question


_YES_NO = re.compile(r"^\s*(?:yes|no)\s*[,;:.!\u2013\u2014-]\s*", re.I)


def affirmed(sentence: str) -> str:
    """``sentence`` without an opening "Yes," / "No," when more than a bare answer
    follows: the rest is what it claims ("No, it was not ..." keeps its negation)."""
    rest = _YES_NO.sub("", sentence, count=1)
    if rest == sentence or len(rest.split()) <= ANSWER_WORDS:
        return sentence
    return rest[:1].upper() + rest[1:]


def _norm(sentence: str) -> str:
    return " ".join(strip_citations(sentence).lower().rstrip(".!? ").split())


def _text(chunk) -> str:
    """Accept plain strings, ``Chunk`` and ``Hit`` records."""
    if isinstance(chunk, str):
        return chunk
    inner = getattr(chunk, "chunk", chunk)
    return inner.text


class Verifier:
    def __init__(self, settings, scorer=None, aggregate: str = "min",
                 threshold: float | None = None, batch_size: int | None = None,
                 per_sentence: int | None = None, evidence_words: int | None = None,
                 head: bool = True, acceptance: str = "builtin",
                 supported_threshold: float | None = None, answer_threshold: float | None = None):
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got '{aggregate}'")
        self.settings = settings
        self.scorer = scorer  # anything with predict(pairs) -> scores; None: the verifier model
        self.aggregate = aggregate
        self.threshold = settings.verify.threshold if threshold is None else threshold
        self.batch_size = batch_size  # None: ``verify.batch_size``
        self.per_sentence = per_sentence
        self.evidence_words = (settings.verify.evidence_words if evidence_words is None
                               else evidence_words)
        self.use_head = head  # the model folder's head.json, when it has one
        self.acceptance = acceptance  # "builtin" | "off" | a path (``acceptance.resolve``)
        self.supported_threshold = (settings.verify.supported_threshold if supported_threshold
                                    is None else supported_threshold)
        self.answer_threshold = (settings.verify.answer_threshold if answer_threshold is None
                                 else answer_threshold)
        self.head: GroundingHead | None = None
        self.acceptance_model = None
        self._warm = False

    @classmethod
    def from_settings(cls, settings, scorer=None) -> "Verifier":
        """The verifier exactly as serving uses it: every ``verify.*`` setting applied.
        Calibration and the benchmarks build theirs here too, so a threshold is chosen
        on the scores that serving will compute."""
        v = settings.verify
        return cls(settings, scorer=scorer, aggregate=v.aggregate, threshold=v.threshold,
                   per_sentence=v.per_sentence or None, evidence_words=v.evidence_words,
                   head=v.head, acceptance=v.acceptance,
                   supported_threshold=v.supported_threshold,
                   answer_threshold=v.answer_threshold)

    def with_threshold(self, threshold: float, answer_threshold: float | None = None) -> "Verifier":
        """The same verifier (the same loaded model) accepting at other thresholds."""
        out = copy.copy(self)
        out.threshold = float(threshold)
        if answer_threshold is not None:
            out.answer_threshold = float(answer_threshold)
        return out

    def with_acceptance(self, acceptance: str, answer_threshold: float) -> "Verifier":
        """The same loaded model with another acceptance model (a tuned collection's);
        the model file is read at the next ``warm_up``."""
        out = copy.copy(self)
        out.acceptance, out.answer_threshold, out._warm = acceptance, float(answer_threshold), False
        return out

    def warm_up(self) -> "Verifier":
        if self.scorer is None:
            self.scorer = CrossEncoder(self.settings, "verifier", batch_size=self.batch_size)
        if hasattr(self.scorer, "warm_up"):
            self.scorer.warm_up()
        if not self._warm:
            model_dir = getattr(self.scorer, "model_dir", None)
            self.head = GroundingHead.load(model_dir) if self.use_head else None
            self.acceptance_model = acceptance_models.resolve(self.acceptance, model_dir)
            self._warm = True
        return self

    def verify(self, draft: str, chunks: list, question: str | None = None,
               relevance: bool = True) -> Verdict:
        """Score ``draft`` against ``chunks`` (strings, ``Chunk`` or ``Hit``); with the
        ``question``, also whether the draft answers it (when an acceptance model is set).
        ``relevance=False``: the question only completes bare answers (a sentence checked
        while the draft streams: grounding alone, scored as the final verdict will score it)."""
        self.warm_up()
        texts = [_text(c) for c in chunks]
        sents = claims(draft)
        if not sents:
            return Verdict(0.0, False, self.threshold, (), self.aggregate, grounded=0.0,
                           supported=False)
        checked = [i for i, s in enumerate(sents) if not is_abstention(s)]
        # -1 marks chunks a sentence was not scored against (prefiltered out)
        matrix = np.full((len(checked), len(texts)), -1.0, dtype=np.float32)
        if checked and texts:
            # a sentence the draft copied whole from a chunk is supported by that chunk
            # whatever a small model scores it (the copy is the evidence): no scoring
            chunk_sents = [{_norm(x) for x in split_sentences(t)} for t in texts]
            todo = []
            for r, i in enumerate(checked):
                copied = [j for j, cs in enumerate(chunk_sents)
                          if len(sents[i].split()) >= QUOTE_MIN_WORDS and _norm(sents[i]) in cs]
                matrix[r, copied] = 1.0
                if not copied:
                    todo.append(r)
            k = self.per_sentence
            cw = [content_words(t) for t in texts] if k and k < len(texts) else None
            # a bare answer ("In 1869.") claims nothing without its question: check the two
            # together, in the form the verifier was trained on for question pairs
            said = [qa_claim(question, x) if question and len(x.split()) <= ANSWER_WORDS
                    else affirmed(x) for x in sents]
            cells = [(r, j) for r in todo
                     for j in (prefilter(sents[checked[r]], cw, k) if cw else range(len(texts)))]
            pairs = [(texts[j], said[checked[r]]) for r, j in cells]
            cut = [(select(t, h, self.evidence_words), h) for t, h in pairs]
            # one predict call for the draft's cells: the scorer runs them alone or batched
            # (``verify.batch_size``) and remembers what it scored alone
            scores = np.asarray(self.scorer.predict(cut), dtype=np.float32) if cut else []
            if self.head is not None and cut:  # names, numbers and dates the chunk lacks or
                scores = self.head.score(scores, pairs)  # puts in another role pull it down
            for (r, j), sc in zip(cells, scores):
                matrix[r, j] = sc
        rows: list[SentenceVerdict] = []
        row_of = {i: r for r, i in enumerate(checked)}
        for i, sent in enumerate(sents):
            if i not in row_of:
                rows.append(SentenceVerdict(sent, 1.0, None, True))
            elif not texts:
                rows.append(SentenceVerdict(sent, 0.0, None))
            else:
                r = matrix[row_of[i]]
                best = int(np.argmax(r))
                rows.append(SentenceVerdict(sent, float(r[best]), best))
        if not checked:
            return Verdict(1.0, True, self.threshold, tuple(rows), self.aggregate, abstained=True,
                           grounded=1.0, supported=True)
        grounded = aggregate([rows[i].score for i in checked], self.aggregate)
        accepted = grounded >= self.threshold
        answers, signals, score, bar = None, {}, grounded, None
        if question and relevance and self.acceptance_model is not None:
            signals = self.signals(question, draft, texts, rows)
            answers = self.acceptance_model.relevance(signals)  # P(it answers the question)
            score = self.acceptance_model.combine(grounded, answers)
            # P(right) already weighs the grounding: it alone decides (calibrated on e2e rows)
            bar = self.answer_threshold
            accepted = score >= bar
        return Verdict(score, accepted, self.threshold, tuple(rows), self.aggregate,
                       grounded=grounded, relevance=answers, signals=signals,
                       supported=grounded >= self.supported_threshold, answer_threshold=bar)

    def sinks(self, grounded: float) -> bool:
        """Does one sentence grounded this low rule its whole draft out, whatever follows?
        With ``min`` aggregation the draft scores at most this; the acceptance model could
        still lift P(right) only through relevance, so check its best case."""
        self.warm_up()
        if self.aggregate != "min":
            return False
        m = self.acceptance_model
        if m is None:
            return grounded < self.threshold
        best = max(m.combine(grounded, m.max_relevance()), m.combine(grounded, 1e-4))
        return best < self.answer_threshold

    def signals(self, question: str, draft: str, texts: list[str], rows) -> dict[str, float]:
        """The relevance signals of ``draft`` for ``question``; the evidence is the chunks
        its sentences are best supported by (``rows``: the verdict's sentences)."""
        evidence = list(dict.fromkeys(texts[r.best_chunk] for r in rows
                                      if not r.abstention and r.best_chunk is not None))
        return relevance_features(question, draft, evidence, texts)
