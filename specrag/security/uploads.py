"""Take uploads out of the web server's temporary folder and leave nothing behind.

specrag itself parses uploads in memory (``Ingestor.ingest_bytes``): it never writes
an uploaded file to disk. A web framework may: Gradio stores each upload under
``GRADIO_TEMP_DIR`` before the handler runs. ``take_uploads(paths)`` reads those
files into memory and removes them at once (overwritten with zeros first, which
helps on ordinary file systems; copy-on-write and flash storage may keep old
blocks, so for real protection point ``GRADIO_TEMP_DIR`` at a tmpfs such as
``/dev/shm`` or an encrypted volume).

Whose upload it is: Gradio lets any caller name any file in its temporary folder as
an input, so one session could ingest (and so delete) what another uploaded.
``UploadRegistry`` remembers the owner of each upload (``bind``, done by the web gate
as the upload is answered); ``claim(paths, owner)`` hands over only the caller's own
files and raises ``PermissionDenied`` for any other; ``expired()`` gives back the
uploads nobody claimed within ``UPLOAD_TTL_S``, to be shredded. ``UPLOADS`` is the
process's registry.

Deliberately not here: parsing or size checks (``parsers``), Gradio itself, who an
owner is (the gate: the sign-in session, or the client address without users).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

from specrag.security.access import PermissionDenied
from specrag.types import IngestError

UPLOAD_TTL_S = 1800.0  # an upload nobody ingests is shredded after this long

_ZEROS = b"\0" * 65536


def take_upload(path: str | os.PathLike, max_bytes: int | None = None) -> tuple[str, bytes]:
    """``(file name, bytes)`` of an uploaded temporary file, which is then wiped and deleted."""
    p = Path(path)
    try:
        size = p.stat().st_size
        data = b"" if max_bytes is not None and size > max_bytes else p.read_bytes()
    except OSError as err:  # gone or unreadable: this file fails, the batch goes on
        raise IngestError(f"{p.name}: the upload could not be read "
                          f"({err.strerror or type(err).__name__})") from None
    finally:
        shred(p)
    if max_bytes is not None and size > max_bytes:
        raise IngestError(f"{p.name}: file too large ({size / 1048576:.1f} MB; the limit is "
                          f"{max_bytes / 1048576:.0f} MB)")
    return p.name, data


def take_uploads(paths, max_bytes: int | None = None) -> tuple[list[tuple[str, bytes]], list[str]]:
    """Read every upload into memory: ``(items, reasons)`` for the ones refused (too
    large, or unreadable); every path is shredded either way."""
    items, refused = [], []
    for path in paths or []:
        try:
            items.append(take_upload(path, max_bytes))
        except IngestError as err:
            refused.append(str(err))
    return items, refused


def shred(path: Path) -> None:
    """Overwrite a file with zeros, then delete it; a missing file is fine."""
    try:
        size = path.stat().st_size
        with open(path, "r+b", buffering=0) as fh:
            for done in range(0, size, len(_ZEROS)):
                fh.write(_ZEROS[:size - done])
            os.fsync(fh.fileno())
    except OSError:
        pass
    path.unlink(missing_ok=True)


class UploadRegistry:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self._owners: dict[str, tuple[str, float]] = {}  # real path -> (owner, bound at)

    def bind(self, path: str | os.PathLike, owner: str) -> None:
        # Gradio names an upload by its content's digest, so two callers sending the
        # same file get the same path: the later one owns it from then on
        with self._lock:
            self._owners[_key(path)] = (owner, self.clock())

    def owner_of(self, path: str | os.PathLike) -> str | None:
        with self._lock:
            hit = self._owners.get(_key(path))
        return hit[0] if hit else None

    def claim(self, paths, owner: str) -> list[str]:
        """``paths`` if every one is ``owner``'s upload (they are then forgotten), else
        ``PermissionDenied`` naming the first that is not, claiming none."""
        paths = [os.fspath(p) for p in paths or []]
        with self._lock:
            for path in paths:
                hit = self._owners.get(_key(path))
                if hit is None or hit[0] != owner:
                    raise PermissionDenied(f"{Path(path).name}: not a file this session "
                                           "uploaded; upload it again")
            for path in paths:
                self._owners.pop(_key(path), None)
        return paths

    def expired(self) -> list[Path]:
        """Forget and return the uploads older than ``UPLOAD_TTL_S`` (the caller shreds)."""
        cutoff = self.clock() - UPLOAD_TTL_S
        with self._lock:
            old = [k for k, (_, at) in self._owners.items() if at < cutoff]
            for k in old:
                del self._owners[k]
        return [Path(k) for k in old]


def _key(path: str | os.PathLike) -> str:
    return os.path.realpath(os.fspath(path))


UPLOADS = UploadRegistry()
