"""A disk that fills mid-ingest ends the ingest with one clear reason naming DATA_DIR, in
bounded time, and leaves nothing half-visible (issue 47: it used to stall for minutes
with no output, inside Chroma, holding the GIL).

DATA_DIR is a small tmpfs (mounting one needs root: skipped otherwise). The ingest runs
in a child process with the real embedder and Chroma, so a stall ends as a timeout, not
a hung test run; the disk is filled from the ingest's own progress callback once the
first file is in, as another program filling the disk would."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specrag.cli.main import main
from specrag.retrieval.store import Store
from tests.support.env import CACHE, ROOT, make_settings

NO_HANG_S = 300  # generous: embedding a few dozen chunks on 2 cores takes ~20 s
FILES = 6
WORD = "kestrelmigration"

CHILD = """
import json, sys
from pathlib import Path
from specrag.ingest import ingestor
from specrag.settings import Settings

data, docs, filler, mode = sys.argv[1:5]
ingestor.GROUP_CHUNKS = 1  # one file a group: the disk fills between two groups
if mode == "fill-after-check":  # the disk fills between the check and Chroma's write
    from specrag.retrieval import diskspace
    diskspace.check = lambda *args, **kwargs: None

def fill(path):
    with open(path, "wb", buffering=0) as fh:  # unbuffered: nothing left to flush at close
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    fh.write(b"\\0" * size)
            except OSError:
                pass

def progress(done, total, result):
    if done == 1 and mode != "no-fill":
        fill(filler)
    print(json.dumps({"source": result.source, "status": result.status,
                      "reason": result.reason}), flush=True)

settings = Settings().with_values(data_dir=data, cache_dir=sys.argv[5])
ingestor.Ingestor(settings).ingest([docs], on_progress=progress)
"""


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: this test needs a small tmpfs as DATA_DIR")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN), which this run lacks: "
                    + (made.stderr.strip() or f"exit {made.returncode}"))
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def write_docs(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for i in range(FILES):
        paras = [f"Section {j} of report {i}: the {WORD} count on ridge {j} rose by {i + j} "
                 "birds, and the survey team logged weather, wind and visibility each hour."
                 for j in range(12)]
        (docs / f"r{i}.md").write_text(f"# Report {i}\n\n" + "\n\n".join(paras), encoding="utf-8")
    return docs


def ingest_in_child(data: Path, docs: Path, filler: Path, mode: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(data), str(docs), str(filler),
                           mode, CACHE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=NO_HANG_S)  # a stall fails here instead of hanging the run
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def check_ended_on_the_disk(results: list[dict], data: Path, *also: str) -> None:
    assert [r["source"] for r in results] == [f"r{i}.md" for i in range(FILES)]
    assert results[0]["status"] == "added"
    where = f"no space left on DATA_DIR ({data.resolve()})"
    for r in results[1:]:  # the first file after the disk filled, then every later one
        assert r["status"] == "failed" and where in r["reason"], r
        assert "\n" not in r["reason"]
    assert all(word in results[1]["reason"] for word in also), results[1]
    assert all("not ingested" in r["reason"] for r in results[2:])


def check_nothing_half_visible_then_ingest_again(data: Path, docs: Path, filler: Path,
                                                embedder):
    filler.unlink()
    store = Store(make_settings(data))
    assert [d.source for d in store.documents("default")] == ["r0.md"]
    assert {c.source for c in store.visible_chunks("default")} == {"r0.md"}
    dense, keyword = store.query_both("default", WORD, embedder.encode_queries([WORD])[0], 50)
    assert keyword and {h.chunk.source for h in dense + keyword} == {"r0.md"}
    again = ingest_in_child(data, docs, filler, "no-fill")
    assert [r["status"] for r in again] == ["unchanged"] + ["added"] * (FILES - 1)


@pytest.mark.slow
def test_a_full_disk_ends_the_ingest_before_chroma_writes(small_disk, embedder, capsys):
    data, filler = small_disk / "data", small_disk / "filler"
    docs = write_docs(small_disk.parent)
    results = ingest_in_child(data, docs, filler, "fill")
    check_ended_on_the_disk(results, data, "MB free", "needed")
    # a delete writes too: refused with the same reason, before Chroma is asked
    assert main(["--data-dir", str(data), "docs", "delete", "r0.md"]) == 2
    assert f"no space left on DATA_DIR ({data.resolve()})" in capsys.readouterr().err
    check_nothing_half_visible_then_ingest_again(data, docs, filler, embedder)


@pytest.mark.slow
def test_a_disk_that_fills_under_chroma_stops_the_store_too(small_disk, embedder):
    data, filler = small_disk / "data", small_disk / "filler"
    docs = write_docs(small_disk.parent)
    results = ingest_in_child(data, docs, filler, "fill-after-check")
    check_ended_on_the_disk(results, data, "restart")
    check_nothing_half_visible_then_ingest_again(data, docs, filler, embedder)


def test_the_ending_reason_names_the_disk(tmp_path, monkeypatch):
    from specrag.retrieval import diskspace

    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 3_100_000)
    with pytest.raises(diskspace.NoSpace, match=r"no space left on DATA_DIR \(.*data\): "
                                                 r"3\.1 MB free, about 8\.\d MB needed"):
        diskspace.check(tmp_path / "data", ["x" * 1000])
    err = OSError(errno.ENOSPC, "No space left on device")
    assert diskspace.is_full(err, tmp_path, need=0)
