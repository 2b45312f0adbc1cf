"""Rows written in numbered parts that a restart resumes: ``part-0001.jsonl.gz``, ...

``Parts(folder, size)`` appends one JSON row at a time to the open part
``part-NNNN.jsonl`` (flushed after each row, so a kill loses at most the row in
flight); when it holds ``size`` rows it is gzipped to ``part-NNNN.jsonl.gz`` (written
aside and renamed, with no timestamp in the header, so the same rows give the same
bytes) and the next part opens. ``done`` is the set of row ids in every part, the
open one included: a restart skips them and continues the open part. A line cut by a
kill is dropped when the folder is opened. ``manifest(extra)`` writes
``manifest.json``: rows and counts per dataset, kind and label over the finished parts
(the ones to commit), the open part's size, and ``extra`` (model, settings hash,
command).

Deliberately not here: what a row holds (``checker_data``) and which rows to make.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from pathlib import Path

_PART = re.compile(r"^part-(\d{4,})\.jsonl(\.gz)?$")


class Parts:
    def __init__(self, folder: Path, size: int = 500):
        if size < 1:
            raise ValueError(f"part size must be at least 1, got {size}")
        self.folder, self.size = Path(folder), size
        self.folder.mkdir(parents=True, exist_ok=True)
        self.done: set[str] = set()
        for path in self.finished():
            self.done |= {r["id"] for r in _read(path)}
        opened = self._open_parts()
        for path in opened[:-1]:  # only the last may be open; an older one is finished
            self._finish(path)
        self.current = opened[-1] if opened else self._path(self._next_number(), gz=False)
        rows = _read(self.current) if self.current.exists() else []
        if self.current.exists():  # rewrite without a line cut by a kill
            self._write_plain(self.current, rows)
        self.count = len(rows)
        self.done |= {r["id"] for r in rows}
        if self.count >= self.size:
            self._roll()

    def _path(self, number: int, gz: bool) -> Path:
        return self.folder / f"part-{number:04d}.jsonl{'.gz' if gz else ''}"

    def finished(self) -> list[Path]:
        return sorted(p for p in self.folder.iterdir() if (m := _PART.match(p.name)) and m[2])

    def _open_parts(self) -> list[Path]:
        return sorted(p for p in self.folder.iterdir() if (m := _PART.match(p.name)) and not m[2])

    def _next_number(self) -> int:
        numbers = [int(_PART.match(p.name)[1]) for p in self.finished() + self._open_parts()]
        return max(numbers, default=0) + 1

    def append(self, row: dict) -> None:
        if row["id"] in self.done:
            raise ValueError(f"row {row['id']} is already in {self.folder}")
        with open(self.current, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
        self.done.add(row["id"])
        self.count += 1
        if self.count >= self.size:
            self._roll()

    def _roll(self) -> None:
        self._finish(self.current)
        self.current, self.count = self._path(self._next_number(), gz=False), 0

    def _finish(self, path: Path) -> None:
        rows = _read(path)
        gz = path.with_name(path.name + ".gz")
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as fh:
            fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode())
        tmp = gz.with_name(gz.name + ".tmp")
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, gz)
        path.unlink()

    @staticmethod
    def _write_plain(path: Path, rows: list[dict]) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                       encoding="utf-8")
        os.replace(tmp, path)

    def rows(self, finished_only: bool = True):
        for path in self.finished() + ([] if finished_only else self._open_parts()):
            yield from _read(path)

    def manifest(self, extra: dict | None = None) -> dict:
        counts: dict[str, dict] = {"dataset": {}, "kind": {}, "right": {}, "dataset/kind": {}}
        total = 0
        for r in self.rows():
            total += 1
            right = "right" if r.get("right") else "wrong"
            for field, key in (("dataset", r["dataset"]), ("kind", r["kind"]), ("right", right)):
                counts[field][key] = counts[field].get(key, 0) + 1
            cell = counts["dataset/kind"].setdefault(f"{r['dataset']}/{r['kind']}", {})
            cell[right] = cell.get(right, 0) + 1
        out = {"rows": total, "parts": [p.name for p in self.finished()], "part_size": self.size,
               "open_part": {"file": self.current.name, "rows": self.count},
               "counts": {k: dict(sorted(v.items())) for k, v in counts.items()}, **(extra or {})}
        tmp = self.folder / "manifest.json.tmp"
        tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.folder / "manifest.json")
        return out


def _read(path: Path) -> list[dict]:
    """Rows of a part; a line cut by a kill (the last, unparsable) is dropped."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows
