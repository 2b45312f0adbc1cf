"""Take uploads out of the web server's temporary folder and leave nothing behind.

specrag itself parses uploads in memory (``Ingestor.ingest_bytes``): it never writes
an uploaded file to disk. A web framework may: Gradio stores each upload under
``GRADIO_TEMP_DIR`` before the handler runs. ``take_uploads(paths)`` reads those
files into memory and removes them at once (overwritten with zeros first, which
helps on ordinary file systems; copy-on-write and flash storage may keep old
blocks, so for real protection point ``GRADIO_TEMP_DIR`` at a tmpfs such as
``/dev/shm`` or an encrypted volume).

Deliberately not here: parsing or size checks (``parsers``), Gradio itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from specrag.types import IngestError

_ZEROS = b"\0" * 65536


def take_upload(path: str | os.PathLike, max_bytes: int | None = None) -> tuple[str, bytes]:
    """``(file name, bytes)`` of an uploaded temporary file, which is then wiped and deleted."""
    p = Path(path)
    try:
        size = p.stat().st_size
        data = b"" if max_bytes is not None and size > max_bytes else p.read_bytes()
    finally:
        shred(p)
    if max_bytes is not None and size > max_bytes:
        raise IngestError(f"{p.name}: file too large ({size / 1048576:.1f} MB; the limit is "
                          f"{max_bytes / 1048576:.0f} MB)")
    return p.name, data


def take_uploads(paths, max_bytes: int | None = None) -> tuple[list[tuple[str, bytes]], list[str]]:
    """Read every upload into memory: ``(items, reasons)`` for the ones refused on size."""
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
