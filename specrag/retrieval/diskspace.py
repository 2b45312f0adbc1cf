"""Room on DATA_DIR for a write, asked before the embedded Chroma store is written.

Chroma's embedded store does not come back from a full disk within a process: the write
that hits it fails ("Failed to apply logs to the metadata segment"), and a later call,
a read included, may wait forever on the lock that failed transaction left, holding
Python's GIL, so no thread of the process runs again (measured: an ingest on a full
3 MB tmpfs printed nothing for over 4 minutes). So nothing may reach that state:

- ``check(data_path, texts)`` raises ``NoSpace`` when a group of chunks would not fit
  with room to spare (``needed``: the store took ~10 bytes per byte of chunk text and
  ~1.7 KB per vector; the keyword index and SQLite's journals come on top; ``RESERVE``
  stays free), so the ingestor stops before Chroma is asked;
- ``is_full(err, data_path, need)`` tells a failure that a full disk caused (``ENOSPC``,
  SQLite's "database or disk is full", or any error while less than the write needed
  is free: Chroma's errors do not name the cause), and ``mark_broken`` makes the ``Store`` refuse every later Chroma call of this
  process with that reason: restarting after freeing space is what rolls the failed
  transaction back (the next process to open the file does it).

The message names the disk: "no space left on DATA_DIR (/srv/specrag): 3.1 MB free, about
9.4 MB needed".

Deliberately not here: what the ingest does with the refusal (``ingest.ingestor``
ends the whole ingest: every later group would fail the same way), a Chroma server's
disk (``store.chroma_url``: its errors come back over HTTP and leave this process alone).
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from specrag.types import IngestError, SpecragError

BYTES_PER_TEXT_BYTE = 12  # Chroma (log, metadata, full-text index) + keyword index, measured ~10
BYTES_PER_CHUNK = 4096  # the vector in the log and the index, its rows
RESERVE = 8 * 1024 * 1024  # left free: SQLite's rollback journals, the index's metadata file
_FULL = (errno.ENOSPC, errno.EDQUOT)
_broken: dict[str, str] = {}  # Chroma folder -> why its client may not be called again


class NoSpace(IngestError):
    """DATA_DIR has no room for a write; ``str(err)`` names the folder and the sizes."""


def free_bytes(path: Path) -> int:
    path = Path(path).resolve()
    while not path.exists() and path != path.parent:  # DATA_DIR may not exist yet
        path = path.parent
    return shutil.disk_usage(path).free


def needed(texts) -> int:
    """Bytes a group of chunks with these texts may take on disk, with the reserve."""
    texts = list(texts)
    return (BYTES_PER_TEXT_BYTE * sum(len(t.encode("utf-8")) for t in texts)
            + BYTES_PER_CHUNK * len(texts) + RESERVE)


def message(data_path: Path, free: int, need: int | None = None) -> str:
    text = f"no space left on DATA_DIR ({Path(data_path).resolve()}): {free / 1e6:.1f} MB free"
    return text + (f", about {need / 1e6:.1f} MB needed" if need is not None else "")


def check(data_path: Path, texts=()) -> None:
    """Raise ``NoSpace`` unless chunks with ``texts`` fit on DATA_DIR with room to spare."""
    free, need = free_bytes(data_path), needed(texts)
    if free < need:
        raise NoSpace(message(data_path, free, need))


def is_full(err: BaseException, data_path: Path, need: int = RESERVE) -> bool:
    """Did a full disk cause this failure of a write that needed ``need`` bytes?

    Chroma's own errors do not say so, and a failed transaction gives its space back:
    with less than ``need`` free, the disk is taken to be the cause."""
    for e in (err, err.__cause__, err.__context__):
        if isinstance(e, OSError) and e.errno in _FULL:
            return True
        if e is not None and "database or disk is full" in str(e):
            return True
    return free_bytes(data_path) < need


def mark_broken(chroma_dir: Path, reason: str) -> str:
    """Refuse every later call to the embedded Chroma store in ``chroma_dir``."""
    why = (f"{reason}; the vector store stopped writing mid-way: free space on it and "
           "restart specrag (nothing half-written is shown)")
    _broken[str(Path(chroma_dir).resolve())] = why
    return why


def refuse_if_broken(chroma_dir: Path) -> None:
    if why := _broken.get(str(Path(chroma_dir).resolve())):
        raise SpecragError(why)
