"""The child process that runs one GGUF model in llama.cpp's own server engine (xllamacpp).

``python -m specrag.generators.llama_server_child CONFIG_JSON`` loads the model into
``xllamacpp.Server`` (llama.cpp's C++ server: OpenAI-compatible chat completions,
continuous batching over ``parallel`` slots, the prompt cache in host memory), which
listens on a free loopback port, prints ``ready URL`` on stdout and then lives until
its stdin closes. The parent holds that pipe, so a parent that dies, however it dies,
takes its model server with it; a native crash here ends only this process
(``llama_server`` starts another on the next request).

Deliberately not here: starting, watching and restarting the process, and talking to
the server (``llama_server``); the wheel has no compiler step and no AVX-512/AMX code
paths, which is why this runtime is the default (README "Local models").
"""

from __future__ import annotations

import json
import os
import sys

# CONFIG keys -> what they set on ``xllamacpp.CommonParams``
# (n_batch, n_ubatch: prompt tokens per scheduling step / per compute pass; 0: llama.cpp's)
DEFAULTS = {"model_path": "", "n_ctx": 4096, "parallel": 4, "threads": 0,
            "cache_ram_mb": 1024, "lora_path": "", "verbosity": 1, "n_batch": 0,
            "n_ubatch": 0, "slot_save_path": ""}


def params(config: dict):
    import xllamacpp  # the runtime itself: only this process loads it

    c = {**DEFAULTS, **config}
    p = xllamacpp.CommonParams()
    p.model.path = str(c["model_path"])
    p.n_parallel = int(c["parallel"])
    # every slot gets the context one request had before (slots split the total)
    p.n_ctx = int(c["n_ctx"]) * int(c["parallel"])
    if c["threads"]:
        p.cpuparams.n_threads = int(c["threads"])
        p.cpuparams_batch.n_threads = int(c["threads"])
    if c["n_batch"]:
        p.n_batch = int(c["n_batch"])
    if c["n_ubatch"]:
        p.n_ubatch = int(c["n_ubatch"])
    p.cache_ram_mib = int(c["cache_ram_mb"])
    p.port = 0  # a free port, chosen by the server and read back
    p.hostnames = ["127.0.0.1"]
    p.verbosity = int(c["verbosity"])
    p.endpoint_metrics = True
    if c["slot_save_path"]:  # enables /slots/ID?action=save|restore (``slot_files``)
        p.slot_save_path = str(c["slot_save_path"])
    p.cache_idle_slots = True  # an idle slot's prompt moves to the cache before reuse
    # every request takes the least recently used slot and the cache's best prefix for it:
    # by default a slot sharing over half its tokens (the system prompt, with a short chunk)
    # is reused as it is, and the chunk that the cache holds is evaluated again
    p.slot_prompt_similarity = 0.0
    if c["lora_path"]:
        adapter = xllamacpp.CommonAdapterLoraInfo(str(c["lora_path"]), 1.0)
        p.lora_adapters = [adapter]
    return xllamacpp.Server, p


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    server_class, p = params(config)
    server = server_class(p)
    print(f"ready {server.listening_address}", flush=True)
    try:
        while sys.stdin.buffer.read(4096):  # the parent never writes: EOF when it is gone
            pass
    finally:
        # llama.cpp's server threads do not stop on their own: leave without joining them
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
