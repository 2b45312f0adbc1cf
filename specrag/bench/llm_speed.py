"""Time to first token and decode speed of a local GGUF model through llama.cpp.

``python -m specrag.bench.llm_speed MODEL.gguf [...]`` builds the draft prompt for three
HaluEval-QA passages (about 430-450 prompt tokens), resets the prompt cache, generates
64 tokens and prints first-token time and decode tokens/s (best of two runs).

Deliberately not here: answer quality (``bench e2e``).
"""

from __future__ import annotations

import sys
import time

from ..prompts import build_messages
from ..types import Chunk

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


def measure(path: str, threads: int = 2, new_tokens: int = 64) -> dict:
    from llama_cpp import Llama

    chunks = [Chunk(f"c{i}", "d", f"doc{i}.txt", p, i, 0, len(p), "h", "v")
              for i, p in enumerate(PASSAGES)]
    messages = build_messages(QUESTION, chunks, "draft")
    llm = Llama(model_path=path, n_ctx=4096, n_threads=threads, use_extra_bufts=False, verbose=False)
    best = None
    for _ in range(2):
        llm.reset()  # no prompt-prefix reuse between runs
        start, first, n = time.perf_counter(), None, 0
        for chunk in llm.create_chat_completion(messages=messages, max_tokens=new_tokens,
                                                temperature=0, stream=True):
            if chunk["choices"][0]["delta"].get("content"):
                first = first or time.perf_counter() - start
                n += 1
        total = time.perf_counter() - start
        run = {"model": path.rsplit("/", 1)[-1], "prompt_tokens": llm.n_tokens - n,
               "ttft_s": round(first, 2), "decode_tok_s": round((n - 1) / (total - first), 1)}
        best = run if best is None or run["ttft_s"] < best["ttft_s"] else best
    return best


if __name__ == "__main__":
    for model in sys.argv[1:]:
        print(measure(model))
