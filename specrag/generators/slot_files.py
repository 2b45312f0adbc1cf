"""Warmed draft prompts kept on disk by llama.cpp's server engine: its slot save/restore.

A warmed prompt (system prompt and one chunk, ``pipeline.warm_states``) lives in the
server's prompt cache in host memory, which a restart empties. ``SlotFiles`` keeps each
one on disk too: after the warming request, the slot that served it is saved
(``POST /slots/ID?action=save``, the engine writes the file under its
``slot_save_path``); when a later process warms the same prompt, the file is restored
into a slot first (``action=restore``, ~1 ms for ~400 tokens), and the warming request,
sent to that slot, finds it in place and evaluates nothing. The engine moves each restored slot
into its prompt cache when the next request arrives (``cache_idle_slots``), so one
process restores many more prompts than it has slots.

Files are named by a digest of the prompt, one folder per model file, context size and
adapter (``state_folders.model_folder``), kept to ``budget_mb`` by dropping the least
recently used, and deleted with the rest of the states when chunks leave the store
(``state_folders.invalidate``, a new epoch).

Deliberately not here: choosing what to warm (``pipeline.warm_states``), the process
(``llama_server``), and encryption: the engine writes these files in clear, so with
``security.encrypt`` on they are not written at all (``factory``) and a restart warms
again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import httpx

from specrag.generators.state_folders import claim, model_folder, prune_others

BUDGET_MB = 4096  # ~5 MB per warmed 0.5B prompt of ~400 tokens: some 800 chunks


def prompt_key(messages: list[dict]) -> str:
    """The file name (without ``.bin``) of a prompt's saved slot."""
    text = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class SlotFiles:
    """One model's folder of saved slots, and the two engine calls that use it."""

    def __init__(self, root: str | os.PathLike, model_path: str | os.PathLike,
                 params: dict, budget_mb: int = BUDGET_MB, timeout_s: float = 60.0):
        self.root = Path(root)
        self.model_path, self.params = model_path, params
        self.budget = budget_mb * 2**20
        self.timeout_s = timeout_s

    @property
    def folder(self) -> Path:
        """This model's folder (read from the model file when asked: building a generator
        touches no file, its model may not be resolved yet)."""
        return model_folder(self.root, self.model_path, self.params)

    @property
    def save_path(self) -> str:
        """The engine's ``slot_save_path``: it joins names to it as strings, hence the slash."""
        return str(self.folder) + os.sep

    def prepare(self) -> None:
        """Make the folder (recording its model) and delete those of changed models."""
        claim(self.folder, self.model_path, self.params)
        prune_others(self.root, self.folder)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.bin"

    def has(self, key: str) -> bool:
        return self.path(key).is_file()

    def used_bytes(self) -> int:
        return sum(_size(p) for p in self._files())

    def _files(self) -> list[Path]:
        try:
            return [p for p in self.folder.iterdir() if p.suffix == ".bin"]
        except OSError:
            return []

    def restore(self, url: str, key: str) -> int | None:
        """Load a saved prompt into an idle slot: its id, or None when the engine could
        not (every slot busy, a file of another build) and the prompt is evaluated instead."""
        try:
            slot = _least_recent(httpx.get(f"{url}/slots", timeout=self.timeout_s).json())
            if slot is None:
                return None
            resp = httpx.post(f"{url}/slots/{slot}?action=restore",
                              json={"filename": f"{key}.bin"}, timeout=self.timeout_s)
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
        if resp.status_code != 200:
            return None
        try:
            os.utime(self.path(key))  # recently used: kept longest
        except OSError:
            pass
        return slot

    def save(self, url: str, key: str, tokens: int) -> bool:
        """Save the slot that served the latest request, the warming's (it runs while no
        question is in flight), when it holds ``tokens`` prompt tokens as that request
        did (else a question came between, and nothing is saved: its text stays off
        disk); then keep the folder within budget."""
        try:
            slots = httpx.get(f"{url}/slots", timeout=self.timeout_s).json()
            served = [s for s in slots if "id_task" in s and not s.get("is_processing")]
            if not served:
                return False
            latest = max(served, key=lambda s: s["id_task"])
            if latest.get("n_prompt_tokens") != tokens:
                return False
            resp = httpx.post(f"{url}/slots/{latest['id']}?action=save",
                              json={"filename": f"{key}.bin"}, timeout=self.timeout_s)
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return False
        self.prune()
        return resp.status_code == 200

    def prune(self) -> None:
        """Drop the least recently used files while the folder is over budget."""
        files = sorted(self._files(), key=_mtime)
        total = sum(_size(p) for p in files)
        while files and total > self.budget:
            victim = files.pop(0)
            total -= _size(victim)
            victim.unlink(missing_ok=True)


def _least_recent(slots: list[dict]) -> int | None:
    """The idle slot used longest ago (never used first). Not the latest one: the engine
    moves an idle slot's prompt to its cache only when the next request arrives, so the
    latest slot may hold the one prompt the cache does not have yet."""
    idle = [s for s in slots if not s.get("is_processing")]
    if not idle:
        return None
    return min(idle, key=lambda s: s.get("id_task", -1))["id"]


# a file may vanish meanwhile (a delete in the store invalidates every state)
def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
