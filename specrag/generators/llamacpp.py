"""Local GGUF models on the CPU through llama-cpp-python (the offline profile's runtime).

We chose llama.cpp for local CPU generation because it runs the packaged GGUF files
exactly as shipped (no re-quantisation, no conversion step) and decodes fastest for
the 1.5B heavy model on two cores; see README "Local models" for the measurements.

``isolation`` says where the model runs:
- ``process`` (the default): in a ``worker.ModelWorker`` child process, so a crash of
  native code ends one answer with a clear error instead of ending the app, and the
  next question starts a fresh worker;
- ``thread``: in this process, in a thread (no worker start-up, nothing to cross a pipe;
  for scripts that want the least overhead and accept that a crash ends them).

``extra_bufts`` (off by default) lets llama.cpp repack weights into extra CPU buffer
types (AMX, AArch64 repacks). On some virtualised Intel Sapphire Rapids hosts the AMX
path faults at the first matrix multiply (a general protection fault in
libggml-cpu.so); with it off, the weights stay in the plain CPU buffer and the
AVX2/AVX-512 kernels run them, measured as fast on this kind of decoding.

Deliberately not here: where the GGUF comes from (``sources``) or prompt templates
(the GGUF's own chat template is used).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from specrag.generators.base import Timer, Usage, register, stream_from_thread
from specrag.generators.confidence import TokenConfidence
from specrag.generators.worker import ModelWorker
from specrag.generators.worker_child import load_llama, prefill, restored_tokens

ISOLATION = ("process", "thread")


@register("llama-cpp")
class LlamaCppGenerator:
    name = "llama-cpp"
    local = True  # runs on this machine: priced at zero, not retried

    def __init__(self, model: str = "", model_path: str | os.PathLike | None = None,
                 n_ctx: int = 4096, threads: int | None = None, prompt_cache: bool = True,
                 isolation: str = "process", extra_bufts: bool = False, role: str = "",
                 logprobs: bool = True, prompt_states_mb: int = 256, states_dir: str = "",
                 states_disk_mb: int = 4096, states_key: str | None = None,
                 lora_path: str = ""):
        if isolation not in ISOLATION:
            raise ValueError(f"llama-cpp isolation must be one of {', '.join(ISOLATION)}, "
                             f"got '{isolation}'")
        self.model = model or (Path(model_path).stem if model_path else "")
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.threads = threads or os.cpu_count() or 2
        # llama.cpp reuses the KV state of the previous prompt's common prefix; benchmarks
        # turn this off so one policy's run cannot pre-compute another's prompt
        self.prompt_cache = prompt_cache
        # ... and, beyond the previous prompt, the states of recent prompts up to this many
        # MB (``prompt_states``): a question about a chunk drafted from before prefills only
        # the question. Off with ``prompt_cache``.
        self.prompt_states_mb = prompt_states_mb if prompt_cache else 0
        # ... and with ``states_dir`` (the draft's: ``DATA_DIR/states``) up to this many MB
        # of them on disk too, encrypted with ``states_key`` (hex) when given
        # (``state_files``): a large collection's warmed chunks, kept across restarts
        self.states_dir = str(states_dir or "")
        self.states_disk_mb = states_disk_mb
        self.states_key = states_key
        self.isolation = isolation
        # a LoRA adapter llama.cpp adds to the model (``models.draft_adapter``; "": none)
        self.lora_path = str(lora_path or "")
        self.role = role  # "draft" / "heavy": names the worker in logs and errors
        self.extra_bufts = extra_bufts
        # record each chosen token's log-probability (``confidence``), < 1 ms a token
        self.logprobs = logprobs
        self._llm = None  # isolation "thread"
        self.worker: ModelWorker | None = None  # isolation "process"
        self._lock = threading.Lock()
        self._waiting = threading.Event()  # (thread isolation) a question waits for the model

    def llama_params(self) -> dict:
        """Keyword arguments for ``llama_cpp.Llama`` (besides the model path)."""
        # both: llama-cpp-python takes every core for prompt processing (n_threads_batch)
        # whatever n_threads says, so a thread setting would only reach decoding
        return {"n_ctx": self.n_ctx, "n_threads": self.threads, "n_threads_batch": self.threads,
                "n_batch": 512, "use_extra_bufts": self.extra_bufts,
                "prompt_states_mb": self.prompt_states_mb, "states_dir": self.states_dir,
                "states_disk_mb": self.states_disk_mb, "states_key": self.states_key,
                "lora_path": self.lora_path}

    def warm_up(self) -> "LlamaCppGenerator":
        # loaded already: no lock, so that a question is not held up behind a warming
        # prefill holding it, and can stop that prefill instead (``prefill``)
        loaded = self.worker.pid is not None if self.worker is not None else self._llm is not None
        if loaded:
            return self
        with self._lock:
            if self.isolation == "process":
                if self.worker is None:
                    _require_llama_cpp(load=False)  # native code loads in the worker only
                    self.worker = ModelWorker(str(self.model_path), self.llama_params(),
                                              label=f"{self.role} {self.model}".strip())
                self.worker.start()
            elif self._llm is None:
                _require_llama_cpp()
                self._llm = load_llama(str(self.model_path), self.llama_params())
        return self

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        self.warm_up()
        produce = self._in_worker if self.isolation == "process" else self._in_thread
        request = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                   "reset": not self.prompt_cache, "logprobs": self.logprobs}
        async for item in stream_from_thread(lambda stop: produce(request, stop)):
            yield item

    def _in_worker(self, request: dict, stop: threading.Event):
        for kind, payload in self.worker.generate(request, stop):
            if kind == "delta":
                yield payload
            else:
                yield Usage("llama-cpp", self.model, **payload)

    def _in_thread(self, request: dict, stop: threading.Event):
        self._waiting.set()  # a prefill in flight gives way (``prefill``)
        with self._lock:
            self._waiting.clear()
            if request["reset"]:
                self._llm.reset()
            timer = Timer()
            out = 0
            conf = TokenConfidence() if request["logprobs"] else None
            restored = restored_tokens(self._llm)
            chunks = self._llm.create_chat_completion(
                messages=request["messages"], max_tokens=request["max_tokens"],
                temperature=request["temperature"], stream=True,
                logits_processor=[conf] if conf else None)
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
                        timer.total_ms, cancelled=stop.is_set(),
                        logprobs=tuple(conf.logprobs) if conf else (),
                        state_tokens=restored_tokens(self._llm) - restored)

    def prefill(self, messages: list[dict], fill: float = 1.0,
                epoch: str | None = None) -> dict | None:
        """Evaluate ``messages`` only to keep the prompt's state for later questions that
        start the same way (``pipeline.warm_states``), unless a stored state holds it, the
        store is over ``fill`` of its budget, or the store's states ``epoch`` has passed:
        ``{"outcome": "stored" | "held" | "full" | "stale", "entries", "bytes",
        "budget_bytes"}``, or None when this model keeps no states (``prompt_states_mb`` 0,
        the prompt cache off)."""
        if self.prompt_states_mb <= 0:
            return None
        self.warm_up()
        request = {"messages": messages, "fill": fill, "epoch": epoch}
        if self.worker is not None:
            return self.worker.prefill(request)
        with self._lock:
            return prefill(self._llm, request, self._waiting.is_set)

    def count_tokens(self, text: str) -> int:
        self.warm_up()
        if self.worker is not None:
            return self.worker.tokenize(text)
        return len(self._llm.tokenize(text.encode(), add_bos=False))

    def close(self) -> None:
        """End the worker process, or free the in-process model (``thread`` isolation);
        the next call loads it again."""
        if self.worker is not None:
            self.worker.close()
        with self._lock:
            llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()


def _require_llama_cpp(load: bool = True):
    import importlib.util

    hint = "local GGUF models need llama-cpp-python: pip install llama-cpp-python==0.3.36"
    if not load:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ImportError(hint)
        return None
    try:
        from llama_cpp import Llama
    except ImportError as err:
        raise ImportError(hint) from err
    return Llama
