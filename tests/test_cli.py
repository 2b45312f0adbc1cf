"""The command line end to end, in real subprocesses (console entry point and -m)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.docs import write_bad_files, write_handbook
from tests.support.env import CACHE

pytestmark = pytest.mark.slow


@pytest.fixture
def cli(tmp_path):
    exe = shutil.which("specrag", path=os.path.dirname(sys.executable)) or "specrag"

    def run(*args, module=False, check=None):
        # the environment as it is at the call (a test may set SPECRAG_* first)
        env = {**os.environ, "SPECRAG_DATA_DIR": str(tmp_path / "data"), "SPECRAG_CACHE_DIR": CACHE}
        cmd = [sys.executable, "-m", "specrag", *args] if module else [exe, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        if check is not None:
            assert proc.returncode == check, proc.stderr
        return proc
    return run


def test_ingest_search_docs_delete(tmp_path, cli):
    write_handbook(tmp_path / "docs")
    write_bad_files(tmp_path / "docs")
    proc = cli("ingest", str(tmp_path / "docs"), "--json", check=1)  # some files failed
    out = json.loads(proc.stdout)
    status = {r["source"]: r["status"] for r in out["results"]}
    assert status["leave.pdf"] == "added" and status["locked.pdf"] == "failed"
    assert out["chunks_added"] >= 5

    proc = cli("search", "parental leave weeks", "-k", "3", "--json", check=0)
    hits = json.loads(proc.stdout)["hits"]
    assert len(hits) == 3 and hits[0]["source"] == "leave.pdf" and hits[0]["page"] == 2

    human = cli("search", "disk encryption", "-k", "2", module=True, check=0).stdout
    assert human.splitlines()[0].startswith("2 hits") and "security.html" in human

    queries = tmp_path / "q.txt"
    queries.write_text("expense deadline\n\non-call handover\n")
    lines = cli("search", "--queries", str(queries), "-k", "1", check=0).stdout.splitlines()
    assert [json.loads(l)["hits"][0]["source"] for l in lines] == ["expenses.docx", "oncall.md"]

    listed = json.loads(cli("docs", "list", "--json", check=0).stdout)
    assert len(listed) == 5
    cli("docs", "delete", "notes.txt", check=0)
    assert "notes.txt" not in cli("docs", "list", check=0).stdout
    err = cli("docs", "delete", "notes.txt", check=1).stderr
    assert "no document 'notes.txt'" in err
    again = json.loads(cli("ingest", str(tmp_path / "docs" / "leave.pdf"), "--json",
                           check=0).stdout)
    assert again["results"][0]["status"] == "unchanged"


def test_errors_are_one_clear_line(tmp_path, cli):
    proc = cli("search", "anything", "-c", "nothing-here", check=2)
    assert proc.stderr.strip() == ("specrag: error: collection 'nothing-here' does not exist: "
                                   "ingest documents into it first")
    proc = cli("ingest", str(tmp_path / "missing.pdf"), check=1)
    assert "missing.pdf: file not found" in proc.stdout
    env_err = subprocess.run([sys.executable, "-m", "specrag", "search", "x"],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "SPECRAG_RETRIEVAL__TOP_K": "lots"})
    assert env_err.returncode == 2 and "retrieval.top_k" in env_err.stderr
    assert "Traceback" not in env_err.stderr


def test_ask_streams_answers_and_audits_like_the_app(tmp_path, cli, monkeypatch):
    # the 0.5B Qwen as the heavy model too keeps CI fast; every answer is audited; the
    # precision-0.90 threshold, as in test_engine_real (at 0.937 the right draft escalates
    # and the 0.5B heavy model then abstains)
    for key, value in {"SPECRAG_MODELS__HEAVY": "manifest:qwen2.5-coder-0.5b-instruct",
                       "SPECRAG_VERIFY__THRESHOLD": "0.59",
                       "SPECRAG_GENERATION__DRAFT_MAX_TOKENS": "48",
                       "SPECRAG_GENERATION__HEAVY_MAX_TOKENS": "48",
                       "SPECRAG_AUDIT__SAMPLE_RATE": "1.0"}.items():
        monkeypatch.setenv(key, value)
    # the whole test handbook, as test_engine_real: with leave.pdf's two chunks alone the
    # 0.5B models said "The documents do not say." on an AVX-512/AMX Xeon (greedy decoding
    # differs across CPUs' kernels), while the Zen 3 EPYC answered 16 weeks
    write_handbook(tmp_path / "docs")
    cli("ingest", str(tmp_path / "docs"), check=0)
    q = "How many weeks of parental leave do new parents receive?"
    answer = json.loads(cli("ask", q, "--json", check=0).stdout)
    assert "16" in answer["answer"] and answer["tier"] in ("draft", "heavy")
    assert answer["verdict"]["threshold"] == 0.59 and answer["usage"][0]["backend"] == "llama-server"
    assert answer["timings_ms"]["total"] >= answer["timings_ms"]["draft"] > 0
    streamed = cli("ask", q, "--policy", "heavy-only", check=0).stdout
    assert "heavy model answering from the top" in streamed
    assert "answer from the heavy tier (heavy-only)" in streamed and "total" in streamed
    audit = json.loads(cli("audit", "--json", check=0).stdout)
    assert audit["summary"]["samples"] == 2  # `specrag ask` audits, as the app does
    assert {r["tier"] for r in audit["recent"]} >= {"heavy"}

