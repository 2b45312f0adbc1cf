"""Time to first token and decode speed of a local GGUF model through llama.cpp.

``specrag bench llm-speed MODEL.gguf [...] [--isolation thread] [--extra-bufts]``
builds the draft prompt for three HaluEval-QA passages (about 430-450 prompt tokens),
runs it through ``LlamaCppGenerator`` (in its worker process unless ``--isolation
thread``) without the prompt cache, generates 64 tokens and prints load time, first-token
time and decode tokens/s (best of three runs).

Deliberately not here: answer quality (``bench e2e``).
"""

from __future__ import annotations

import time

from specrag.pipeline.prompts import build_messages
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


def measure(path: str, threads: int = 2, new_tokens: int = 64, isolation: str = "process",
            extra_bufts: bool = False, runs: int = 3) -> dict:
    """Best of ``runs`` through ``LlamaCppGenerator``, as the app serves the model."""
    import asyncio

    from specrag.generators.llamacpp import LlamaCppGenerator

    chunks = [Chunk(f"c{i}", "d", f"doc{i}.txt", p, i, 0, len(p), "h", "v")
              for i, p in enumerate(PASSAGES)]
    messages = build_messages(QUESTION, chunks, "draft")
    t0 = time.perf_counter()
    gen = LlamaCppGenerator(model_path=path, threads=threads, prompt_cache=False,
                            isolation=isolation, extra_bufts=extra_bufts).warm_up()
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
            run = {"model": str(path).rsplit("/", 1)[-1], "isolation": isolation,
                   "extra_bufts": extra_bufts, "prompt_tokens": usage.input_tokens,
                   "load_s": round(load_s, 2), "ttft_s": round(first, 3),
                   "decode_tok_s": round((n - 1) / max(1e-9, total - first), 1)}
            best = run if best is None or run["ttft_s"] < best["ttft_s"] else best
    finally:
        gen.close()
    return best
