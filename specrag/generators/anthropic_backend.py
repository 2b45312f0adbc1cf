"""Claude through the official ``anthropic`` SDK, streamed.

The key is read from the environment variable named in settings (never stored);
``base_url`` points the SDK at another Messages-API endpoint (a proxy, a test
server). The SDK's own retries are switched off: retries, backoff and failover
belong to the resilience layer, which needs to see every attempt. SDK errors become
``GenerationError`` with ``retryable`` set for 429, 5xx, 529, timeouts and dropped
connections.

Deliberately not here: PII redaction (security issue) and prompt building.
"""

from __future__ import annotations

import asyncio
import os
import weakref

from specrag.generators.base import GenerationError, Timer, Usage, register

RETRYABLE = {408, 409, 429, 500, 502, 503, 504, 529}


@register("anthropic")
class AnthropicGenerator:
    name = "anthropic"

    def __init__(self, model: str = "claude-sonnet-4-6", api_key_env: str = "ANTHROPIC_API_KEY",
                 base_url: str | None = None, timeout_s: float = 60.0):
        self.model = model or "claude-sonnet-4-6"
        self.api_key_env = api_key_env
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.timeout_s = timeout_s
        # one async client per event loop: its connection pool is bound to the loop that
        # created it, and ``asyncio.run`` per question (CLI, benchmarks) makes new loops
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def warm_up(self) -> "AnthropicGenerator":
        try:
            import anthropic  # noqa: F401
        except ImportError as err:  # pragma: no cover
            raise ImportError("the Anthropic backend needs: pip install anthropic") from err
        if not os.environ.get(self.api_key_env):
            raise GenerationError(f"no Anthropic API key: set the {self.api_key_env} "
                                  "environment variable (or a Space secret)")
        return self

    def _client(self):
        import anthropic

        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            self._clients[loop] = anthropic.AsyncAnthropic(
                api_key=os.environ[self.api_key_env], base_url=self.base_url, max_retries=0,
                timeout=self.timeout_s)
        return self._clients[loop]

    async def stream(self, messages, *, max_tokens: int = 512, temperature: float = 0.0):
        import anthropic

        self.warm_up()
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        convo = [m for m in messages if m["role"] != "system"]
        timer = Timer()
        out_chunks = 0
        # anthropic 2.x has no sampling-temperature argument on messages.stream; the
        # model's default is used (``temperature`` is accepted for the Protocol's sake)
        kwargs = dict(model=self.model, max_tokens=max_tokens, messages=convo)
        if system:
            kwargs["system"] = system
        try:
            async with self._client().messages.stream(**kwargs) as stream:
                async for text in stream.text_stream:
                    if text:
                        timer.token()
                        out_chunks += 1
                        yield text
                final = await stream.get_final_message()
            if final.stop_reason is None:  # the connection closed before message_stop
                raise GenerationError("Anthropic stream ended early (no stop reason)",
                                      retryable=True)
        except anthropic.APIStatusError as err:
            raise GenerationError(f"Anthropic {err.status_code}: {_message(err)}",
                                  retryable=err.status_code in RETRYABLE,
                                  status=err.status_code) from None
        except (anthropic.APIConnectionError, anthropic.APITimeoutError) as err:
            raise GenerationError(f"Anthropic connection failed: {type(err).__name__}",
                                  retryable=True) from None
        except anthropic.APIError as err:  # e.g. a stream cut off or malformed mid-way
            raise GenerationError(f"Anthropic stream failed: {err}", retryable=True) from None
        usage = final.usage
        yield Usage("anthropic", self.model, usage.input_tokens,
                    usage.output_tokens or out_chunks, timer.ttft_ms, timer.total_ms)


def _message(err) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        return str(body.get("error", {}).get("message", body))[:200]
    return str(err)[:200]
