"""How text reaches the caller when a call is tried more than once: never twice.

A retry or failover that starts after tokens were already streamed must not repeat
them. ``Delivery`` tracks what the caller has received and applies one of three modes
(settings ``resilience.after_first_token``):

- ``resume`` (default): stream live. A new try's output is held back until it has
  reproduced the text already delivered, then only the remainder is passed on. If it
  says something else (``Diverged``) the call stops rather than contradict what the
  user has read. Deterministic backends (greedy local models, temperature-0 servers)
  resume seamlessly; sampling ones may diverge.
- ``buffer``: hold each try's text until that try has finished, so any failure can be
  retried anywhere, at the price of streaming (time to first token = total time).
- ``never``: retry and fail over only before the first token, as most SDKs do.

Deliberately not here: when to retry (``retry``) or where (``failover``).
"""

from __future__ import annotations

from contextlib import aclosing

from specrag.resilience.attempts import Diverged


async def relay(run, delivery, record, messages, max_tokens: int, temperature: float):
    """Stream one attempt through ``delivery``; yields only what the user may now see.

    A retry whose text diverges from what was already shown is recorded as such: the
    backend was fine, its text was not, so it is not retryable."""
    try:
        async with aclosing(run.stream(messages, max_tokens=max_tokens,
                                       temperature=temperature)) as items:
            async for text in items:
                out = delivery.accept(text)
                if out:
                    yield out
        for out in delivery.finish():
            yield out
    except Diverged as e:
        record.mark_last(error=str(e), outcome="diverged", retryable=False)
        raise

MODES = ("resume", "buffer", "never")


class Delivery:
    def __init__(self, mode: str = "resume"):
        if mode not in MODES:
            raise ValueError(f"after_first_token must be one of {MODES}, got '{mode}'")
        self.mode = mode
        self.sent: list[str] = []
        self._held: list[str] = []
        self._expected = ""  # delivered text the current try must reproduce first
        self._seen = ""

    @property
    def text(self) -> str:
        return "".join(self.sent)

    def may_try_again(self) -> bool:
        return not (self.mode == "never" and self.sent)

    def begin(self) -> None:
        """A new try starts."""
        self._held = []
        self._expected = self.text if self.mode == "resume" else ""
        self._seen = ""

    def accept(self, text: str) -> str:
        """A piece of the current try's output -> what to yield to the caller now."""
        if self.mode == "buffer":
            self._held.append(text)
            return ""
        if len(self._seen) < len(self._expected):
            self._seen += text
            n = min(len(self._seen), len(self._expected))
            if self._seen[:n] != self._expected[:n]:
                raise Diverged(f"the retry diverged after {len(self._expected)} characters "
                               "already streamed; stopping rather than contradict them")
            if len(self._seen) <= len(self._expected):
                return ""
            text = self._seen[len(self._expected):]
        self.sent.append(text)
        return text

    def finish(self) -> list[str]:
        """The current try ended well -> text still to yield (the buffer, in buffer mode)."""
        if self.mode == "buffer":
            self.sent.extend(self._held)
            held, self._held = self._held, []
            return held
        if len(self._seen) < len(self._expected):
            raise Diverged(f"the retry ended after {len(self._seen)} of the "
                           f"{len(self._expected)} characters already streamed")
        return []
