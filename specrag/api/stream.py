"""How a streamed answer reaches an OpenAI client: the engine's events as completion chunks.

The rule: the chunks' ``content`` adds up to the final answer, as the non-streamed
``message.content`` is, so a chat UI keeps the answer (and sends it back as history)
and never a rejected draft. The draft still streams live, as ``reasoning_content``:
the delta field OpenAI-compatible UIs show as the model's thinking, and plain clients
ignore. So a client sees:

1. a first chunk with the assistant's role;
2. the draft's tokens as ``reasoning_content`` while the small model writes, then one
   line with the verifier's verdict (or why the draft failed);
3. the answer as ``content``: an accepted draft in one chunk once it is verified; a
   heavy answer token by token as the heavy model writes it;
4. a last chunk with ``finish_reason: "stop"`` and the ``specrag`` field (tier, draft,
   verdict, citations, sources, sourced, warnings, the exact answer text, ...), then,
   when the request asked for ``stream_options.include_usage``, a usage chunk with no
   choices.

One exception to the rule: a heavy answer that streamed and was then withheld (it
obeyed an instruction planted in a document) cannot be taken back, so its warning and
the replacement answer follow it as content, and ``specrag.answer`` holds the text.

Deliberately not here: the engine (which decides everything), SSE framing and errors
(``app``).
"""

from __future__ import annotations

from specrag.api import wire


class ChunkStream:
    def __init__(self, cid: str, created: int, model: str, include_usage: bool):
        self.cid, self.created, self.model = cid, created, model
        self.include_usage = include_usage
        self.streamed: list[str] = []  # the content sent so far

    def _chunk(self, delta, finish=None, **extra) -> dict:
        return wire.chunk(self.cid, self.created, self.model, delta, finish, **extra)

    def start(self) -> list[dict]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def on(self, event) -> list[dict]:
        """The chunks one engine event makes (most make none)."""
        kind = event.kind
        if kind == "draft_token":
            return [self._chunk({"reasoning_content": event.text})]
        if kind == "draft_failed":
            return [self._chunk({"reasoning_content": f"\n\n[draft failed: {event.text}; "
                                                      "the heavy model answers]\n"})]
        if kind == "verdict":
            v = event.verdict
            state = "accepted" if v.accepted else "rejected: the heavy model answers"
            return [self._chunk({"reasoning_content": f"\n\n[verifier: {v.label}, {state}]\n"})]
        if kind == "heavy_token":
            return [self._content(event.text)]
        if kind == "final":
            return self._final(event.answer)
        return []

    def _content(self, text: str) -> dict:
        self.streamed.append(text)
        return self._chunk({"content": text})

    def _final(self, answer) -> list[dict]:
        out = []
        sent = "".join(self.streamed).strip()
        if not sent:
            out.append(self._content(answer.text))
        elif sent != answer.text:  # a streamed heavy answer that was withheld
            out.append(self._content("\n\n" + " ".join(answer.warnings + (answer.text,))))
        out.append(self._chunk({}, "stop", specrag=wire.extras(answer)))
        if self.include_usage:
            out.append(self._chunk(None, usage=wire.usage(answer)))
        return out
