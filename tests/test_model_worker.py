"""Local models run in a worker process: a kill -9 fails one answer, never the process
that asked, and the next request is answered (real llama.cpp, the shipped 0.5B GGUF)."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from specrag import sources
from specrag.generators.base import GenerationError, collect
from specrag.generators.llamacpp import LlamaCppGenerator
from specrag.generators.worker import WorkerDied
from specrag.generators.worker_child import load_llama
from tests.support.env import make_settings

pytestmark = pytest.mark.slow
pytest.importorskip("llama_cpp", reason="llama-cpp-python is in requirements.txt")

MESSAGES = [{"role": "user", "content": "Count from one to thirty in words, with commas."}]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return sources.resolve("draft", make_settings(tmp_path_factory.mktemp("worker")))


@pytest.fixture(scope="module")
def gen(model_path):
    g = LlamaCppGenerator(model_path=model_path, threads=2, role="draft").warm_up()
    yield g
    g.close()


def test_generation_runs_in_a_child_process(gen):
    text, usage = asyncio.run(collect(gen, MESSAGES, max_tokens=12))
    assert gen.worker.pid is not None and gen.worker.pid != os.getpid()
    assert "one" in text.lower() and usage.output_tokens > 0 and usage.input_tokens > 10
    assert 0 < usage.ttft_ms <= usage.total_ms and not usage.cancelled


def test_kill_9_mid_answer_fails_that_answer_and_the_next_one_works(gen):
    restarts = gen.worker.restarts
    got = []

    async def kill_after_first_token():
        async for item in gen.stream(MESSAGES, max_tokens=64):
            if isinstance(item, str):
                got.append(item)
                if len(got) == 1:
                    os.kill(gen.worker.pid, signal.SIGKILL)

    with pytest.raises(WorkerDied, match="draft .*killed by SIGKILL while generating") as err:
        asyncio.run(kill_after_first_token())
    assert err.value.retryable and got  # it died mid-answer, after text had streamed
    text, usage = asyncio.run(collect(gen, MESSAGES, max_tokens=8))
    assert "one" in text.lower() and usage.output_tokens > 0
    assert gen.worker.restarts == restarts + 1


def test_a_stream_closed_early_leaves_the_worker_in_step(gen):
    fresh, _ = asyncio.run(collect(gen, MESSAGES, max_tokens=8))

    async def two_tokens_then_leave():
        agen = gen.stream(MESSAGES, max_tokens=64)
        n = 0
        async for item in agen:
            n += isinstance(item, str)
            if n == 2:
                break
        await agen.aclose()

    asyncio.run(two_tokens_then_leave())
    # the next request gets its own answer, not the tail of the abandoned one
    text, usage = asyncio.run(collect(gen, MESSAGES, max_tokens=8))
    assert text == fresh and usage.output_tokens <= 8


def test_a_worker_killed_mid_answer_fails_over_along_the_chain(tmp_path):
    from specrag.resilience.chains import tier_from_settings
    from specrag.testing.mockapi import MockAPI

    with MockAPI() as backup:
        # "buffer": each try's text is held until it finishes, so another backend may
        # take over mid-answer (under "resume" it would have to repeat the same words)
        s = make_settings(tmp_path, **{
            "models.heavy": "manifest:qwen2.5-coder-0.5b-instruct",
            "resilience.heavy_chain": ["llama-cpp", f"openai:backup@{backup.url}/v1"],
            "resilience.after_first_token": "buffer"})
        heavy = tier_from_settings("heavy", s).warm_up()
        worker = heavy.members[0].inner._inner.worker  # the chain's llama.cpp entry

        def kill_mid_answer():
            while not worker.busy:
                time.sleep(0.01)
            time.sleep(0.3)
            os.kill(worker.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_mid_answer, daemon=True)
        killer.start()
        text, usage = asyncio.run(collect(heavy, MESSAGES, max_tokens=64))
        killer.join(5)
        worker.close()
    assert text and usage.backend == "openai" and backup.requests  # the backup answered
    first, second = usage.attempts
    assert first.backend == "llama-cpp" and "killed by SIGKILL" in first.error
    assert second.backend == "openai" and second.outcome == "ok"
    assert heavy.breakers[0].consecutive_failures == 1


def test_closing_a_tier_ends_its_worker_and_spares_the_rest(tmp_path):
    """A tier built for a while (the tune's distilled draft) is closed through its chain:
    the llama.cpp worker process ends; a member whose close fails does not stop that."""
    from specrag.resilience.chains import tier_from_settings
    from specrag.resilience.failover import FallbackGenerator

    class Stuck:
        name, model = "stuck", "m"

        def close(self):
            raise RuntimeError("cannot close")

    s = make_settings(tmp_path, **{"models.draft": "manifest:qwen2.5-coder-0.5b-instruct",
                                   "generation.draft": "llama-cpp"})
    draft = tier_from_settings("draft", s).warm_up()
    worker = draft.members[0].inner._inner.worker
    pid = worker.pid
    assert pid is not None and _alive(pid)
    FallbackGenerator([Stuck(), draft]).close()
    deadline = time.time() + 10
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(pid) and worker.pid is None
    draft.close()  # again: nothing left to close, no error


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_file_that_is_no_model_fails_with_one_line(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(2048))
    gen = LlamaCppGenerator(model_path=bad, role="heavy")
    with pytest.raises(GenerationError, match="heavy broken") as err:
        gen.warm_up()
    assert "\n" not in str(err.value) and gen.worker.pid is None


def test_the_worker_ends_with_the_process_that_started_it(model_path):
    script = ("import sys, time\n"
              "from specrag.generators.llamacpp import LlamaCppGenerator\n"
              f"g = LlamaCppGenerator(model_path={str(model_path)!r}, threads=1).warm_up()\n"
              "print(g.worker.pid, flush=True)\n"
              "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()  # kill -9: no atexit, no cleanup code runs in the parent
        parent.wait(10)
        deadline = time.time() + 10
        while _alive(child) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(child)
    finally:
        parent.kill()


def test_a_script_without_a_main_guard_runs_its_body_once(model_path, tmp_path):
    # the README's three-line scripts have no ``if __name__ == "__main__"``: the worker
    # must not re-run the user's script the way multiprocessing's spawn does
    script = tmp_path / "ask.py"
    script.write_text("import asyncio\n"
                      "from specrag.generators.base import collect\n"
                      "from specrag.generators.llamacpp import LlamaCppGenerator\n"
                      "print('body ran', flush=True)\n"
                      f"g = LlamaCppGenerator(model_path={str(model_path)!r}, threads=1)\n"
                      "msgs = [{'role': 'user', 'content': 'Say hello.'}]\n"
                      "print(repr(asyncio.run(collect(g, msgs, max_tokens=4))[0]))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("body ran") == 1 and out.stdout.splitlines()[-1] != "''"


def test_extra_buffer_types_are_off_by_default_and_reach_llama_cpp(model_path):
    import llama_cpp

    assert LlamaCppGenerator(model_path=model_path).llama_params()["use_extra_bufts"] is False
    llm = load_llama(str(model_path), {"n_ctx": 256, "use_extra_bufts": False})
    assert llm.model_params.use_extra_bufts is False
    # the library's own defaults are untouched afterwards
    assert llama_cpp.llama_model_default_params().use_extra_bufts is True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is dead for our purpose
        return fh.read().split(") ")[-1][0] != "Z"



def test_closing_an_in_process_model_frees_it(model_path):
    gen = LlamaCppGenerator(model_path=model_path, isolation="thread", threads=1).warm_up()
    assert gen._llm is not None
    gen.close()
    assert gen._llm is None
    assert gen.count_tokens("hello there") > 0  # loads again when asked
    gen.close()


def test_each_chosen_token_carries_the_models_log_probability(gen, model_path):
    """The worker and the in-process model both report one log-probability per step (the
    tokens shown plus the end), about the same for the same greedy answer; off is empty."""
    text, usage = asyncio.run(collect(gen, MESSAGES, max_tokens=12))
    assert len(usage.logprobs) >= usage.output_tokens > 0
    assert all(lp <= 0.0 for lp in usage.logprobs) and min(usage.logprobs) > -30
    local = LlamaCppGenerator(model_path=model_path, threads=2, isolation="thread",
                              prompt_cache=False).warm_up()
    try:
        again, same = asyncio.run(collect(local, MESSAGES, max_tokens=12))
        # close, not equal: the worker reuses its cached prompt prefix, and a prefill split
        # differently sums its floats in another order (seen: -0.62 vs -0.59)
        assert again == text and same.logprobs == pytest.approx(usage.logprobs, abs=0.1)
        local.logprobs = False
        _, off = asyncio.run(collect(local, MESSAGES, max_tokens=12))
        assert off.logprobs == ()
    finally:
        local.close()
