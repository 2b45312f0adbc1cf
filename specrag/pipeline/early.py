"""Verify a draft while it streams: each sentence is scored the moment it is complete.

``SentenceWatch(verifier, chunks, question)``: ``feed(text)`` with the draft so far starts, in a
worker thread, the verification of every sentence completed since the last call (all
but the last of ``text.claims(text)``: the last may still grow); ``sunk()`` returns the
first finished sentence verdict that rules the whole draft out, else None. A sentence
rules it out when ``verifier.sinks(grounded)``: with ``min`` aggregation the draft can
score no higher than that sentence, and even the most relevant answer could not lift
P(right) to ``verify.answer_threshold`` (``verify.threshold`` without an acceptance
model). So an early rejection never rejects a draft that the full verdict would have
accepted, up to the rare sentence that a later fragment joins. The question goes with
each check so that a bare answer ("In 1869.") is scored as the final verdict scores it
(with its question), and that score is the one the cross-encoder remembers for the verdict.

Measured (BENCHMARKS.md, "The trade"): at the shipped draft prompt ("one or two short
sentences") 3 of 176 drafts had a second sentence, so this saves little today; it pays
with longer drafts (a larger ``generation.draft_max_tokens``, another draft prompt).

Deliberately not here: cancelling the draft and escalating (``phases``), the verdict of
the whole draft (``Verifier.verify``, run as before once the draft ends). Each finished
check is also handed out (``checked``): the engine yields it as a ``sentence_checked``
event and the page colours that sentence while the rest still streams.
"""

from __future__ import annotations

import asyncio

from specrag.grounding.text import claims
from specrag.grounding.verdict import is_abstention


class SentenceWatch:
    def __init__(self, verifier, chunks, question: str | None = None):
        self.verifier = verifier
        self.chunks = list(chunks)
        self.question = question
        self._started = 0  # sentences handed to the verifier so far
        self._tasks: list[asyncio.Task] = []
        self._fresh: list = []  # finished checks not yet handed out by ``checked``

    def feed(self, text: str) -> None:
        done = claims(text)[:-1]  # the last sentence may still grow
        for i in range(self._started, len(done)):
            if not is_abstention(done[i]):
                task = asyncio.ensure_future(asyncio.to_thread(
                    self.verifier.verify, done[i], self.chunks, self.question, relevance=False))
                self._tasks.append(task)
        self._started = max(self._started, len(done))

    def sunk(self):
        """The first checked sentence that rules the draft out, or None. Every check that
        finished is also kept for ``checked()``."""
        for task in [t for t in self._tasks if t.done()]:
            self._tasks.remove(task)
            if task.exception() is not None:  # a failed check decides nothing early
                continue
            v = task.result()
            sentence = v.sentences[0] if v.sentences else None
            if sentence is not None:
                self._fresh.append(v)
                if self.verifier.sinks(sentence.score):
                    return sentence
        return None

    def checked(self) -> list:
        """The one-sentence verdicts finished since the last call (the page marks them)."""
        out, self._fresh = self._fresh, []
        return out

    async def close(self) -> None:
        """Wait for checks still running (their threads cannot be interrupted)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
