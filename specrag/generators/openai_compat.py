"""Any OpenAI-compatible chat server (vLLM, Ray Serve, llama.cpp server, Ollama), streamed.

Speaks ``POST {base_url}/chat/completions`` with ``stream: true`` over httpx and
reads the server-sent events. Usage comes from the final chunk when the server
honours ``stream_options.include_usage``; otherwise output tokens are counted as
streamed deltas and input tokens are estimated at four characters per token (marked
by ``estimated`` in the logs). The key, if any, is read from the env var named.
``extra_body`` adds fields to every request (llama.cpp's ``cache_prompt``, say); where the
server reports them, the prompt tokens its cache held (llama.cpp's ``timings.cache_n``)
and the chosen tokens' log-probabilities (``logprobs: true``) land in the ``Usage``.

Deliberately not here: the ``openai`` package (one HTTP call does not need it).
"""

from __future__ import annotations

import json
import os

from specrag.generators.base import GenerationError, Timer, Usage, register
from specrag.generators.costs import estimate_tokens

RETRYABLE = {408, 409, 429, 500, 502, 503, 504, 529}


@register("openai")
class OpenAICompatGenerator:
    name = "openai"

    def __init__(self, model: str = "", base_url: str = "http://127.0.0.1:8000/v1",
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 60.0,
                 extra_body: dict | None = None):
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})

    def warm_up(self) -> "OpenAICompatGenerator":
        return self

    async def stream(self, messages, *, max_tokens: int = 512, temperature: float = 0.0):
        import httpx

        headers = {"Content-Type": "application/json"}
        if self.api_key_env and os.environ.get(self.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                "temperature": temperature, "stream": True,
                "stream_options": {"include_usage": True}, **self.extra_body}
        timer = Timer()
        deltas, usage, finished = 0, None, False
        cached, logprobs = 0, []
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                async with client.stream("POST", f"{self.base_url}/chat/completions",
                                         json=body, headers=headers) as resp:
                    if resp.status_code >= 400:
                        text = (await resp.aread()).decode(errors="replace")[:200]
                        raise GenerationError(f"{self.base_url} {resp.status_code}: {text}",
                                              retryable=resp.status_code in RETRYABLE,
                                              status=resp.status_code)
                    async for line in resp.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            finished = True
                            break
                        try:
                            event = json.loads(data)
                        except json.JSONDecodeError:
                            raise GenerationError(f"{self.base_url}: malformed stream event",
                                                  retryable=True) from None
                        usage = event.get("usage") or usage
                        cached = int((event.get("timings") or {}).get("cache_n", cached))
                        for choice in event.get("choices") or []:
                            logprobs += [float(t.get("logprob", 0.0)) for t in
                                         (choice.get("logprobs") or {}).get("content") or ()]
                            finished = finished or bool(choice.get("finish_reason"))
                            text = (choice.get("delta") or {}).get("content")
                            if text:
                                timer.token()
                                deltas += 1
                                yield text
        except httpx.HTTPError as err:
            raise GenerationError(f"{self.base_url}: {type(err).__name__}",
                                  retryable=True) from None
        if not finished:  # the connection closed before the server said it was done
            raise GenerationError(f"{self.base_url}: stream ended early", retryable=True)
        extra = {"state_tokens": cached, "logprobs": tuple(logprobs)}
        if usage:
            yield Usage("openai", self.model, int(usage.get("prompt_tokens", 0)),
                        int(usage.get("completion_tokens", deltas)), timer.ttft_ms,
                        timer.total_ms, **extra)
        else:
            yield Usage("openai", self.model, estimate_tokens(messages), deltas, timer.ttft_ms,
                        timer.total_ms, **extra)  # the server reported no usage
