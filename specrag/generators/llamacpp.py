"""Local GGUF models on the CPU through llama-cpp-python (the offline profile's runtime).

We chose llama.cpp for local CPU generation because it runs the packaged GGUF files
exactly as shipped (no re-quantisation, no conversion step) and decodes fastest for
the 1.5B heavy model on two cores; see README "Local models" for the measurements.
One ``Llama`` instance is loaded per generator in ``warm_up`` and shared; a lock
serialises generations because a llama.cpp context is not thread-safe.

Deliberately not here: where the GGUF comes from (``sources``) or prompt templates
(the GGUF's own chat template is used).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .base import Timer, Usage, register, stream_from_thread


@register("llama-cpp")
class LlamaCppGenerator:
    name = "llama-cpp"

    def __init__(self, model: str = "", model_path: str | os.PathLike | None = None,
                 n_ctx: int = 4096, threads: int | None = None, prompt_cache: bool = True, **_):
        self.model = model or (Path(model_path).stem if model_path else "")
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.threads = threads or os.cpu_count() or 2
        # llama.cpp reuses the KV state of the previous prompt's common prefix; benchmarks
        # turn this off so one policy's run cannot pre-compute another's prompt
        self.prompt_cache = prompt_cache
        self._llm = None
        self._lock = threading.Lock()

    def warm_up(self) -> "LlamaCppGenerator":
        with self._lock:
            if self._llm is None:
                try:
                    from llama_cpp import Llama
                except ImportError as err:
                    raise ImportError("local GGUF models need llama-cpp-python: "
                                      "pip install llama-cpp-python==0.3.36") from err
                self._llm = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx,
                                  n_threads=self.threads, n_batch=512, verbose=False)
        return self

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        self.warm_up()

        def produce(stop: threading.Event):
            with self._lock:
                if not self.prompt_cache:
                    self._llm.reset()
                timer = Timer()
                out = 0
                chunks = self._llm.create_chat_completion(
                    messages=messages, max_tokens=max_tokens, temperature=temperature,
                    stream=True)
                for chunk in chunks:
                    text = chunk["choices"][0]["delta"].get("content")
                    if text:
                        timer.token()
                        out += 1
                        yield text
                    if stop.is_set():
                        break
                # the context holds prompt + generated tokens once generation stops
                prompt = max(0, self._llm.n_tokens - out)
                yield Usage("llama-cpp", self.model, prompt, out, timer.ttft_ms,
                            timer.total_ms, cancelled=stop.is_set())

        async for item in stream_from_thread(produce):
            yield item

    def count_tokens(self, text: str) -> int:
        self.warm_up()
        return len(self._llm.tokenize(text.encode(), add_bos=False))
