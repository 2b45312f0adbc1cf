"""The folders under ``DATA_DIR/states``: one per model file, and the epoch they share.

``root_for`` names the store's states folder; ``model_folder`` gives each model file
(path, size, mtime), context size and LoRA adapter its own folder, and ``claim`` records
in it which model that is, so ``prune_others`` can delete, when a model process starts,
the folders of models that changed since (a collection tuned again overwrites its
distilled draft: a new folder, and the old one would keep up to a budget of dead states)
and those unused for ``IDLE_S``. ``invalidate`` is what the store calls whenever chunks
leave it: every state deleted and a new epoch written, which each model process reads
(``read_epoch``) before it restores a state.

Deliberately not here: the state files themselves and their budget
(``generators.slot_files``), and which prompts are kept (``pipeline.warm_states``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

EPOCH = "epoch"
MODEL = "model.json"  # a model folder's record of the model file it holds states of
IDLE_S = 7 * 86400  # a model folder unused this long is deleted


def root_for(data_path: str | os.PathLike) -> Path:
    """The store's states folder: ``DATA_DIR/states`` (one epoch for all its models)."""
    return Path(data_path) / "states"


def model_folder(root: str | os.PathLike, model_path: str | os.PathLike, params: dict) -> Path:
    """``root/<digest>``: one folder per model file (path, size, mtime), context size and
    LoRA adapter file (``lora_path``, the same three)."""
    key = f"{_file_key(model_path)}|{params.get('n_ctx')}"
    if params.get("lora_path"):
        key += f"|{_file_key(params['lora_path'])}"
    return Path(root) / hashlib.sha1(key.encode()).hexdigest()[:16]


def _file_key(path: str | os.PathLike) -> str:
    st = os.stat(path)
    return f"{os.path.abspath(path)}|{st.st_size}|{int(st.st_mtime)}"


def claim(folder: str | os.PathLike, model_path: str | os.PathLike, params: dict) -> None:
    """Record in ``folder`` which model file (and context size) its states belong to."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"model": os.path.abspath(model_path), "n_ctx": params.get("n_ctx")}
    if params.get("lora_path"):
        record["lora_path"] = os.path.abspath(params["lora_path"])
    if _record(folder) != record:
        write_atomic(folder / MODEL, json.dumps(record).encode())


def prune_others(root: str | os.PathLike, keep: str | os.PathLike,
                 idle_s: float = IDLE_S) -> list[str]:
    """Delete the model folders under ``root`` other than ``keep`` whose model file changed
    since (a file of that path and another size or time: its folder would be another now),
    or that no process used for ``idle_s`` (a model gone, or not run for a week; a model
    file this process cannot see now, on a drive not mounted, say, waits that long too);
    their names. A recent folder of an unchanged model stays: another process may draft
    with it."""
    root, keep = Path(root), Path(keep)
    gone = []
    for folder in (root.iterdir() if root.is_dir() else ()):
        if not folder.is_dir() or folder.name == keep.name:
            continue
        if time.time() - _last_use(folder) > idle_s or _changed(root, folder):
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder.name)
    return gone


def _changed(root: Path, folder: Path) -> bool:
    """Whether the model file ``folder`` records is now another file (False when it cannot
    tell: no record, or the file not there to look at)."""
    record = _record(folder)
    if record is None:
        return False
    try:
        return model_folder(root, record["model"], record).name != folder.name
    except (OSError, KeyError, TypeError):
        return False


def _record(folder: Path) -> dict | None:
    try:
        record = json.loads((folder / MODEL).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _last_use(folder: Path) -> float:
    """The newest modification time in ``folder`` (states are touched on use)."""
    try:
        return max([folder.stat().st_mtime] + [p.stat().st_mtime for p in folder.iterdir()])
    except OSError:
        return time.time()  # vanishing meanwhile: another process is at work there


def read_epoch(root: str | os.PathLike) -> str | None:
    """The current epoch ("" before the first invalidation); None when it cannot be read
    now (a transient error must not look like a new epoch and wipe the states)."""
    try:
        return (Path(root) / EPOCH).read_text().strip()
    except FileNotFoundError:
        return ""
    except OSError:
        return None


def invalidate(root: str | os.PathLike) -> None:
    """Forget every stored state under ``root``: the files first (whatever else fails),
    then a new epoch for the processes that still hold some."""
    root = Path(root)
    if root.is_dir():
        for folder in root.iterdir():
            if folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    write_atomic(root / EPOCH, uuid.uuid4().hex.encode())


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # never an empty file under the final name after a crash
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
