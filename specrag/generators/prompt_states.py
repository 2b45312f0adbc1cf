"""Prompt states kept between questions: the KV cells of recent prompts, restored when a
new prompt starts the same way, so only its new part is prefilled.

llama.cpp reuses the *previous* prompt's common prefix by itself (``prompt_cache``). The
draft prompt is system prompt, then one chunk (``retrieval.draft_k`` 1), then the
question: everything before the question is the same whenever the same chunk is drafted
from, but the previous prompt is rarely that chunk's. ``PromptStates`` keeps, in a
byte-budgeted least-recently-used store inside the model's process, the state of
sequence 0 (``llama_state_seq_get_data``: its KV cells, ~12 KB a token for the 0.5B
draft) of recent prompts, keyed by their tokens. ``StatefulLlama.generate`` restores the
stored prompt that shares the longest prefix with the new one when that beats what the
live context already shares, and llama-cpp-python's own prefix match then trims the
cells past the shared part and prefills the rest. The restored cells are the ones the
same tokens produced, so the answer is the same as from a cold prompt (a test checks).

``StatefulLlama.prefill`` evaluates a prompt only to keep its state (warming, before
anyone asks): not when a stored state already holds it, nor once the store is fuller
than asked. It gives way to a question: with ``interrupt`` (a request is waiting),
llama.cpp's abort callback, polled every ``POLL_S`` between the nodes of its compute
graph, stops the evaluation within ~10-20 ms instead of the ~1 s a chunk's prompt takes
on two cores, and the outcome is "interrupted" (llama.cpp drops the cells of the batch
it stopped; nothing is stored).

With ``files`` (``state_files.StateFiles``) the states ``prefill`` keeps (a chunk's
prompt, no question) are also written to disk, and a stored prompt may be restored from
there: more chunks than memory holds stay warm, and across restarts. A question's own
state (its text and the answer's) stays in memory. Each prompt first checks the store's
epoch (``fresh``): when chunks left the store, every state, in memory and on disk, is
forgotten. A disk that fails leaves the states in memory (``broken``).

Deliberately not here: deciding which prompts to prefill (``pipeline.warm_states``),
the files themselves (``state_files``), or one store shared by two models (each worker
has its own).
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections import OrderedDict

import llama_cpp.llama_cpp as low
import numpy as np
from llama_cpp import Llama

POLL_S = 0.01  # how often a prefill asks ``interrupt`` (each ask is a poll of a socket)


class PromptStates:
    """Sequence states of recent prompts, least recently used dropped past ``budget_bytes``.

    A state is stored only when its prompt had at least ``min_new`` tokens that no stored
    state or the live context already held: a prompt that only added a question to a
    stored chunk gives nothing worth its bytes."""

    def __init__(self, budget_bytes: int, min_new: int = 48, files=None):
        self.budget_bytes = int(budget_bytes)
        self.min_new = min_new
        self.files = files  # ``state_files.StateFiles`` or None
        self.broken = False  # the files failed: memory only (and its budget bounds warming)
        self._entries: OrderedDict[int, tuple[np.ndarray, bytes]] = OrderedDict()
        self._next = 0
        self.bytes = 0
        self.restored_tokens = 0  # prompt tokens not prefilled thanks to a restore

    def __len__(self) -> int:
        return len(self._entries)

    def fresh(self) -> bool:
        """False, every state forgotten, when the store invalidated them since the last
        call (``state_folders.invalidate``: chunks left the store)."""
        try:
            if self.files is None or self.files.fresh():
                return True
        except Exception as err:  # noqa: BLE001 - the disk, not the question, failed
            self._broke(err)
            return True
        self._entries.clear()
        self.bytes = 0
        return False

    def usage(self) -> tuple[int, int]:
        """(bytes, budget) of the tier that bounds warming: the files when they keep any."""
        if self.files is not None and self.files.budget_bytes > 0 and not self.broken:
            return self.files.bytes, self.files.budget_bytes
        return self.bytes, self.budget_bytes

    def holds(self, key: int | str | None) -> bool:
        """Whether ``longest``'s key is still stored (a file may be evicted by another process)."""
        if isinstance(key, str):
            return self.files is not None and self.files.holds(key)
        return key is not None

    def longest(self, tokens) -> tuple[int, int | str | None]:
        """(shared prefix length, key) of the stored prompt sharing most with ``tokens``:
        an int for one in memory, a file name for one only on disk."""
        q = np.asarray(tokens, dtype=np.intc)
        best, best_key = 0, None
        for key, (stored, _) in self._entries.items():
            if min(len(stored), len(q)) > best and (n := shared_prefix(stored, q)) > best:
                best, best_key = n, key
        if self.files is not None:
            n, name = self.files.longest(q, shared_prefix)
            if n > best:
                best, best_key = n, name
        return best, best_key

    def add(self, tokens: np.ndarray, state: bytes, durable: bool = False) -> None:
        """Keep a state in memory, and with ``durable`` (a warmed chunk's) on disk too."""
        if durable and self.files is not None and not self.broken:
            try:
                self.files.put(tokens, state)
            except Exception as err:  # noqa: BLE001 - a full or read-only disk: memory still has it
                self._broke(err)
        if len(state) > self.budget_bytes:
            return
        # a stored prompt the new one extends is covered by it
        for key, (stored, old) in list(self._entries.items()):
            if len(stored) <= len(tokens) and np.array_equal(stored, tokens[:len(stored)]):
                del self._entries[key]
                self.bytes -= len(old)
        self._entries[self._next] = (tokens, state)
        self._next += 1
        self.bytes += len(state)
        while self.bytes > self.budget_bytes and self._entries:
            _, (_, old) = self._entries.popitem(last=False)
            self.bytes -= len(old)

    def _broke(self, err: Exception) -> None:
        if not self.broken:
            print(f"specrag: prompt states stay in memory: {type(err).__name__}: {err}",
                  file=sys.stderr)
        self.broken = True

    def get(self, key: int | str) -> tuple[np.ndarray, bytes] | None:
        """The stored (tokens, state), or None when its file is gone (``longest``'s key)."""
        if isinstance(key, str):
            return self.files.get(key) if self.files is not None else None
        self._entries.move_to_end(key)
        return self._entries[key]


def shared_prefix(a, b) -> int:
    """How many tokens two token sequences share from the start."""
    m = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:m]) != np.asarray(b[:m]))
    return int(differ[0]) if len(differ) else m


class StatefulLlama(Llama):
    """``llama_cpp.Llama`` that restores and keeps prompt states (``PromptStates``)."""

    def __init__(self, *args, states: PromptStates, **kwargs):
        super().__init__(*args, **kwargs)
        self.states = states
        self._prefill: dict | None = None  # set while ``prefill`` runs: its fill and outcome

    def prefill(self, messages: list[dict], fill: float = 1.0, epoch: str | None = None,
                interrupt=None) -> str:
        """Evaluate a chat prompt only to keep its state: "stored"; "held" when a stored
        state already holds all but its last ``min_new`` tokens (nothing evaluated); "full"
        when the store is over ``fill`` of its budget; "stale" when ``epoch`` (the one the
        caller listed its chunks under) is no longer the store's: chunks left it since, and
        this one may be among them (nothing evaluated either); "interrupted" when
        ``interrupt()`` turned true while the prompt was evaluated (nothing stored)."""
        self._prefill = {"fill": fill, "outcome": "stored", "epoch": epoch,
                         "interrupt": interrupt, "polled": 0.0}
        if interrupt is not None:
            # a local: llama.cpp holds a pointer to it until the ``finally`` below
            abort = low.ggml_abort_callback(self._should_abort)
            low.llama_set_abort_callback(self._ctx.ctx, abort, None)
        try:
            # one token sampled and dropped: the prompt goes through the same chat template
            # and tokenizer as a question's, so its tokens are the ones a question shares
            self.create_chat_completion(messages=messages, max_tokens=1, temperature=0.0)
            return self._prefill["outcome"]
        except RuntimeError:  # "llama_decode returned 2": the callback stopped it
            if self._prefill["outcome"] == "interrupted":
                return "interrupted"
            raise
        finally:
            if interrupt is not None:  # a question's evaluation is never aborted
                low.llama_set_abort_callback(self._ctx.ctx, low.ggml_abort_callback(), None)
            self._prefill = None

    def _should_abort(self, _data) -> bool:
        """llama.cpp's abort callback (from its compute thread, between graph nodes)."""
        p = self._prefill  # installed only while a prefill with ``interrupt`` runs
        if p is None:
            return False
        now = time.monotonic()
        if now - p["polled"] < POLL_S:
            return False
        p["polled"] = now
        try:
            stop = bool(p["interrupt"]())
        except Exception:  # noqa: BLE001 - an exception cannot cross into C: stop instead
            stop = True
        if stop:
            p["outcome"] = "interrupted"
        return stop

    def generate(self, tokens, *args, **kwargs):
        tokens = list(tokens)
        if not self.states.fresh():
            self.n_tokens = 0  # nor may the live context's cells serve a later prompt
        live = shared_prefix(self.input_ids[:self.n_tokens], tokens)
        stored, key = self.states.longest(tokens)
        if self._prefill is not None:
            epoch, files = self._prefill["epoch"], self.states.files
            if epoch is not None and files is not None and files.epoch != epoch:
                self._prefill["outcome"] = "stale"
                return
            if len(tokens) - stored < self.states.min_new and self.states.holds(key):
                self._prefill["outcome"] = "held"
                return
            used, budget = self.states.usage()
            if used >= self._prefill["fill"] * budget:
                self._prefill["outcome"] = "full"
                return
        got = self.states.get(key) if key is not None and stored > live else None
        if got is None:
            stored = min(stored, live)  # a file gone meanwhile: prefill as without it
        else:
            try:
                self._restore(*got)
                self.states.restored_tokens += stored
            except RuntimeError:  # start cold: the context was cleared before the restore
                self.n_tokens, stored = 0, 0
                if isinstance(key, str):  # a file llama.cpp refuses (another version) goes
                    self.states.files.remove(key)
        keep = len(tokens) - max(live, stored) >= self.states.min_new
        try:
            yield from super().generate(tokens, *args, **kwargs)
        finally:
            # after the answer, off the time to its first token; the cells then hold the
            # prompt and the answer's tokens, and a later prompt uses their shared prefix
            if keep and not (self._prefill and self._prefill["outcome"] == "interrupted"):
                self.keep_state(durable=self._prefill is not None)

    def keep_state(self, durable: bool = False) -> None:
        n = self.n_tokens
        if n == 0:
            return
        size = low.llama_state_seq_get_size(self._ctx.ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        got = low.llama_state_seq_get_data(self._ctx.ctx, buf, size, 0)
        self.states.add(self.input_ids[:n].copy(), bytes(buf[:got]), durable)

    def _restore(self, tokens: np.ndarray, state: bytes) -> None:
        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        self._ctx.kv_cache_seq_rm(-1, 0, -1)
        if low.llama_state_seq_set_data(self._ctx.ctx, buf, len(state), 0) != len(state):
            raise RuntimeError("llama.cpp refused a stored prompt state")
        self.input_ids[:len(tokens)] = tokens
        self.n_tokens = len(tokens)
        # the logits are not in the state: llama-cpp-python's prefix match re-evaluates
        # at least the last prompt token before sampling
        self._requires_eval = True
