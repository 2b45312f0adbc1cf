"""A deterministic generator with queued replies, for unit tests of control flow.

``FakeGenerator(replies=["a reply", ...], delay_s=0.01)`` streams each queued reply
word by word (the last reply repeats), counts words as tokens and records the
messages it was given. Setting ``fail_with`` raises that error instead. Registered as
``fake`` (a local backend: it costs nothing) when ``specrag.testing`` is imported.
"""

from __future__ import annotations

import asyncio

from specrag.generators.base import Timer, Usage, register


@register("fake")
class FakeGenerator:
    name = "fake"
    local = True  # runs in this process: priced at zero, no retries, no latency breaker

    def __init__(self, model: str = "fake", replies: list[str] | None = None,
                 delay_s: float = 0.0, fail_with: Exception | None = None):
        self.model = model or "fake"
        self.replies = list(replies or ["The documents do not say."])
        self.delay_s = delay_s
        self.fail_with = fail_with
        self.calls: list[list[dict]] = []
        self.cancelled = 0

    def warm_up(self) -> "FakeGenerator":
        return self

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        self.calls.append(messages)
        if self.fail_with is not None:
            raise self.fail_with
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        timer = Timer()
        words = reply.split(" ")[:max_tokens]
        sent = 0
        try:
            for i, word in enumerate(words):
                await asyncio.sleep(self.delay_s)
                timer.token()
                sent += 1
                yield word if i == 0 else " " + word
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise
        prompt = sum(len(m["content"].split()) for m in messages)
        yield Usage(self.name, self.model, prompt, sent, timer.ttft_ms, timer.total_ms)
