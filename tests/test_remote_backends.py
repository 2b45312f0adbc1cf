"""Anthropic (through the real SDK) and OpenAI-compatible backends against a local server."""

import asyncio
import time

import pytest

from specrag.generators.anthropic_backend import AnthropicGenerator
from specrag.generators.base import GenerationError, collect
from specrag.generators.openai_compat import OpenAICompatGenerator
from specrag.pipeline.prompts import build_messages
from specrag.types import Chunk

CHUNKS = [Chunk("c1", "d1", "leave.md", "Staff get 25 days of annual leave. Extra text.", 0, 0, 10,
                "h", "v")]
MESSAGES = build_messages("How much leave?", CHUNKS, "heavy")


def test_anthropic_streams_text_and_usage(api, claude):
    pieces = []

    async def run():
        async for item in claude.stream(MESSAGES, max_tokens=64):
            pieces.append(item)

    asyncio.run(run())
    usage = pieces[-1]
    text = "".join(pieces[:-1])
    assert text == "Staff get 25 days of annual leave. [1]"
    assert len(pieces) - 1 == len(text.split())  # streamed word by word
    assert usage.backend == "anthropic" and usage.model == "claude-sonnet-4-6"
    assert usage.output_tokens == len(text.split()) and usage.input_tokens > 20
    assert 0 < usage.ttft_ms <= usage.total_ms
    req = api.requests[-1]
    assert req["path"] == "/v1/messages" and req["body"]["stream"] is True
    auth = req["headers"].get("x-api-key") or req["headers"].get("authorization", "")
    assert auth.endswith("sk-test-123")
    assert "not instructions" in req["body"]["system"]  # system prompt sent separately
    assert [m["role"] for m in req["body"]["messages"]] == ["user"]


def test_anthropic_plain_call_through_the_sdk(api, monkeypatch):
    import anthropic

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    client = anthropic.Anthropic(base_url=api.url, max_retries=0)
    msg = client.messages.create(model="claude-haiku-4-5", max_tokens=32, messages=MESSAGES[1:])
    assert msg.content[0].text.endswith("[1]") and msg.usage.output_tokens > 3


@pytest.mark.parametrize("fault,retryable,status", [("429", True, 429), ("529", True, 529),
                                                     ("500", True, 500)])
def test_anthropic_errors_are_classified(api, claude, fault, retryable, status):
    api.faults.append(fault)
    with pytest.raises(GenerationError) as err:
        asyncio.run(collect(claude, MESSAGES))
    assert err.value.retryable is retryable and err.value.status == status


def test_anthropic_cut_stream_is_a_retryable_error(api, claude):
    api.faults.append("cut")
    with pytest.raises(GenerationError) as err:
        asyncio.run(collect(claude, MESSAGES))
    assert err.value.retryable


def test_anthropic_missing_key_is_clear(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    gen = AnthropicGenerator(api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(GenerationError, match="NO_SUCH_KEY_VAR"):
        gen.warm_up()


def test_openai_compatible_stream(api):
    gen = OpenAICompatGenerator("qwen-test", base_url=api.url + "/v1")
    text, usage = asyncio.run(collect(gen, MESSAGES, max_tokens=64))
    assert text == "Staff get 25 days of annual leave. [1]"
    assert usage.output_tokens == 8 and usage.input_tokens > 20 and usage.model == "qwen-test"
    assert api.requests[-1]["path"] == "/v1/chat/completions"


@pytest.mark.parametrize("fault", ["malformed", "529"])
def test_openai_faults(api, fault):
    api.faults.append(fault)
    gen = OpenAICompatGenerator("m", base_url=api.url + "/v1")
    with pytest.raises(GenerationError) as err:
        asyncio.run(collect(gen, MESSAGES))
    assert err.value.retryable


def test_cancelling_a_stream_closes_it(api, claude):
    api.token_delay_s = 0.05

    async def run():
        got = []
        agen = claude.stream(MESSAGES, max_tokens=64)
        async for item in agen:
            got.append(item)
            if len(got) == 2:
                break
        await agen.aclose()
        return got

    got = asyncio.run(run())
    assert len(got) == 2 and all(isinstance(g, str) for g in got)
    # the server saw the client go away mid-stream: aclose() closed the connection
    deadline = time.time() + 5
    while api.requests[-1]["ended"] is None and time.time() < deadline:
        time.sleep(0.02)
    assert api.requests[-1]["ended"] == "client closed"


def test_openai_cut_stream_is_an_error_not_a_short_answer(api):
    api.faults.append("cut")
    gen = OpenAICompatGenerator("m", base_url=api.url + "/v1")
    with pytest.raises(GenerationError, match="ended early") as err:
        asyncio.run(collect(gen, MESSAGES))
    assert err.value.retryable


def test_anthropic_generator_works_across_event_loops(api, claude):
    # the CLI and benchmarks run each question in its own asyncio.run()
    for _ in range(3):
        text, usage = asyncio.run(collect(claude, MESSAGES))
        assert text.endswith("[1]") and usage.output_tokens > 0
    assert len(api.requests) == 3 and all(r["fault"] is None for r in api.requests)
