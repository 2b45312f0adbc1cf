"""Prompt states on disk: the draft model's warmed chunk prompts outlive memory and restarts.

``PromptStates`` keeps recent prompt states in memory (256 MB: ~100 chunk prompts of the
0.5B draft). ``StateFiles`` is the tier under it for the states of *warmed* prompts
(system prompt and one chunk, no question: ``StatefulLlama.prefill``), so a collection
of a thousand chunks can be warmed once (``pipeline.warm_states``) and each first
question about any chunk restores its prompt in a few milliseconds instead of
prefilling it (~1 s on two cores), after a restart too. Users' questions and answers
never reach these files: their states stay in memory.

A state is two files named ``EPOCH-NAME``: ``.tok`` (the prompt's token ids, read at
start to index the folder) and ``.kv`` (llama.cpp's sequence state). Both are the
documents' text in another form, so:

- with ``security.encrypt`` on, both are written through ``security.crypto.Cipher``
  (AES-256-GCM, written to a temporary name and renamed: no plaintext copy on disk);
- ``state_folders.invalidate(root)`` is called by the store whenever chunks leave it (a
  document deleted or replaced, a collection dropped): it deletes every state and writes
  a new epoch. A model process notices the new epoch at its next prompt (``fresh``), drops
  what it holds in memory as well, and never restores a file of an older epoch, so a
  state written while the deletion ran is not used and is deleted at the next check. A
  warming started before the deletion carries the epoch it listed its chunks under and
  stops at the first prompt after it (``prefill``'s ``epoch``).

The folder holds at most ``budget_bytes`` (per model file) and leaves ``RESERVE`` bytes of
the disk free; the least recently used states go first (their modification time is
touched on use, so the order survives restarts).

Deliberately not here: which prompts to keep (``prompt_states``), which to warm
(``pipeline.warm_states``), the model folders' lifecycle and the epoch
(``state_folders``), and states of another model: each model file has its own folder
(``state_folders.model_folder``), and llama.cpp refuses a state of another shape anyway.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
from collections import OrderedDict
from pathlib import Path

import numpy as np

from specrag.generators.state_folders import MODEL, claim, read_epoch, write_atomic

RESERVE = 2 * 2**30  # bytes of free disk a state file never takes (Chroma, SQLite need it)

class StateFiles:
    """Prompt states in ``folder`` under ``root``'s epoch, at most ``budget_bytes``."""

    def __init__(self, root: str | os.PathLike, folder: str | os.PathLike, budget_bytes: int,
                 cipher=None, model: tuple[str, dict] | None = None):
        self.root = Path(root)
        self.folder = Path(folder)
        self.budget_bytes = int(budget_bytes)
        self.cipher = cipher  # ``security.crypto.Cipher`` or None
        self.model = model  # (model path, params): recorded in the folder at each load
        self.epoch = ""
        self._index: OrderedDict[str, np.ndarray] = OrderedDict()  # name -> tokens, LRU first
        self._sizes: dict[str, int] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._index)

    def load(self) -> "StateFiles":
        """Index the folder: states of the current epoch, oldest use first, within the
        budget; the rest deleted (older epochs, half-written files, another key)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.model is not None:  # again after ``invalidate`` removed the folder
            try:
                claim(self.folder, *self.model)
            except OSError:  # a record only: the states work without it
                pass
        self.epoch = read_epoch(self.root) or ""
        self._index.clear()
        self._sizes.clear()
        self.bytes = 0
        found = []
        for path in self.folder.iterdir():
            if path.name == MODEL:
                continue
            name = path.name.rsplit(".", 1)[0]
            if path.suffix != ".kv" and not (path.suffix == ".tok"
                                             and path.with_suffix(".kv").exists()):
                _unlink(path)  # a temporary file or a lone .tok left by a killed writer
                continue
            if path.suffix != ".kv":
                continue
            try:
                if not name.startswith(self.epoch + "-"):
                    raise ValueError("a state of an earlier epoch")
                tokens = np.frombuffer(self._read(path.with_suffix(".tok")), dtype=np.intc)
                found.append((path.stat().st_mtime_ns, name, tokens.copy(), path.stat().st_size))
            except Exception:  # noqa: BLE001 - an older epoch, half written, another key
                self.remove(name)
        for _, name, tokens, size in sorted(found, key=lambda f: f[0]):
            self._index[name] = tokens
            self._sizes[name] = size
            self.bytes += size
        self._evict()  # a budget lowered since (0: no files at all)
        return self

    def fresh(self) -> bool:
        """False (and everything forgotten) when the store invalidated states since."""
        epoch = read_epoch(self.root)
        if epoch is None or epoch == self.epoch:
            return True
        for name in list(self._index):
            self.remove(name)
        self.load()
        return False

    def longest(self, tokens, shared_prefix) -> tuple[int, str | None]:
        """(shared prefix length, name) of the stored prompt sharing most with ``tokens``."""
        best, best_name = 0, None
        for name, stored in self._index.items():
            if min(len(stored), len(tokens)) > best and (n := shared_prefix(stored, tokens)) > best:
                best, best_name = n, name
        return best, best_name

    def holds(self, name: str) -> bool:
        """Whether ``name``'s file is still there (another process may have evicted it)."""
        if name in self._index and (self.folder / f"{name}.kv").exists():
            return True
        self.remove(name)
        return False

    def get(self, name: str) -> tuple[np.ndarray, bytes] | None:
        """The state ``name``, or None when its file is gone or unreadable (then forgotten)."""
        tokens = self._index.get(name)
        if tokens is None:
            return None
        try:
            state = self._read(self.folder / f"{name}.kv")
            if not state:
                raise ValueError("an empty state")
        except Exception:  # noqa: BLE001 - deleted meanwhile, or unreadable: a cold prompt
            self.remove(name)
            return None
        try:
            os.utime(self.folder / f"{name}.kv")  # its place in the least-recently-used order
        except OSError:
            pass
        self._index.move_to_end(name)
        return tokens, state

    def put(self, tokens: np.ndarray, state: bytes) -> str | None:
        """Keep a state (and drop the stored prompts it extends); None when it does not
        fit the budget or the disk's free space. OSError when the disk refuses it."""
        if not state or len(state) > self.budget_bytes:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)  # ``invalidate`` removes it
        if shutil.disk_usage(self.folder).free < RESERVE + len(state):
            return None
        tokens = np.asarray(tokens, dtype=np.intc)
        for name, stored in list(self._index.items()):
            if len(stored) <= len(tokens) and np.array_equal(stored, tokens[:len(stored)]):
                self.remove(name)
        # with a key, an HMAC: a file name must not confirm a guessed text
        if self.cipher is not None:
            digest = hmac.new(self.cipher.key, b"state-name" + tokens.tobytes(), "sha256")
        else:
            digest = hashlib.sha256(tokens.tobytes())
        name = f"{self.epoch}-{digest.hexdigest()[:24]}"
        try:
            self._write(self.folder / f"{name}.tok", tokens.tobytes())
            size = self._write(self.folder / f"{name}.kv", state)
        except BaseException:
            self.remove(name)
            raise
        self._index[name] = tokens
        self._sizes[name] = size
        self.bytes += size
        self._evict()
        return name

    # -- files -------------------------------------------------------------------------
    def remove(self, name: str) -> None:
        """Forget ``name`` and delete its files (also when llama.cpp refused the state)."""
        if name in self._index:
            del self._index[name]
            self.bytes -= self._sizes.pop(name, 0)
        for suffix in (".kv", ".tok"):
            _unlink(self.folder / f"{name}{suffix}")

    def _evict(self) -> None:
        while self.bytes > self.budget_bytes and self._index:
            self.remove(next(iter(self._index)))

    def _read(self, path: Path) -> bytes:
        data = path.read_bytes()
        if self.cipher is not None:
            return self.cipher.decrypt(data)
        from specrag.security.crypto import MAGIC

        if data.startswith(MAGIC):  # written with a key, read without one: unusable
            raise ValueError("an encrypted state without a key")
        return data

    def _write(self, path: Path, data: bytes) -> int:
        if self.cipher is not None:
            data = self.cipher.encrypt(data)
        write_atomic(path, data)
        return len(data)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
