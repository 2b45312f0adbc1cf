"""Local GGUF models in llama.cpp's own server engine, reached like any OpenAI-compatible server.

``llama-server`` is the default local runtime. Each model file runs in a child process
(``llama_server_child``: the prebuilt ``xllamacpp`` wheel, no compiler at install) that
serves llama.cpp's C++ server on a loopback port: continuous batching over ``parallel``
slots, so several users draft at once, and its prompt cache in host memory
(``cache_ram_mb``), so a question about a chunk prefilled before (a warmed collection,
``pipeline.warm_states``, or an earlier question) evaluates only the question; warmed
prompts are saved as slot files too (``slot_files``), so a restart restores them instead
of evaluating them again, and a new states epoch (chunks left the store) starts a new
process, so no cache keeps deleted text. The tiers
talk to it through ``openai_compat``, the same code that talks to vLLM, Ollama or a
llama.cpp server on another machine: pointing ``generation.draft`` at ``openai:MODEL``
there is the whole scale-out story.

``ServerProcess`` starts the child on first use, and again on the next request after it
died (a native crash ends one answer with one line, never the app); there is one process
per role, model file and options (``servers()`` lists them), so a crash of the draft's
server never takes the heavy tier's with it. A generation's ``Usage`` says how many prompt tokens the cache held
(``state_tokens``) and the chosen tokens' log-probabilities (``logprobs``).

Deliberately not here: the process's own code (``llama_server_child``), prompts, and
retries (a local model is not retried: ``resilience``).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import httpx

from specrag.generators.base import GenerationError, Usage, register
from specrag.generators.openai_compat import OpenAICompatGenerator
from specrag.generators.slot_files import BUDGET_MB, SlotFiles, prompt_key
from specrag.generators.state_folders import read_epoch

log = logging.getLogger(__name__)

_SERVERS: dict[str, "ServerProcess"] = {}
_SERVERS_LOCK = threading.Lock()


def default_parallel(cores: int | None = None) -> int:
    """Slots for one model: two per core, 2 to 8 (on 2 cores, 4 users draft at once)."""
    return max(2, min(8, 2 * (cores or os.cpu_count() or 2)))


class ServerProcess:
    """One model server child: started on demand, restarted after it died."""

    def __init__(self, config: dict, log_path: Path | None = None, start_timeout_s: float = 300,
                 label: str = "", states_root: str | os.PathLike | None = None):
        self.config = config
        # the store's states epoch: a new one (chunks left the store) means a new process,
        # so no prompt cache keeps the text of deleted chunks
        self.states_root = Path(states_root) if states_root else None
        self.epoch: str | None = None
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.label = label or Path(config["model_path"]).stem
        self.url = ""
        self.restarts = 0  # starts after the first
        self.in_flight = 0  # generations streaming now
        self._proc: subprocess.Popen | None = None
        self._started = False
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        return self.in_flight > 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def ended(self, wait_s: float = 1.0) -> str:
        """How the process ended ("killed by SIGKILL", "exit 1"), "" while it runs; waits
        ``wait_s`` for a process whose connection just dropped to be reaped."""
        proc = self._proc
        if proc is None:
            return "not started"
        try:
            code = proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            return ""
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit {code}"

    def ensure(self) -> str:
        """The server's base URL, starting its process first when it is not running."""
        with self._lock:
            if self.alive() and self.url and not self._stale():
                return self.url
            if self.alive():
                log.info("chunks left the store: the %s model server starts again, so its "
                         "prompt cache forgets them", self.label)
                self.close()
            elif self._proc is not None:
                log.warning("the %s model server ended (%s): starting it again", self.label,
                            self.ended(0))
            self.restarts += self._started
            self._start()
            self._started = True
            return self.url

    def _stale(self) -> bool:
        if self.states_root is None:
            return False
        now = read_epoch(self.states_root)
        return now is not None and now != self.epoch

    def _start(self) -> None:
        if self.states_root is not None:
            self.epoch = read_epoch(self.states_root)
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        err = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "specrag.generators.llama_server_child",
                 json.dumps(self.config)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err)
        finally:
            if err is not subprocess.DEVNULL:
                err.close()
        line = _read_line(self._proc, self.start_timeout_s)
        if not line.startswith("ready "):
            self.close()
            raise GenerationError(f"the model server for {Path(self.config['model_path']).name} "
                                  f"did not start{self._log_tail()}", retryable=False)
        self.url = line.split(" ", 1)[1].strip()

    def _log_tail(self) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return f": {lines[-1][:300]} (log: {self.log_path})" if lines else ""

    def close(self) -> None:
        proc, self._proc, self.url = self._proc, None, ""
        if proc is not None and proc.poll() is None:
            proc.kill()  # nothing to flush: the server keeps no state we need
            proc.wait(10)


def _read_line(proc: subprocess.Popen, timeout_s: float) -> str:
    """The child's first line of output, "" if it ended or said nothing in time."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return got[0].decode(errors="replace") if got else ""


def shared_server(config: dict, log_dir: Path | None = None, role: str = "",
                  states_root: str | os.PathLike | None = None) -> ServerProcess:
    """The process serving this role's model file with these options."""
    key = json.dumps({"role": role, "states": str(states_root or ""), **config},
                     sort_keys=True)
    with _SERVERS_LOCK:
        if key not in _SERVERS:
            stem = Path(config["model_path"]).stem
            name = f"llama-server-{role or 'model'}-{len(_SERVERS)}.log"
            _SERVERS[key] = ServerProcess(config, (log_dir / name) if log_dir else None,
                                          label=f"{role} {stem}".strip(),
                                          states_root=states_root)
        return _SERVERS[key]


def servers() -> list[ServerProcess]:
    """Every model server process this process has made (running or not)."""
    with _SERVERS_LOCK:
        return list(_SERVERS.values())


@atexit.register
def _close_all() -> None:
    with _SERVERS_LOCK:
        for server in _SERVERS.values():
            server.close()


@register("llama-server")
class LlamaServerGenerator:
    name = "llama-server"
    local = True  # runs on this machine: priced at zero, not retried

    def __init__(self, model: str = "", model_path: str | os.PathLike | None = None,
                 n_ctx: int = 4096, threads: int | None = None, parallel: int = 0,
                 prompt_cache: bool = True, cache_ram_mb: int = 1024, lora_path: str = "",
                 log_dir: str = "", role: str = "", timeout_s: float = 600.0,
                 logprobs: bool = True, n_batch: int = 0, n_ubatch: int = 0,
                 states_dir: str = "", persist_states: bool = True,
                 states_mb: int = BUDGET_MB):
        self.model = model or (Path(model_path).stem if model_path else "")
        self.model_path = model_path
        self.role = role
        # llama.cpp reuses cached prompt prefixes; benchmarks turn this off so one policy's
        # run cannot pre-compute another's prompt
        self.prompt_cache = prompt_cache
        self.config = {"model_path": str(model_path or ""), "n_ctx": n_ctx,
                       "threads": threads or 0, "parallel": parallel or default_parallel(),
                       "cache_ram_mb": cache_ram_mb if prompt_cache else 0,
                       "lora_path": lora_path}
        if n_batch or n_ubatch:  # prompt tokens per step / per pass (0: llama.cpp's own)
            self.config.update(n_batch=n_batch, n_ubatch=n_ubatch)
        # warmed prompts saved as slot files (``slot_files``), restored after a restart
        self.states_dir = states_dir
        self.files = None
        if states_dir and persist_states and prompt_cache and model_path:
            self.files = SlotFiles(states_dir, model_path,
                                   {"n_ctx": n_ctx, "lora_path": lora_path}, states_mb)
        self._live: set[str] = set()  # prompts the running process has (saved or restored)
        self._live_pid: int | None = None
        self.log_dir = Path(log_dir) if log_dir else None
        self.timeout_s = timeout_s
        self.logprobs = logprobs
        self._server: ServerProcess | None = None

    @property
    def server(self) -> ServerProcess:
        if self._server is None:
            if self.log_dir:
                self.log_dir.mkdir(parents=True, exist_ok=True)
            if self.files is not None:  # the model file exists by now: its folder
                self.files.prepare()
                self.config["slot_save_path"] = self.files.save_path
            self._server = shared_server(self.config, self.log_dir, self.role,
                                         self.states_dir or None)
        return self._server

    def warm_up(self) -> "LlamaServerGenerator":
        self.server.ensure()
        return self

    def _client(self, url: str) -> OpenAICompatGenerator:
        extra = {"cache_prompt": self.prompt_cache}
        if self.logprobs:
            extra["logprobs"] = True
        return OpenAICompatGenerator(self.model, f"{url}/v1", api_key_env="",
                                     timeout_s=self.timeout_s, extra_body=extra)

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        server = self.server
        url = await asyncio.to_thread(server.ensure)
        server.in_flight += 1
        try:
            async for item in self._client(url).stream(messages, max_tokens=max_tokens,
                                                       temperature=temperature):
                yield replace(item, backend=self.name) if isinstance(item, Usage) else item
        except GenerationError as err:
            how = await asyncio.to_thread(server.ended)
            if how:  # the process died under us: one line, no retry
                raise GenerationError(f"the {self.role or 'local'} model's server process "
                                      f"ended ({how}); it restarts on the next question",
                                      retryable=False) from err
            raise
        finally:
            server.in_flight -= 1

    def prefill(self, messages: list[dict], fill: float = 1.0,
                epoch: str | None = None) -> dict | None:
        """Evaluate a prompt so its state lands in the server's prompt cache (warming), from
        its slot file when an earlier process saved one; the outcome: "stored" (evaluated
        now), "restored" (from its file), "held" (the cache had it), "full" (the files'
        budget is ``fill`` used), "stale" (chunks left the store since ``epoch``)."""
        if not self.prompt_cache:
            return None
        url = self.server.ensure()
        if epoch is not None and self.states_dir:
            now = read_epoch(self.states_dir)
            if now is not None and now != epoch:
                return {"outcome": "stale", "bytes": 0, "evaluated": 0, "cached": 0}
        files = self.files
        key = prompt_key(messages) if files is not None else ""
        if self._live_pid != self.server.pid:  # a new process: its cache holds nothing yet
            self._live, self._live_pid = set(), self.server.pid
        slot = (files.restore(url, key) if files is not None and key not in self._live
                and files.has(key) else None)
        restored = slot is not None
        timings = self._evaluate(url, messages, slot)
        evaluated = int(timings.get("prompt_n", 0))
        outcome = "stored" if evaluated > 8 else ("restored" if restored else "held")
        if files is not None and outcome == "stored":
            if files.used_bytes() >= fill * files.budget:
                outcome = "full"
            elif files.save(url, key, evaluated + int(timings.get("cache_n", 0))):
                self._live.add(key)
        if restored:
            self._live.add(key)
        return {"outcome": outcome, "bytes": files.used_bytes() if files else 0,
                "evaluated": evaluated, "cached": int(timings.get("cache_n", 0))}

    def _evaluate(self, url: str, messages: list[dict], slot: int | None = None) -> dict:
        body = {"model": self.model, "messages": messages, "max_tokens": 1, "temperature": 0,
                "cache_prompt": True}
        if slot is not None:  # the slot a file was restored into: the prompt is there
            body["id_slot"] = slot
        try:
            resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=self.timeout_s)
            resp.raise_for_status()
        except httpx.HTTPError as err:
            raise GenerationError(f"warming a prompt failed: {type(err).__name__}",
                                  retryable=False) from None
        return resp.json().get("timings") or {}

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
