"""OpenAI's chat-completion wire format, in and out, for specrag's questions and answers.

In: ``parse_chat(body, default_collection, policy=None)`` reads a request body into a
``ChatRequest``. The model id names the collection (``MODEL_PREFIX`` + name, or plain
``specrag`` for the default collection), the last message must be the user's and is
the question, and the user and assistant turns before it are the conversation history
(``[{"role", "content"}, ...]``). System and developer messages are dropped on purpose:
specrag's own system prompt (answer from the documents, cite them) is not the caller's
to replace. The speculative policy comes from the body's ``specrag_policy`` field (the
OpenAI client's ``extra_body``) or the ``?policy=`` query. ``temperature``,
``max_tokens`` and tools are ignored (the tiers' settings hold); ``n`` above 1 is
refused, as one question has one answer. ``stream`` and ``stream_options.include_usage``
must be JSON booleans: the string "false" is a 400, not a stream.

Out: ``completion(...)`` is a ``chat.completion`` whose ``choices[0].message.content`` is
the final answer's text; ``chunk(...)`` is one ``chat.completion.chunk``; ``usage``
adds up the answer's generation calls; ``extras(answer)`` is the ``specrag`` field
both carry (tier, draft, verdict, citations, warnings, ...: ``Answer.to_dict`` less
the question), with ``sources`` (the documents and pages the answer came from) and
``sourced`` (false: no source in the documents supports it).

Deliberately not here: HTTP, auth and the order of streamed chunks (``app``, ``stream``).
"""

from __future__ import annotations

from dataclasses import dataclass

from specrag.api.errors import ApiError
from specrag.pipeline.events import POLICIES

MODEL_PREFIX = "specrag:"
DEFAULT_MODEL = "specrag"  # the default collection (``store.collection``)
_TURNS = ("user", "assistant")


@dataclass(frozen=True)
class ChatRequest:
    model: str
    collection: str
    question: str
    history: tuple[dict, ...]
    stream: bool
    include_usage: bool  # ``stream_options.include_usage``: a last chunk with the usage
    policy: str | None


def model_id(collection: str) -> str:
    return MODEL_PREFIX + collection


def collection_of(model, default_collection: str) -> str:
    if model == DEFAULT_MODEL:
        return default_collection
    if isinstance(model, str) and model.startswith(MODEL_PREFIX) and model[len(MODEL_PREFIX):]:
        return model[len(MODEL_PREFIX):]
    raise ApiError(404, f"The model '{model}' does not exist: use '{MODEL_PREFIX}COLLECTION' "
                        "(GET /v1/models lists yours)", code="model_not_found", param="model")


def parse_chat(body, default_collection: str, policy: str | None = None) -> ChatRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    collection = collection_of(body.get("model"), default_collection)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages")
    turns = [(m.get("role"), _text(m.get("content"))) for m in messages if isinstance(m, dict)]
    if len(turns) != len(messages) or turns[-1][0] != "user":
        raise ApiError(400, "the last message must be the user's question", param="messages")
    if (body.get("n") or 1) != 1:
        raise ApiError(400, "n must be 1: specrag gives one answer per question", param="n")
    policy = body.get("specrag_policy") or policy
    if policy is not None and policy not in POLICIES:
        raise ApiError(400, f"specrag_policy must be one of {', '.join(POLICIES)}",
                       param="specrag_policy")
    history = tuple({"role": role, "content": text} for role, text in turns[:-1]
                    if role in _TURNS and text)
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object", param="stream_options")
    return ChatRequest(body["model"], collection, turns[-1][1], history,
                       _flag(body, "stream"), _flag(options, "include_usage"), policy)


def _flag(fields: dict, name: str) -> bool:
    """A boolean field (absent or null: false); "false" as a string is refused, not truthy."""
    value = fields.get(name)
    if value is not None and not isinstance(value, bool):
        raise ApiError(400, f"{name} must be true or false (a JSON boolean), not "
                            f"{type(value).__name__} {str(value)[:20]!r}", param=name)
    return bool(value)


def _text(content) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    if content is None:
        return ""
    raise ApiError(400, "message content must be text (images and files are not read)",
                   param="messages")


# -- out ------------------------------------------------------------------------------
def extras(answer) -> dict:
    data = answer.to_dict()
    data.pop("question")
    return data


def usage(answer) -> dict:
    prompt = sum(u.input_tokens for u in answer.usage)
    done = sum(u.output_tokens for u in answer.usage)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def completion(cid: str, created: int, model: str, answer) -> dict:
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": answer.text}}],
            "usage": usage(answer), "specrag": extras(answer)}


def chunk(cid: str, created: int, model: str, delta: dict | None, finish: str | None = None,
          **extra) -> dict:
    """One ``chat.completion.chunk``; ``delta=None`` gives the usage chunk (no choices)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish,
                                         "logprobs": None}]
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": choices, **extra}
