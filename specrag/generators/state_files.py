"""Prompt states on disk: the draft model's warmed chunk prompts outlive memory and restarts.

``PromptStates`` keeps recent prompt states in memory (256 MB: ~128 chunk prompts of the
0.5B draft). ``StateFiles`` is the tier under it: every state the store keeps is also
written here, so a collection of a thousand chunks can be warmed once (``pipeline.
warm_states``) and each first question about any chunk restores its prompt in a few
milliseconds instead of prefilling it (~1 s on two cores), after a restart too.

A state is two files named ``EPOCH-DIGEST``: ``.tok`` (the prompt's token ids, read at
start to index the folder) and ``.kv`` (llama.cpp's sequence state). Both are the
documents' text in another form, so:

- with ``security.encrypt`` on, both are written through ``security.crypto.Cipher``
  (AES-256-GCM, written to a temporary name and renamed: no plaintext copy on disk);
- ``invalidate(root)`` is called by the store whenever chunks leave it (a document
  deleted or replaced, a collection dropped): it writes a new epoch and deletes every
  state. A model process notices the new epoch at its next question (``fresh``), drops
  what it holds in memory as well, and never restores a file of an older epoch, so a
  state written while the deletion ran is not used and is deleted at the next check.

The folder holds at most ``budget_bytes``; the least recently used states go first
(their modification time is touched on use, so the order survives restarts).

Deliberately not here: which prompts to keep (``prompt_states``), which to warm
(``pipeline.warm_states``), and states of another model: each model file has its own
folder (``model_folder``), and llama.cpp refuses a state of another shape anyway.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
from collections import OrderedDict
from pathlib import Path

import numpy as np

EPOCH = "epoch"


def root_for(data_path: str | os.PathLike) -> Path:
    """The store's states folder: ``DATA_DIR/states`` (one epoch for all its models)."""
    return Path(data_path) / "states"


def model_folder(root: str | os.PathLike, model_path: str | os.PathLike, params: dict) -> Path:
    """``root/<digest>``: one folder per model file (path, size, mtime) and context size."""
    st = os.stat(model_path)
    key = f"{os.path.abspath(model_path)}|{st.st_size}|{int(st.st_mtime)}|{params.get('n_ctx')}"
    return Path(root) / hashlib.sha1(key.encode()).hexdigest()[:16]


def read_epoch(root: str | os.PathLike) -> str:
    try:
        return (Path(root) / EPOCH).read_text().strip()
    except OSError:
        return ""


def invalidate(root: str | os.PathLike) -> None:
    """Forget every stored state under ``root``: a new epoch first, then the files."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    _write_atomic(root / EPOCH, uuid.uuid4().hex.encode())
    for folder in root.iterdir():
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


class StateFiles:
    """Prompt states in ``folder`` under ``root``'s epoch, at most ``budget_bytes``."""

    def __init__(self, root: str | os.PathLike, folder: str | os.PathLike, budget_bytes: int,
                 cipher=None):
        self.root = Path(root)
        self.folder = Path(folder)
        self.budget_bytes = int(budget_bytes)
        self.cipher = cipher  # ``security.crypto.Cipher`` or None
        self.epoch = ""
        self._index: OrderedDict[str, np.ndarray] = OrderedDict()  # name -> tokens, LRU first
        self._sizes: dict[str, int] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._index)

    def load(self) -> "StateFiles":
        """Index the folder: states of the current epoch, oldest use first; others deleted."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.epoch = read_epoch(self.root)
        self._index.clear()
        self._sizes.clear()
        self.bytes = 0
        found = []
        for kv in self.folder.glob("*.kv"):
            name = kv.stem
            try:
                if not name.startswith(self.epoch + "-"):
                    raise ValueError("a state of an earlier epoch")
                tokens = np.frombuffer(self._read(kv.with_suffix(".tok")), dtype=np.intc)
                found.append((kv.stat().st_mtime, name, tokens.copy(), kv.stat().st_size))
            except Exception:  # noqa: BLE001 - an older epoch, half written, another key
                self._remove(name)
        for _, name, tokens, size in sorted(found, key=lambda f: f[0]):
            self._index[name] = tokens
            self._sizes[name] = size
            self.bytes += size
        return self

    def fresh(self) -> bool:
        """False (and everything forgotten) when the store invalidated states since."""
        if read_epoch(self.root) == self.epoch:
            return True
        for name in list(self._index):
            self._remove(name)
        self.load()
        return False

    def longest(self, tokens, shared_prefix) -> tuple[int, str | None]:
        """(shared prefix length, name) of the stored prompt sharing most with ``tokens``."""
        best, best_name = 0, None
        for name, stored in self._index.items():
            if min(len(stored), len(tokens)) > best and (n := shared_prefix(stored, tokens)) > best:
                best, best_name = n, name
        return best, best_name

    def get(self, name: str) -> tuple[np.ndarray, bytes] | None:
        """The state ``name``, or None when its file is gone or unreadable (then forgotten)."""
        tokens = self._index.get(name)
        if tokens is None:
            return None
        try:
            state = self._read(self.folder / f"{name}.kv")
            os.utime(self.folder / f"{name}.kv")
        except Exception:  # noqa: BLE001 - deleted meanwhile, or unreadable: a cold prompt
            self._remove(name)
            return None
        self._index.move_to_end(name)
        return tokens, state

    def put(self, tokens: np.ndarray, state: bytes) -> str | None:
        """Keep a state (and drop the stored prompts it extends); None when over budget."""
        if len(state) > self.budget_bytes:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)  # ``invalidate`` removes it
        tokens = np.asarray(tokens, dtype=np.intc)
        for name, stored in list(self._index.items()):
            if len(stored) <= len(tokens) and np.array_equal(stored, tokens[:len(stored)]):
                self._remove(name)
        # keyed with the encryption key: a name must not confirm a guessed text
        salt = self.cipher.key if self.cipher is not None else b""
        name = f"{self.epoch}-{hashlib.sha256(salt + tokens.tobytes()).hexdigest()[:24]}"
        self._write(self.folder / f"{name}.tok", tokens.tobytes())
        size = self._write(self.folder / f"{name}.kv", state)
        self._index[name] = tokens
        self._sizes[name] = size
        self.bytes += size
        while self.bytes > self.budget_bytes and self._index:
            self._remove(next(iter(self._index)))
        return name

    # -- files -------------------------------------------------------------------------
    def _remove(self, name: str) -> None:
        if name in self._index:
            del self._index[name]
            self.bytes -= self._sizes.pop(name, 0)
        for suffix in (".kv", ".tok"):
            try:
                (self.folder / f"{name}{suffix}").unlink()
            except OSError:
                pass

    def _read(self, path: Path) -> bytes:
        data = path.read_bytes()
        if self.cipher is not None:
            data = self.cipher.decrypt(data)
        return data

    def _write(self, path: Path, data: bytes) -> int:
        if self.cipher is not None:
            data = self.cipher.encrypt(data)
        _write_atomic(path, data)
        return len(data)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
