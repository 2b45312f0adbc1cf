"""Time to first token and decode speed of a local GGUF model through llama.cpp.

``specrag bench llm-speed MODEL.gguf [...]`` builds the draft prompt for three
HaluEval-QA passages (about 430-450 prompt tokens), runs it through the model's server
(``llama-server``: llama.cpp's server engine, as the app runs it) without the prompt
cache, generates 64 tokens and prints load time, first-token time and decode tokens/s
(best of three runs). Which ``xllamacpp`` build runs is whichever is installed, so the
same command compares the prebuilt wheel with a build of one's own.

``--shapes`` (``shapes()``) times the first token of the draft prompt as it is served,
in three shapes: whole chunks with nothing cached, whole chunks after another question
(llama.cpp keeps the previous prompt, so only the shared system prefix is reused), and
chunks cut to ``draft_words`` about the question (``prompts.cut_for``) after another
question: two questions over different passages alternate, so no run reuses more than
the prefix every question shares. A fourth shape is the served default: another question
about the same passages came earlier, then one about other passages, and the passages'
state comes from the server's prompt cache; the first three run on one slot with no
prompt cache. Median
of ``runs`` per shape, ratios to the first.

Deliberately not here: answer quality (``bench e2e``, ``bench prompts``).
"""

from __future__ import annotations

import asyncio
import time

from specrag.generators.llama_server import LlamaServerGenerator
from specrag.pipeline.prompts import build_messages, cut_for
from specrag.types import Chunk

PASSAGES = [
    "The Oberoi family is an Indian family that is famous for its involvement in hotels, "
    "namely through The Oberoi Group.The Oberoi Group is a hotel company with its head "
    "office in Delhi.",
    "Allison Beth \"Allie\" Goertz (born March 2, 1991) is an American musician. Goertz is "
    "known for her satirical songs based on various pop culture topics. Her videos are "
    "posted on YouTube under the name of Cossbysweater." * 3,
    "Arthur's Magazine (1844-1846) was an American literary periodical published in "
    "Philadelphia in the 19th century.First for Women is a woman's magazine published by "
    "Bauer Media Group in the USA." * 3,
]
QUESTION = "The Oberoi family is part of a hotel company that has a head office in what city?"


def measure(path: str, threads: int = 2, new_tokens: int = 64, runs: int = 3) -> dict:
    """Best of ``runs`` through the model's server, as the app serves the model."""
    chunks = [Chunk(f"c{i}", "d", f"doc{i}.txt", p, i, 0, len(p), "h", "v")
              for i, p in enumerate(PASSAGES)]
    messages = build_messages(QUESTION, chunks, "draft")
    t0 = time.perf_counter()
    gen = LlamaServerGenerator(model_path=path, threads=threads, prompt_cache=False,
                               role="bench").warm_up()
    load_s = time.perf_counter() - t0

    async def once():
        start, first, n, usage = time.perf_counter(), None, 0, None
        async for item in gen.stream(messages, max_tokens=new_tokens, temperature=0.0):
            if isinstance(item, str):
                first = first or time.perf_counter() - start
                n += 1
            else:
                usage = item
        return first, n, time.perf_counter() - start, usage

    best = None
    try:
        for _ in range(runs):  # the prompt cache is off: every run prefills the whole prompt
            first, n, total, usage = asyncio.run(once())
            run = {"model": str(path).rsplit("/", 1)[-1], "runtime": "llama-server",
                   "prompt_tokens": usage.input_tokens,
                   "load_s": round(load_s, 2), "ttft_s": round(first, 3),
                   "decode_tok_s": round((n - 1) / max(1e-9, total - first), 1)}
            best = run if best is None or run["ttft_s"] < best["ttft_s"] else best
    finally:
        gen.close()
    return best


OTHER = ("Allison Beth Goertz is an American musician known for satirical songs. " * 4,
         "Arthur's Magazine was an American literary periodical published in Philadelphia. " * 4,
         "First for Women is a woman's magazine published by Bauer Media Group in the USA. " * 4)
OTHER_QUESTION = "Which magazine was published in Philadelphia?"
SAME_PASSAGES = "Under what name does Allie Goertz post her videos?"


def shapes(path: str, threads: int = 2, words: int = 60, runs: int = 5) -> dict:
    """First-token time of the served draft prompt: whole/no cache, whole/prefix cached,
    cut to ``words``/prefix cached (see the module docstring)."""
    import statistics

    def chunks(texts):
        return [Chunk(f"c{i}", "d", f"doc{i}.txt", p, i, 0, len(p), "h", "v")
                for i, p in enumerate(texts)]

    mine, other = chunks(PASSAGES), chunks(OTHER)
    # (prompt, the previous question's prompt, prompt cache, prompt states MB)
    prompts = {"whole, nothing cached": (build_messages(QUESTION, mine), None, False, 0),
               "whole, prefix cached": (build_messages(QUESTION, mine),
                                        build_messages(OTHER_QUESTION, other), True, 0),
               f"cut to {words} words, prefix cached": (
                   build_messages(QUESTION, cut_for(QUESTION, mine, words)),
                   build_messages(OTHER_QUESTION, cut_for(OTHER_QUESTION, other, words)), True,
                   0),
               # the served default: these passages were asked about before, then others
               "whole, passages' state stored": (
                   build_messages(QUESTION, mine), (build_messages(SAME_PASSAGES, mine),
                                                   build_messages(OTHER_QUESTION, other)),
                   True, 256)}
    out = {}
    for name, (msgs, before, cache, states) in prompts.items():
        # one slot: a question finds only what the previous one left, plus the cache
        gen = LlamaServerGenerator(model_path=path, threads=threads, prompt_cache=cache,
                                   parallel=1, cache_ram_mb=states, role="bench").warm_up()

        async def first_token(m):
            start, tokens = time.perf_counter(), None
            async for item in gen.stream(m, max_tokens=2, temperature=0.0):
                if isinstance(item, str) and tokens is None:
                    tokens = time.perf_counter() - start
                elif not isinstance(item, str):
                    out.setdefault(name, {})["prompt_tokens"] = item.input_tokens
            return tokens

        try:
            times = []
            for _ in range(runs):
                for earlier in (before if isinstance(before, tuple) else [before]):
                    if earlier is not None:  # the previous questions' prompts
                        asyncio.run(first_token(earlier))
                times.append(asyncio.run(first_token(msgs)))
        finally:
            gen.close()
        out[name]["ttft_s"] = round(statistics.median(times), 3)
    base = next(iter(out.values()))["ttft_s"]
    for v in out.values():
        v["vs_first"] = round(v["ttft_s"] / base, 3)
    return out
