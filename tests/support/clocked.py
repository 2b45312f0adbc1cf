"""A service stand-in whose answers take scripted times on a fake clock (``bench concurrency``).

``FakeClock()`` is a clock function whose time moves only when set (``now``).
``ScriptedService(clock, script)`` answers like ``Service.astream``: the sessions that
ask together (a wave, started by ``asyncio.gather``) take the next script entry
``(first_s, final_s, tokens)``: each one's first draft token comes ``first_s`` after the
wave started, its final answer ``final_s`` after, with ``tokens`` output tokens. Every
session of a wave gets its first token before any gets its answer, so the clock only
moves forward. ``asked`` records ``(question, session, policy, collection)``; a
question in ``fail`` raises ``GenerationError`` at once (it takes no script entry).

Deliberately not here: the real engine (``fakes.engine`` has it, with fake models).
"""

from __future__ import annotations

import asyncio

from specrag.generators.base import GenerationError, Usage
from specrag.pipeline.events import Answer, StageEvent


class FakeClock:
    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class ScriptedService:
    def __init__(self, clock: FakeClock, script, fail=()):
        self.clock, self.script, self.fail = clock, list(script), set(fail)
        self.asked: list[tuple] = []
        self.warmer = None
        self.warmed = self.closed = False
        self._active = self._arrived = 0
        self._wave: tuple = ()
        self._all_first = asyncio.Event()

    def warm_up(self) -> "ScriptedService":
        self.warmed = True
        return self

    def close(self) -> None:
        self.closed = True

    async def astream(self, question, *, session, policy=None, collection=None):
        if question in self.fail:
            raise GenerationError("the draft model's server process ended", retryable=False)
        if self._active == 0:  # the first session of a new wave
            self._wave = (self.clock.now, *self.script.pop(0))
            self._arrived, self._all_first = 0, asyncio.Event()
        self._active += 1
        self.asked.append((question, session, policy, collection))
        start, first_s, final_s, tokens = self._wave
        await asyncio.sleep(0)  # the rest of the wave starts before anyone answers
        yield StageEvent("retrieved", 0.0)
        self.clock.now = start + first_s
        yield StageEvent("draft_token", 0.0, text="A")
        self._arrived += 1
        if self._arrived == self._active:
            self._all_first.set()
        await self._all_first.wait()
        self.clock.now = start + final_s
        self._active -= 1
        usage = (Usage("fake", "fake", 50, tokens),)
        yield StageEvent("final", 0.0, answer=Answer(question, "A.", "draft", policy or "",
                                                     usage=usage))
