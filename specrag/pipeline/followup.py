"""Follow-up questions: the conversation so far turns one into a standalone question.

``await rewrite(tier, question, history, method=...)`` returns a ``Rewrite``. By
``method`` (``chat.rewrite``):

- ``"turns"`` (the default): the question followed by a few names and words of the
  conversation's questions since its topic began (``pipeline.conversation``); a
  question that changes topic is searched as asked. No model call. On 4+-turn
  conversations (``bench followups``: SQuAD questions turned into follow-ups, CoQA's
  own conversations) later turns found their document at the top about 15-25 points
  more often than with ``"previous"``, which carries one turn back and lets that
  question outweigh the new one.

For the other methods a question that already stands alone (no conversation, or no
word that points back into it, such as "they", "that one", "what about", "and ...?")
costs nothing: it is searched as asked. Otherwise:

- ``"previous"``: the previous question followed by this one. No model call; on our
  two-turn sets it found the passage more often than the model's rewrite did
  (HaluEval-QA recall@1 0.88 vs 0.78, handbook 1.00 vs 0.83), while the rewrite cost
  seconds of the 0.5B model on 2 cores.
- ``"model"``: the draft tier rewrites it with the last turns in view (one short
  generation). A reply that does not look like a question about the same thing (empty,
  several lines, far longer than the question and its context, "The documents do not
  say") falls back to ``"previous"``.

Retrieval, verification and both prompts then use the standalone question; the UI
shows it as "searched for: ...".

``history`` is a list of ``{"role": "user" | "assistant", "content": str}`` messages,
oldest first, as the OpenAI chat format has it. Every text that reaches retrieval or a
prompt is bounded by ``max_chars`` (``security.max_question_chars``): a user turn
longer than that is refused with a clear message (it could not have been asked), only
the last ``MAX_MESSAGES`` messages are read, an earlier answer is cut, and the
standalone question of ``"previous"`` keeps the end of the previous question, so a
follow-up of a follow-up cannot grow the question past the limit. Instructions to the
model in the carried question are removed (``security.injection``): one typed once
must not ride along into every later follow-up.

Deliberately not here: remembering conversations (the caller passes them), answering
from earlier answers (only the documents are evidence), and summarising long chats.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from specrag.generators.base import GenerationError, Usage
from specrag.pipeline import conversation
from specrag.security.injection import neutralize
from specrag.types import SpecragError

_REFERS_BACK = re.compile(
    r"\b(?:it|its|they|them|their|theirs|these|those|he|him|his|she|her|hers|the same|"
    r"the other|the former|the latter|else|instead|another|again)\b|^\W*(?:and|but|or|so|"
    r"what about|how about|what if)\b", re.IGNORECASE)
# words that point back only in a short question ("and that one?", "how quickly must I
# do that?"); a very short question is a follow-up whatever its words ("For how long?")
_WEAK = re.compile(r"\b(?:this|that|there|then|one|ones|also|too|more|either|neither)\b",
                   re.IGNORECASE)
_SHORT, _VERY_SHORT = 9, 5  # words
_CONTENT = re.compile(r"[^\W\d_][\w'-]{3,}")
_ANSWER_WORDS = 60  # of each earlier answer shown to the rewriter: prefill is its cost
_ANSWER_CHARS = 600  # ... and characters, whatever its words are
MAX_MESSAGES = 40  # of the conversation, the newest: the rewrite reads a few turns at most
MAX_CHARS = 2000  # ``security.max_question_chars``' default

SYSTEM = ("Rewrite the user's last question so that it can be understood without the "
          "conversation: replace pronouns and references with the things they refer to. "
          "Do not answer it. Reply with the rewritten question only.")


@dataclass(frozen=True)
class Rewrite:
    question: str  # as asked
    standalone: str  # what is searched, verified and answered
    method: str  # "alone" (none needed), "turns", "previous", "model", or "fallback" (of "model")
    ms: float = 0.0
    usage: Usage | None = None

    @property
    def rewritten(self) -> bool:
        return self.standalone != self.question


def check_history(history, max_chars: int = MAX_CHARS) -> list[dict]:
    """The newest ``MAX_MESSAGES`` of the history, each answer cut to ``4 * max_chars``,
    or a one-line ``SpecragError`` saying why not (a user turn over ``max_chars``)."""
    if history is None:
        return []
    if not isinstance(history, (list, tuple)) or not all(
            isinstance(m, dict) and m.get("role") in ("user", "assistant", "system")
            and isinstance(m.get("content", ""), str) for m in history):
        raise SpecragError("history must be a list of {\"role\": \"user\" or \"assistant\", "
                           "\"content\": text} messages")
    kept = [m for m in history if m.get("role") != "system"][-MAX_MESSAGES:]
    for m in kept:
        if m["role"] == "user" and len(m.get("content", "")) > max_chars:
            raise SpecragError(f"a question earlier in the conversation is longer than "
                               f"{max_chars} characters; start a new conversation")
    return [dict(m, content=m["content"][:4 * max_chars]) if m["role"] == "assistant"
            and len(m.get("content", "")) > 4 * max_chars else m for m in kept]


def stands_alone(question: str, history: list[dict] | None) -> bool:
    """No conversation, or nothing in the question that points back into it."""
    if not any(m.get("role") == "user" and m.get("content") for m in history or ()):
        return True
    q, n = question.strip(), len(question.split())
    return not (_REFERS_BACK.search(q) or n < _VERY_SHORT or (n < _SHORT and _WEAK.search(q)))


def messages_for(question: str, history: list[dict], turns: int) -> list[dict]:
    lines = []
    for m in _last_turns(history, turns):
        words = str(m.get("content", "")).split()
        text = " ".join(words[:_ANSWER_WORDS])[:_ANSWER_CHARS]
        text += " ..." if len(words) > _ANSWER_WORDS or len(text) == _ANSWER_CHARS else ""
        lines.append(f"{'User' if m.get('role') == 'user' else 'Assistant'}: {text}")
    user = ("Conversation:\n" + "\n".join(lines) + f"\n\nLast question: {question}\n"
            "Rewritten question:")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


METHODS = ("turns", "previous", "model", "off")


async def rewrite(tier, question: str, history: list[dict] | None, *, method: str = "turns",
                  turns: int = 3, max_tokens: int = 48, max_chars: int = MAX_CHARS) -> Rewrite:
    """``question`` (at most ``max_chars``) as a standalone question of at most ``max_chars``."""
    if method not in METHODS:
        raise SpecragError(f"chat.rewrite must be one of {', '.join(METHODS)}, got '{method}'")
    if method == "turns":
        t0 = time.perf_counter()
        searched = conversation.query(question, history, max_chars)
        return Rewrite(question, searched, "turns" if searched != question else "alone",
                       (time.perf_counter() - t0) * 1000)
    if method == "off" or stands_alone(question, history):
        return Rewrite(question, question, "alone")
    joined = _joined(_previous_question(history), question, max_chars)
    if method == "previous":
        return Rewrite(question, joined, "previous")
    t0 = time.perf_counter()
    pieces, usage = [], None
    try:
        async for item in tier.stream(messages_for(question, history, turns),
                                      max_tokens=max_tokens, temperature=0.0):
            if isinstance(item, Usage):
                usage = item
            else:
                pieces.append(item)
    except GenerationError:  # no rewrite is no reason to fail the question
        pieces = []
    reply = _clean("".join(pieces))
    if len(reply) > max_chars or not _plausible(reply, question, history):
        return Rewrite(question, joined, "fallback",
                       (time.perf_counter() - t0) * 1000, usage)
    return Rewrite(question, reply, "model", (time.perf_counter() - t0) * 1000, usage)


def _last_turns(history: list[dict], turns: int) -> list[dict]:
    kept = [m for m in history if m.get("role") in ("user", "assistant") and m.get("content")]
    return kept[-2 * max(1, turns):]


def _joined(previous: str, question: str, max_chars: int) -> str:
    """The previous question, without instructions to the model and cut from its start
    where needed, then this one: at most ``max_chars`` in all."""
    previous = " ".join(neutralize(previous)[0].split())
    room = max_chars - len(question) - 1
    if room <= 0:
        previous = ""
    elif len(previous) > room:  # its end, from the first whole word
        previous = previous[-room:].partition(" ")[2]
    return f"{previous} {question}".strip()


def _previous_question(history: list[dict]) -> str:
    return next((str(m["content"]) for m in reversed(history)
                 if m.get("role") == "user" and m.get("content")), "")


def _clean(reply: str) -> str:
    line = reply.strip().split("\n")[0].strip()
    line = re.sub(r"^(?:rewritten|standalone)?\s*question\s*:\s*", "", line, flags=re.I)
    return line.strip().strip("\"'“”").strip()


def _plausible(reply: str, question: str, history: list[dict]) -> bool:
    """A one-line question built from the question and the conversation's words."""
    if not reply or "documents do not say" in reply.lower() or len(reply) > 3 * len(question) + 120:
        return False
    known = {w.lower() for m in history for w in _CONTENT.findall(str(m.get("content", "")))}
    known |= {w.lower() for w in _CONTENT.findall(question)}
    words = [w.lower() for w in _CONTENT.findall(reply)]
    # a rewrite may add a few words of its own, not a new topic
    return bool(words) and sum(w in known for w in words) >= 0.6 * len(words)
