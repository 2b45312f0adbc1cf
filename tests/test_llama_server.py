"""The default local runtime: the shipped 0.5B draft in llama.cpp's server engine (xllamacpp),
in a child process, reached through the OpenAI-compatible backend."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from specrag.generators.base import GenerationError, Usage, collect
from specrag.generators.factory import from_settings
from specrag.generators.llama_server import LlamaServerGenerator, default_parallel, servers
from specrag.pipeline.prompts import build_messages
from specrag.types import Chunk
from tests.support.env import make_settings

pytestmark = pytest.mark.slow
pytest.importorskip("xllamacpp", reason="xllamacpp is in requirements.txt")

ASK = "How many days of paid annual leave do employees get?"
LEAVE = ("Annual leave. Employees receive 25 days of paid annual leave per calendar year. "
         "Up to five unused days may be carried over to the first quarter of the next year. ")


def chunk(i: int, text: str) -> Chunk:
    return Chunk(f"c{i}", "d", "leave.md", text, i, 0, len(text), f"h{i}", "v1")


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    # three slots: a server of its own, not one an earlier test's prompts are cached in
    s = make_settings(tmp_path_factory.mktemp("llama-server"), **{"generation.parallel": 3})
    gen = from_settings("draft", s)
    gen.warm_up()
    yield gen._inner
    gen.close()


def test_streams_text_then_usage_from_its_own_process(draft):
    text, usage = asyncio.run(collect(draft, build_messages(ASK, [chunk(0, LEAVE)]),
                                      max_tokens=24))
    assert "25" in text
    assert usage.backend == "llama-server" and usage.output_tokens > 0 and usage.input_tokens > 50
    assert len(usage.logprobs) >= 1 and all(lp <= 0 for lp in usage.logprobs)
    assert draft.server.pid != os.getpid() and draft.server.alive()


def test_a_warmed_prompt_prefills_only_the_question(draft):
    doc = chunk(1, "Sick leave. Sick leave is unlimited, with a doctor's note after three "
                   "days of absence. Managers are told on the first morning. " * 2)
    first = draft.prefill(build_messages("", [doc]))
    assert first["outcome"] == "stored" and first["evaluated"] > 50
    other = draft.prefill(build_messages("", [chunk(2, "Expenses need receipts. " * 20)]))
    assert other["outcome"] == "stored"  # the slot moved on: chunk 1 lives in the cache
    _, usage = asyncio.run(collect(draft, build_messages("When is a note needed?", [doc]),
                                   max_tokens=8))
    # the documents came from the cache: only the question and the turn's tail were evaluated
    assert usage.state_tokens >= usage.input_tokens - 30 and usage.state_tokens > 100


def test_parallel_slots_serve_several_users_at_once(draft):
    """Each request's first token comes before any of them is done: batched, not queued."""
    assert draft.config["parallel"] == 3 and default_parallel(cores=2) == 4

    async def one(i):
        stamps = []
        async for item in draft.stream(build_messages(f"Question {i}: how many days?",
                                                      [chunk(10 + i, LEAVE * 2)]),
                                       max_tokens=24):
            stamps.append(time.perf_counter())
            if isinstance(item, Usage):
                return stamps[0], stamps[-1]

    async def both():
        return await asyncio.gather(one(1), one(2))

    (first_a, done_a), (first_b, done_b) = asyncio.run(both())
    assert first_b < done_a and first_a < done_b


def test_kill_9_mid_answer_is_one_line_and_the_next_question_is_answered(draft):
    server = draft.server
    pid, restarts = server.pid, server.restarts

    async def kill_mid_stream():
        got = 0
        async for item in draft.stream(build_messages("Write about leave.", [chunk(3, LEAVE)]),
                                       max_tokens=64):
            got += 1
            if got == 2:
                os.kill(pid, signal.SIGKILL)

    with pytest.raises(GenerationError) as err:
        asyncio.run(kill_mid_stream())
    assert "killed by SIGKILL" in str(err.value) and "\n" not in str(err.value)
    text, _ = asyncio.run(collect(draft, build_messages(ASK, [chunk(0, LEAVE)]), max_tokens=24))
    assert "25" in text and server.pid != pid and server.restarts == restarts + 1
    assert server in servers()


def test_a_file_that_is_no_model_fails_with_a_clear_message(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(4096))
    gen = LlamaServerGenerator(model_path=bad, log_dir=str(tmp_path / "logs"), role="test")
    with pytest.raises(GenerationError, match="model server for broken.gguf did not start"):
        gen.warm_up()
    assert not gen.server.alive()


def test_the_warmer_fills_the_servers_cache_so_first_questions_prefill_only_themselves(
        draft, tmp_path):
    from types import SimpleNamespace

    from specrag.pipeline.warm_states import StateWarmer

    texts = [f"Policy {n}. " + f"Rule {n} says staff in team {n} file reports weekly. " * 12
             for n in ("alpha", "bravo", "charlie")]
    chunks = [chunk(20 + i, t) for i, t in enumerate(texts)]
    store = SimpleNamespace(visible_chunks=lambda collection, limit=None: chunks[:limit])
    engine = SimpleNamespace(settings=make_settings(tmp_path), draft=draft,
                             retriever=SimpleNamespace(store=store))
    report = StateWarmer(engine, max_chunks=8).warm("handbook")
    assert report["warmed"] == 3 and report["skipped"] == ""
    for c in chunks:  # each chunk's first question: the documents come from the cache
        _, usage = asyncio.run(collect(draft, build_messages("How often are reports filed?",
                                                             [c]), max_tokens=4))
        assert usage.state_tokens > 0.8 * usage.input_tokens - 30
