"""The child's side of a model worker: load one llama.cpp model, answer over a pipe.

``python -m specrag.generators.worker_child FD`` is started by ``worker.ModelWorker``
with one end of a socket pair as file descriptor ``FD``. Messages are
``(op, request_id, payload)`` tuples: the parent sends ``load`` (model path and
``Llama`` parameters) once, then ``generate``, ``tokenize``, ``prefill``, ``cancel`` and
``close``; the child answers ``ready`` or ``error`` to the load, then ``delta`` items and
one ``usage`` (or ``error``) per generation, ``tokens`` per tokenize and ``states`` per
prefill. Between tokens it
looks for a ``cancel`` of the running request. When the pipe closes (the parent died)
it exits.

``load_llama`` also serves the in-process (``thread``) mode of ``llamacpp``.

Deliberately not here: restarts, queueing, error wording (``worker``, the parent side).
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from specrag.generators.confidence import TokenConfidence

# -- loading -----------------------------------------------------------------------------
_LOAD_LOCK = threading.Lock()


def load_llama(model_path: str, params: dict):
    """``llama_cpp.Llama(model_path, **params)``, where ``params`` may also hold
    ``use_extra_bufts`` and ``prompt_states_mb`` (> 0: a ``StatefulLlama`` keeping that
    many MB of prompt states, ``prompt_states``), and with it ``states_dir`` (the store's
    states folder, whose epoch it follows), ``states_disk_mb`` (MB kept there,
    ``state_files``) and ``states_key`` (the encryption key, or None).

    llama.cpp's model parameters have ``use_extra_bufts`` (weight repacking into extra
    CPU buffer types, AMX among them), but ``Llama`` offers no argument for it: it fills
    ``llama_model_default_params()`` itself. So for the length of this one construction
    that function hands back defaults with our value set; the lock keeps two loads in one
    process from seeing each other's value.
    """
    params = dict(params)
    extra = params.pop("use_extra_bufts", None)
    states_mb = params.pop("prompt_states_mb", 0)
    lora = params.pop("lora_path", "") or ""
    # an adapter changes every state: its states live in a folder of their own
    files = _state_files(model_path, {**params, "lora_path": lora}, states_mb, params.pop("states_dir", ""),
                         params.pop("states_disk_mb", 0), params.pop("states_key", None))
    import llama_cpp.llama_cpp as low
    from llama_cpp import Llama

    if states_mb > 0:
        from specrag.generators.prompt_states import PromptStates, StatefulLlama

        Llama = functools.partial(StatefulLlama,
                                  states=PromptStates(states_mb * 2**20, files=files))
    if extra is None:
        return with_adapter(Llama(model_path=model_path, verbose=False, **params), lora)
    with _LOAD_LOCK:
        original = low.llama_model_default_params

        def defaults():
            p = original()
            p.use_extra_bufts = bool(extra)
            return p

        low.llama_model_default_params = defaults
        try:
            llm = Llama(model_path=model_path, verbose=False, **params)
        finally:
            low.llama_model_default_params = original
    return with_adapter(llm, lora)


def with_adapter(llm, lora_path: str):
    """``llm`` with the LoRA adapter at ``lora_path`` (none when empty) set on its context.

    Not ``Llama(lora_path=...)``: that also turns memory mapping off (from the days when
    llama.cpp merged an adapter into the weights), so the whole model would be read into
    memory; llama.cpp adds an adapter at run time now, beside mapped weights."""
    if not lora_path:
        return llm
    import ctypes

    import llama_cpp.llama_cpp as low

    adapter = low.llama_adapter_lora_init(llm._model.model, str(lora_path).encode("utf-8"))
    if not adapter:
        llm.close()
        raise RuntimeError(f"llama.cpp could not load the LoRA adapter {lora_path} for "
                           f"{Path(llm.model_path).name} (another base model?)")
    llm._stack.callback(lambda: low.llama_adapter_lora_free(adapter))
    adapters = (low.llama_adapter_lora_p_ctypes * 1)(adapter)
    if low.llama_set_adapters_lora(llm._ctx.ctx, adapters, 1, (ctypes.c_float * 1)(1.0)):
        llm.close()
        raise RuntimeError(f"llama.cpp could not set the LoRA adapter {lora_path}")
    return llm


def _state_files(model_path: str, params: dict, states_mb: int, root: str, disk_mb: int, key):
    """The model's ``StateFiles`` under ``root`` (None without a folder or without states
    in memory); with ``disk_mb`` 0 it keeps no files but still follows the store's epoch."""
    if not root or states_mb <= 0:
        return None
    from specrag.generators.state_files import StateFiles
    from specrag.generators.state_folders import model_folder, prune_others

    cipher = None
    if key:
        from specrag.security.crypto import Cipher

        cipher = Cipher(bytes.fromhex(key))
    try:
        folder = model_folder(root, model_path, params)
        for name in prune_others(root, folder):
            print(f"specrag: deleted the prompt states of a model changed or unused ({name})",
                  file=sys.stderr)
        return StateFiles(root, folder, disk_mb * 2**20, cipher, (model_path, params)).load()
    except OSError as err:  # a read-only or missing data folder: states in memory only
        print(f"specrag: prompt states stay in memory: {err}", file=sys.stderr)
        return None


# -- the child ---------------------------------------------------------------------------
def serve(conn) -> None:
    """The child's loop: load the model, then answer requests until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        _, _, spec = conn.recv()
    except (EOFError, OSError):
        return  # the parent went away before it said what to load
    try:
        llm = load_llama(spec["model_path"], spec["params"])
    except BaseException as err:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", 0, f"{type(err).__name__}: {err}"[:500]))
        return
    conn.send(("ready", 0, {"n_ctx": llm.n_ctx()}))
    while True:
        try:
            op, rid, payload = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        try:
            if op == "close":
                return
            if op == "interrupt":
                continue  # it has stopped a prefill already, or came after one ended
            if op == "tokenize":
                conn.send(("tokens", rid, len(llm.tokenize(payload.encode(), add_bos=False))))
            elif op == "prefill":
                # a request waiting (a question's) stops the prefill
                conn.send(("states", rid, prefill(llm, payload, lambda: conn.poll(0),
                                                  in_child=True)))
            elif op == "generate":
                if not _generate(conn, llm, rid, payload):
                    return
        except (EOFError, OSError, BrokenPipeError):
            return
        except Exception as err:  # noqa: BLE001 - one request failed; the model is fine
            conn.send(("error", rid, f"{type(err).__name__}: {err}"[:500]))


def _generate(conn, llm, rid: int, req: dict) -> bool:
    """Stream one completion; False when the parent went away meanwhile."""
    if req.get("reset"):
        llm.reset()
    t0 = time.perf_counter()
    first = None
    out = 0
    cancelled = False
    conf = TokenConfidence() if req.get("logprobs") else None
    restored = restored_tokens(llm)
    chunks = llm.create_chat_completion(messages=req["messages"], max_tokens=req["max_tokens"],
                                        temperature=req["temperature"], stream=True,
                                        logits_processor=[conf] if conf else None)
    for chunk in chunks:
        text = chunk["choices"][0]["delta"].get("content")
        if text:
            first = first or time.perf_counter()
            out += 1
            conn.send(("delta", rid, text))
        if _cancel_requested(conn, rid):
            cancelled = True
            break
    if cancelled:
        chunks.close()
    now = time.perf_counter()
    conn.send(("usage", rid, {
        # the context holds prompt + generated tokens once generation stops
        "input_tokens": max(0, llm.n_tokens - out), "output_tokens": out,
        "ttft_ms": ((first or now) - t0) * 1000, "total_ms": (now - t0) * 1000,
        "cancelled": cancelled, "logprobs": tuple(conf.logprobs) if conf else (),
        "state_tokens": restored_tokens(llm) - restored}))
    return True


def prefill(llm, request: dict, interrupt=None, in_child: bool = False) -> dict | None:
    """``StatefulLlama.prefill`` of ``request["messages"]`` (up to ``request["fill"]`` of
    the store, stopped when ``interrupt()``): its outcome and the store's size after; None
    without prompt states."""
    states = getattr(llm, "states", None)
    if states is None:
        return None
    quiet, level = logging.getLogger("llama-cpp-python"), None
    if interrupt is not None and in_child:
        # llama.cpp logs the cells it drops after a stop as an error ("decode: removing
        # memory module entries"): expected here, and a failure still raises. Only in the
        # worker process, where nothing else runs meanwhile
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
    try:
        outcome = llm.prefill(request["messages"], request.get("fill", 1.0),
                              request.get("epoch"), interrupt)
    finally:
        if level is not None:
            quiet.setLevel(level)
    used, budget = states.usage()
    return {"outcome": outcome, "entries": max(len(states), len(states.files or ())),
            "bytes": used, "budget_bytes": budget}


def restored_tokens(llm) -> int:
    """Prompt tokens restored from stored states so far (0 without ``prompt_states``)."""
    states = getattr(llm, "states", None)
    return states.restored_tokens if states is not None else 0


def _cancel_requested(conn, rid: int) -> bool:
    while conn.poll(0):
        op, got, _ = conn.recv()  # EOFError here: the parent is gone, the loop ends
        if op == "cancel" and got == rid:
            return True
        if op == "close":
            raise EOFError
    return False


if __name__ == "__main__":  # ``python -m specrag.generators.worker_child FD``
    serve(Connection(int(sys.argv[1])))
