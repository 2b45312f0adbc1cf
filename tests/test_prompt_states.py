"""Prompt states: a question about a chunk drafted from before prefills only the question,
and answers exactly as from a cold prompt (real llama.cpp, the shipped 0.5B GGUF); the
store's prefix lookup and byte budget (no model)."""

import asyncio

import numpy as np
import pytest

from specrag import sources
from specrag.generators.base import collect
from specrag.pipeline.prompts import build_messages
from specrag.types import Chunk
from tests.support.env import make_settings

LEAVE = ("Annual leave. Every employee receives 25 days of paid annual leave per calendar "
         "year. Up to five unused days may be carried over to the next year, and must be "
         "taken by the end of March. Requests go to your manager at least two weeks ahead.")
EXPENSES = ("Expenses. Claims are filed in the finance portal within 30 days with receipts. "
            "Any single claim above EUR 500 needs the approval of the Finance Director. "
            "Travel is booked through the company's travel desk, economy class by default.")


def chunk(i: int, text: str) -> Chunk:
    return Chunk(f"c{i}", f"d{i}", f"doc{i}.md", text, 0, 0, len(text), "h", "v")


# -- the store (no model) ------------------------------------------------------------------
def test_the_longest_stored_prefix_is_found_and_the_budget_drops_the_oldest():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is in requirements.txt")
    from specrag.generators.prompt_states import PromptStates

    states = PromptStates(budget_bytes=250)
    states.add(np.array([1, 2, 3, 4], dtype=np.intc), b"a" * 100)
    states.add(np.array([1, 2, 9, 9, 9], dtype=np.intc), b"b" * 100)
    assert states.longest([1, 2, 3, 4, 5, 6])[0] == 4
    assert states.longest([1, 2, 9, 9, 7])[0] == 4
    assert states.longest([7, 1, 2])[0] == 0
    # a prompt that extends a stored one replaces it: its state covers the shorter one
    states.add(np.array([1, 2, 3, 4, 5, 6], dtype=np.intc), b"c" * 100)
    assert len(states) == 2 and states.bytes == 200
    # past the budget the least recently used goes: [1 2 9 ...] was used last, so it stays
    key = states.longest([1, 2, 9])[1]
    states.get(key)
    states.add(np.array([5, 5, 5], dtype=np.intc), b"d" * 100)
    assert states.bytes <= 250 and len(states) == 2
    assert states.longest([1, 2, 3, 4, 5, 6])[0] == 2  # only the shared [1, 2] is left
    assert states.longest([5, 5, 5])[0] == 3
    # a state larger than the whole budget is not kept
    states.add(np.array([8], dtype=np.intc), b"e" * 300)
    assert states.longest([8])[0] == 0


# -- the real model ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is in requirements.txt")
    return sources.resolve("draft", make_settings(tmp_path_factory.mktemp("states")))


def ask(gen, question: str, text: str, i: int):
    return asyncio.run(collect(gen, build_messages(question, [chunk(i, text)]), max_tokens=24))


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_a_second_question_about_a_chunk_restores_its_state_and_answers_the_same(
        model_path, isolation):
    from specrag.generators.llamacpp import LlamaCppGenerator

    cold = LlamaCppGenerator(model_path=model_path, threads=2, prompt_cache=False,
                             isolation=isolation).warm_up()
    warm = LlamaCppGenerator(model_path=model_path, threads=2, isolation=isolation).warm_up()
    try:
        q1, q2 = "How many days of paid leave are there?", "Who must approve a large claim?"
        questions = [(q1, LEAVE, 0), (q2, EXPENSES, 1), ("When must carried-over days be "
                                                        "taken?", LEAVE, 0),
                     ("Where are claims filed?", EXPENSES, 1)]
        got = [ask(warm, *q) for q in questions]
        want = [ask(cold, *q) for q in questions]
        # the same answers, token for token, with and without restored states
        assert [text for text, _ in got] == [text for text, _ in want]
        first, second, third, fourth = (usage for _, usage in got)
        # nothing was stored for the first prompt of each chunk; the second question about
        # each chunk had everything up to its question restored (the previous prompt was
        # the other chunk's, so llama.cpp's own one-prompt cache could not have helped)
        assert first.state_tokens == 0 and second.state_tokens == 0
        for usage in (third, fourth):
            assert usage.state_tokens > 0.8 * usage.input_tokens - 30
            assert usage.state_tokens < usage.input_tokens
        assert all(u.state_tokens == 0 for _, u in want)
    finally:
        cold.close()
        warm.close()


@pytest.mark.slow
def test_prompt_states_follow_the_prompt_cache_and_their_budget_option(model_path):
    from specrag.generators.factory import backend_options
    from specrag.generators.llamacpp import LlamaCppGenerator

    assert LlamaCppGenerator(model_path=model_path).llama_params()["prompt_states_mb"] == 256
    # benchmarks turn the prompt cache off: then no states either
    assert LlamaCppGenerator(model_path=model_path, prompt_cache=False,
                             prompt_states_mb=64).llama_params()["prompt_states_mb"] == 0
    # the budget is a llama-cpp option in settings, checked like the others
    settings = make_settings("/tmp", **{"generation.options": {"llama-cpp": {
        "prompt_states_mb": 32}}})
    assert backend_options("llama-cpp", settings, "draft")["prompt_states_mb"] == 32
    gen = LlamaCppGenerator(model_path=model_path, threads=2, isolation="thread",
                            prompt_states_mb=1).warm_up()
    try:
        ask(gen, "How many days of paid leave are there?", LEAVE, 0)
        # one prompt's state of the 0.5B draft is a few MB: over a 1 MB budget, none is kept
        assert len(gen._llm.states) == 0
    finally:
        gen.close()


@pytest.mark.slow
def test_a_warmed_chunk_is_restored_from_disk_after_a_restart_until_the_store_invalidates_it(
        model_path, tmp_path):
    from specrag.generators.llamacpp import LlamaCppGenerator
    from specrag.generators.state_folders import invalidate

    def draft(**kw):
        return LlamaCppGenerator(model_path=model_path, threads=2, states_dir=str(tmp_path),
                                 **kw).warm_up()

    first = draft()
    try:
        assert first.prefill(build_messages("", [chunk(0, LEAVE)], "draft"))["outcome"] == "stored"
        # a question's own state (its text, the answer's) stays in memory, never on disk
        ask(first, "Where are claims filed?", EXPENSES, 1)
        # a warming that listed its chunks before the store changed stores nothing more
        gone = first.prefill(build_messages("", [chunk(1, EXPENSES)], "draft"), epoch="old")
        assert gone["outcome"] == "stale"
    finally:
        first.close()
    assert len(list(tmp_path.rglob("*.kv"))) == 1
    cold = draft(prompt_cache=False)
    again = draft()  # a new worker process: only the files carry the state
    try:
        question = "How many days of paid leave are there?"
        text, usage = ask(again, question, LEAVE, 0)
        assert usage.state_tokens > 0.8 * usage.input_tokens - 30
        assert text == ask(cold, question, LEAVE, 0)[0]  # the same answer as from a cold prompt
        invalidate(tmp_path)  # the store deleted chunks: nothing may be restored any more
        text, usage = ask(again, question, LEAVE, 0)
        assert usage.state_tokens == 0 and text == ask(cold, question, LEAVE, 0)[0]
    finally:
        cold.close()
        again.close()


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_a_question_stops_a_warming_prefill_and_answers_as_from_a_cold_prompt(
        model_path, isolation, tmp_path):
    """A chunk's prompt takes about a second to prefill on two cores: a question that comes
    meanwhile stops it instead of waiting for it, nothing half-evaluated is kept, and the
    same chunk warms fully afterwards."""
    import threading
    import time

    from specrag.generators.llamacpp import LlamaCppGenerator

    gen = LlamaCppGenerator(model_path=model_path, threads=2, isolation=isolation,
                            states_dir=str(tmp_path)).warm_up()
    cold = LlamaCppGenerator(model_path=model_path, threads=2, prompt_cache=False,
                             isolation=isolation).warm_up()
    long_chunk = chunk(5, " ".join([LEAVE, EXPENSES] * 6))  # ~600 tokens: several batches
    warm_prompt = build_messages("", [long_chunk], "draft")
    outcome = {}
    try:
        ask(gen, "Where are claims filed?", EXPENSES, 1)  # the system prompt is cached
        runs = 0
        while outcome.get("outcome") != "interrupted" and runs < 5:
            runs += 1
            started = threading.Event()

            def warm():
                started.set()
                outcome.update(gen.prefill(warm_prompt))

            t = threading.Thread(target=warm)
            t.start()
            started.wait()
            time.sleep(0.3)  # well inside the prefill, which takes seconds for 600 tokens
            text, _ = ask(gen, "How many days of paid leave are there?", LEAVE, 0)
            t.join()
            if outcome["outcome"] == "interrupted":
                break
            gen.close()  # it finished first (a fast CPU): start over without its state
            gen = LlamaCppGenerator(model_path=model_path, threads=2, isolation=isolation,
                                    states_dir=str(tmp_path / str(runs))).warm_up()
        assert outcome["outcome"] == "interrupted"
        # nothing half-evaluated was kept, on disk or in memory, and the answer is the cold one
        assert not list(tmp_path.rglob("*.kv"))
        assert text == ask(cold, "How many days of paid leave are there?", LEAVE, 0)[0]
        # the same chunk warms fully once the model is idle, and a question restores it
        assert gen.prefill(warm_prompt)["outcome"] == "stored"
        assert len(list(tmp_path.rglob("*.kv"))) == 1
        ask(gen, "Where are claims filed?", EXPENSES, 1)  # the live context: another chunk
        _, usage = asyncio.run(collect(gen, build_messages("How long?", [long_chunk]),
                                       max_tokens=8))
        assert usage.state_tokens > 0.8 * usage.input_tokens - 30
    finally:
        gen.close()
        cold.close()
