"""Crash safety: kill -9 real processes mid-write, restart, and check what survived.

The ingest test runs a child Python process that ingests a batch of many files with the
real int8 embedder and kills it with SIGKILL (1) at the worst moment, half-way through
storing a group's chunks, (2) at a random moment after some files are done, and (3)
half-way through *replacing* documents. After each kill a new process checks that no
partially ingested document is visible (every visible document's chunk count equals its
registry count), recovers, and re-running the batch completes it without duplicates.
The same is done for the usage ledger and the audit store (SQLite).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.env import ROOT

pytestmark = pytest.mark.slow

INGEST_CHILD = r"""
import sys, time
import specrag.ingest.ingestor as ingest
from specrag.retrieval.store import Store
from tests.support.env import make_settings

data_dir, docs, stall_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
ingest.GROUP_CHUNKS = 24  # many small groups: many commits to crash between
if stall_at:
    real, calls = Store.add_chunks, []

    def add_half_then_stall(self, collection, chunks, vectors):
        calls.append(1)
        if len(calls) != stall_at:
            return real(self, collection, chunks, vectors)
        half = len(chunks) // 2
        real(self, collection, chunks[:half], vectors[:half])
        print("HALF", flush=True)
        time.sleep(120)  # killed here: half the chunks stored, nothing committed

    Store.add_chunks = add_half_then_stall
ing = ingest.Ingestor(make_settings(data_dir))
ing.ingest([docs], "batch",
           on_progress=lambda d, t, r: print("FILE", r.status, r.source, flush=True))
print("DONE", flush=True)
"""

CHECKER = r"""
import json, sys
from collections import Counter
from specrag.retrieval.store import Store
from tests.support.env import make_settings

def state(store):
    chunks, docs = store._pair("batch")
    registry = {d.doc_id: d for d in store.documents("batch")}
    rows = chunks.get(include=["metadatas"])
    metas = rows["metadatas"]
    total = len(metas)
    hits = []
    if total:
        probe = chunks.get(limit=1, include=["embeddings"])["embeddings"][0]
        hits = store.query("batch", [list(probe)], total)[0]
    visible = Counter(h.chunk.doc_id for h in hits)
    committed = {(i, d.version) for i, d in registry.items()}
    keys = Counter((m["doc_id"], m["version"], m["index"]) for m in metas)
    return {"registry": {i: d.chunks for i, d in registry.items()},
            "versions": {d.source: d.version for d in registry.values()},
            "visible": dict(visible), "total": total,
            "busy": len(docs.get(where={"busy": 1})["ids"]),
            "orphans": sum((m["doc_id"], m["version"]) not in committed for m in metas),
            "duplicates": sum(n - 1 for n in keys.values() if n > 1),
            "hidden_in_results": sum((h.chunk.doc_id, h.chunk.version) not in committed
                                     for h in hits)}

store = Store(make_settings(sys.argv[1])).warm_up()
before = state(store)
store.recover("batch")
print(json.dumps({"before": before, "after": state(store)}))
"""

SENTENCES = ["The {i}th policy covers remote work equipment for staff in office {i}.",
             "Managers approve requests for team {i} within five working days.",
             "Receipts for item {i} must be scanned and attached to the claim.",
             "Security reviews of system {i} happen every quarter with the risk team.",
             "Training module {i} is mandatory for new employees in their first month."]


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def write_batch(folder: Path, n: int = 60, edition: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        body = " ".join(SENTENCES[j % 5].format(i=i * 7 + j) for j in range(40))
        (folder / f"policy-{i:03d}.txt").write_text(f"Policy {i}{edition}. {body}\n")


def run_child(data: Path, docs: Path, stall_at: int = 0, kill_after=None) -> list[str]:
    """Run the ingest child; ``kill_after(lines) -> bool`` decides when to SIGKILL it."""
    proc = subprocess.Popen([sys.executable, "-c", INGEST_CHILD, str(data), str(docs),
                             str(stall_at)], cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    deadline = time.time() + 400
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if kill_after is not None and kill_after(lines):
                os.kill(proc.pid, signal.SIGKILL)
                break
            assert time.time() < deadline, "ingest child too slow"
    finally:
        if proc.poll() is None and kill_after is None:
            proc.wait(timeout=400)
        proc.kill()
        proc.wait(timeout=60)
    if kill_after is not None:
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, lines[-3:])
    return lines


def check(data: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHECKER, str(data)], cwd=ROOT, env=env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for when in ("before", "after"):  # no partially ingested document is ever visible
        s = result[when]
        assert s["visible"] == {i: n for i, n in s["registry"].items() if n}, when
        assert s["hidden_in_results"] == 0 and s["duplicates"] == 0, (when, s)
    after = result["after"]  # recovery removed every leftover
    assert after["busy"] == 0 and after["orphans"] == 0
    assert after["total"] == sum(after["registry"].values())
    return result


def test_kill_9_during_batch_ingest_then_recover_and_rerun(tmp_path):
    data, docs = tmp_path / "data", tmp_path / "docs"
    write_batch(docs)

    # 1. the worst moment: half of a group's chunks stored, nothing committed
    lines = run_child(data, docs, stall_at=3, kill_after=lambda ls: ls[-1] == "HALF")
    done = {ln.split()[2] for ln in lines if ln.startswith("FILE added")}
    assert done, "some files were committed before the kill"
    state = check(data)
    assert state["before"]["orphans"] > 0 and state["before"]["busy"] > 0  # a real partial write
    assert set(state["after"]["versions"]) == done

    # 2. a random moment after some more files are done
    rng = random.Random(os.getpid())
    lines = run_child(data, docs, kill_after=lambda ls: ls[-1].startswith("FILE added")
                      and (time.sleep(rng.uniform(0, 1.0)) or True))
    state = check(data)
    assert len(state["after"]["versions"]) >= len(done)

    # 3. re-running the batch completes it, without duplicates
    lines = run_child(data, docs)
    assert lines[-1] == "DONE" and not [ln for ln in lines if ln.startswith("FILE failed")]
    state = check(data)["after"]
    assert len(state["versions"]) == 60 and state["duplicates"] == 0
    old_versions = state["versions"]

    # 4. kill -9 half-way through replacing changed documents: the old versions stay whole
    write_batch(docs, n=20, edition=" (revised)")
    run_child(data, docs, stall_at=1, kill_after=lambda ls: ls[-1] == "HALF")
    state = check(data)
    assert state["before"]["orphans"] > 0
    assert state["after"]["versions"] == old_versions
    lines = run_child(data, docs)
    statuses = [ln.split()[1] for ln in lines if ln.startswith("FILE")]
    assert statuses.count("replaced") == 20 and statuses.count("unchanged") == 40
    final = check(data)["after"]
    assert len(final["versions"]) == 60 and final["duplicates"] == 0
    assert sum(final["versions"][f"policy-{i:03d}.txt"] != old_versions[f"policy-{i:03d}.txt"]
               for i in range(60)) == 20


SQLITE_CHILD = r"""
import sys, time
kind, path = sys.argv[1], sys.argv[2]
if kind == "ledger":
    from specrag.resilience.attempts import Attempt
    from specrag.observability.ledger import Ledger, scope
    led = Ledger(path, {"claude-sonnet-4-6": [3.0, 15.0]}).warm_up()
    n = 0
    while True:
        with scope("s1", "hr"):
            n += led.record_attempts("heavy", [Attempt("anthropic", "claude-sonnet-4-6",
                                     outcome="ok", input_tokens=100, output_tokens=10)] * 5)
        print("ROWS", n, flush=True)
else:
    from specrag.observability.audit import AuditStore
    store = AuditStore(path)
    n = 0
    while True:
        i = store.add({"ts": time.time(), "collection": "hr", "question": f"q{n}",
                       "context": "[]", "final": "answer " * 50, "tier": "draft"})
        store.score(i, 0.9, 0.8)
        n += 1
        print("ROWS", n, flush=True)
"""

SQLITE_CHECK = r"""
import json, sqlite3, sys
kind, path = sys.argv[1], sys.argv[2]
db = sqlite3.connect(path)
ok = db.execute("PRAGMA integrity_check").fetchone()[0]
table = "usage" if kind == "ledger" else "samples"
n = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
bad = 0 if kind == "ledger" else db.execute(
    "SELECT COUNT(*) FROM samples WHERE question IS NULL OR final IS NULL").fetchone()[0]
db.close()
if kind == "ledger":
    from specrag.observability.ledger import Ledger
    led = Ledger(path).warm_up()
    spent = led.spent(session="s1")
    from specrag.resilience.attempts import Attempt
    led.record_attempts("heavy", [Attempt("anthropic", "claude-sonnet-4-6")])
    after = len(led.rows())
else:
    from specrag.observability.audit import AuditStore
    store = AuditStore(path)
    store.add({"ts": 0.0, "question": "after restart", "final": "x"})
    spent, after = store.summary()["samples"], len(store.recent(10**6))
print(json.dumps({"integrity": ok, "rows": n, "bad": bad, "spent": spent, "after": after}))
"""


@pytest.mark.parametrize("kind", ["ledger", "audit"])
def test_kill_9_while_writing_the_ledger_and_audit_store(tmp_path, kind):
    path = tmp_path / f"{kind}.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", SQLITE_CHILD, kind, str(path)], cwd=ROOT,
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reported = 0
    try:
        for line in proc.stdout:
            reported = int(line.split()[1])
            if reported >= 300:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert reported >= 300, proc.stderr.read()[-2000:]
    out = subprocess.run([sys.executable, "-c", SQLITE_CHECK, kind, str(path)], cwd=ROOT,
                         env=env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["integrity"] == "ok" and res["bad"] == 0
    assert res["rows"] >= reported  # every write reported as done survived the kill
    if kind == "ledger":
        assert res["rows"] % 5 == 0  # a batch of attempts is all there or not at all
        assert res["after"] == res["rows"] + 1
    else:
        assert res["after"] == res["rows"] + 1
