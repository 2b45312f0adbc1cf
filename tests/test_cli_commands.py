"""``specrag train``, ``calibrate`` and ``bench`` end to end, as a user runs them.

Each test runs ``python -m specrag ...`` in a subprocess (offline, the shared model cache,
a fresh data folder) and checks what it printed and wrote. The models are the real ones
(embedder, verifier, reranker); the generators are real clients (the OpenAI-compatible
client and the Anthropic SDK) talking to ``specrag.testing.mockapi`` on loopback, since
the ``fake`` backend exists only where ``specrag.testing`` is imported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specrag.testing.mockapi import MockAPI, first_sentence_answer
from tests.support.docs import write_handbook
from tests.support.env import CACHE, ROOT

pytestmark = pytest.mark.slow

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "ANONYMIZED_TELEMETRY": "False", "TOKENIZERS_PARALLELISM": "false"}


def specrag(data_dir: Path, *args: str, env: dict | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m specrag --data-dir DATA_DIR ARGS`` with only the settings given here."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPECRAG_")}
    full = {**clean, **OFFLINE, "SPECRAG_CACHE_DIR": CACHE, "SPECRAG_DATA_DIR": str(data_dir),
            **(env or {})}
    return subprocess.run([sys.executable, "-m", "specrag", "--data-dir", str(data_dir), *args],
                          cwd=ROOT, env=full, capture_output=True, text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:])
    return proc


# --------------------------------------------------------------------------- train


@pytest.fixture
def trained_verifier(tmp_path):
    """``specrag train verifier`` at the smallest scale; its fp32 twin is removed after.
    Without VitaminC: the index this runs against no longer lists BIG-bench 1.0.0."""
    out = tmp_path / "verifier"
    proc = ok(specrag(tmp_path / "data", "train", "verifier", "--scale", "0.003", "--out",
                      str(out), "--no-eval", "--without", "vitaminc", "--json", timeout=600))
    yield out, json.loads(proc.stdout)
    # the run keeps its fp32 ONNX and checkpoint (~260 MB) in the shared cache, one folder
    # per --out folder: a test's tmp folder is never reused, so remove it
    from specrag.training.sources import work_dir
    from tests.support.env import make_settings

    shutil.rmtree(work_dir(make_settings(tmp_path / "data"), "verifier", out), ignore_errors=True)


def test_train_verifier_writes_a_model_that_verify_loads(tmp_path, trained_verifier):
    out, report = trained_verifier
    assert report["out"] == str(out) and report["kind"] == "verifier"
    stats = report["train_stats"]
    assert stats["steps"] >= 1 and stats["pairs"] >= 4 * 8  # at least 8 pairs per source
    assert 0 < stats["final_loss_ema"] < 5
    assert set(report["train_pairs"]) == {"halueval-qa", "synthetic", "halueval-sum",
                                          "counterfactual", "paraphrase", "noisy"}
    assert report["train_config"]["seed"] == 0 and report["without"] == ["vitaminc"]
    assert "bigbench" not in report["data"] and "halueval" in report["data"]
    for name in ("model-int8.onnx", "tokenizer.json", "specrag.json", "README.md"):
        assert (out / name).is_file(), name
    assert json.loads((out / "specrag.json").read_text())["train_stats"] == stats
    assert "(not run)" in (out / "README.md").read_text()  # --no-eval

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"premise": "The sky is blue today.", "hypothesis": "The sky is blue."})
                     + "\n" + json.dumps({"premise": "Cats sleep.", "hypothesis": "Dogs fly."}) + "\n")
    rows = [json.loads(line) for line in
            ok(specrag(tmp_path / "data", "verify", "--model", str(out), "--pairs", str(pairs)))
            .stdout.splitlines()]
    assert [r["hypothesis"] for r in rows] == ["The sky is blue.", "Dogs fly."]
    assert all(0 <= r["score"] <= 1 for r in rows)

    # the trained folder as the configured verifier (what serving would load)
    context = tmp_path / "context.txt"
    context.write_text("Every employee receives 25 days of paid annual leave per year.\n")
    verdict = json.loads(ok(specrag(tmp_path / "data", "verify", "--context", str(context),
                                    "--answer", "Employees get 25 days of leave.", "--json",
                                    env={"SPECRAG_MODELS__VERIFIER": str(out)})).stdout)
    assert 0 <= verdict["score"] <= 1 and len(verdict["sentences"]) == 1
    assert verdict["sentences"][0]["best_chunk"] == 0

    # its calibrated head, fitted on dev pairs beside it, is what the verifier then applies
    head = json.loads(ok(specrag(tmp_path / "data", "train", "head", "--out", str(out),
                                 "--scale", "0.05", "--without", "vitaminc", "--json")).stdout)
    # the CE logit always; span and role features as far as they pull support down
    assert head["features"][0] == "logit" and (out / "head.json").is_file()
    assert set(head["features"]) <= {"logit", "missing", "any_missing", "displaced"}
    assert len(head["weights"]) == len(head["features"])
    assert all(w <= 0 for n, w in zip(head["features"], head["weights"]) if n != "logit")
    assert "counterfactual-vitc" not in head["fitted_on"] and "counterfactual 20" in head["fitted_on"]
    assert "vitaminc" not in head["fitted_on"]  # left out
    world = json.loads(ok(specrag(tmp_path / "data", "verify", "--context", str(context),
                                  "--answer", "Employees get 25 days of leave.", "--json",
                                  env={"SPECRAG_MODELS__VERIFIER": str(out)})).stdout)
    assert world["score"] != verdict["score"]  # the head rescored the same pair


# --------------------------------------------------------------------------- calibrate


def test_calibrate_writes_a_threshold_that_verify_then_uses(tmp_path):
    data = tmp_path / "data"
    # without VitaminC: the index this runs against no longer lists BIG-bench 1.0.0
    result = json.loads(ok(specrag(data, "calibrate", "--n", "10", "--target-precision", "0.8",
                                   "--without", "vitaminc", "--json")).stdout)
    assert result["drafts"] == 60  # 10 held-out drafts from each of the six sources left
    assert result["without"] == ["vitaminc"] and "vitaminc" not in result["sources"]
    assert len(result["sources"]) == 6
    assert result["target_met"] and result["target_precision"] == 0.8
    assert 0 < result["threshold"] < 1 and result["precision"] >= 0.8
    assert 0 < result["recall"] <= 1 and 10 <= result["accepted"] <= 60
    assert result["written_to"] == str(data / "specrag.yaml")
    assert f"threshold: {result['threshold']}" in (data / "specrag.yaml").read_text()

    shown = json.loads(ok(specrag(data, "config", "show", "--json")).stdout)
    assert shown["verify.threshold"] == {"value": result["threshold"],
                                         "from": f"file:{data / 'specrag.yaml'}"}
    context = tmp_path / "context.txt"
    context.write_text("Every employee receives 25 days of paid annual leave per year.\n")
    verdict = json.loads(ok(specrag(data, "verify", "--context", str(context), "--answer",
                                    "Employees receive 25 days of paid annual leave.",
                                    "--json")).stdout)
    assert verdict["threshold"] == result["threshold"]

    # out of reach: exit 1, the best precision reported, a dry run writes nothing
    before = (data / "specrag.yaml").read_text()
    proc = ok(specrag(data, "calibrate", "--n", "10", "--target-precision", "1.01", "--dry-run",
                      "--without", "vitaminc"), code=1)
    assert "TARGET NOT REACHED" in proc.stdout and "dry run: nothing written" in proc.stdout
    assert "(without vitaminc)" in proc.stdout
    assert (data / "specrag.yaml").read_text() == before


def test_an_unknown_source_to_leave_out_is_an_error_naming_the_known_ones(tmp_path):
    for args in (("train", "verifier", "--without", "vitamin-c"),
                 ("calibrate", "--without", "vitaminc", "--without", "vitamin-c")):
        proc = ok(specrag(tmp_path / "data", *args), code=2)
        assert "unknown source(s) to leave out: vitamin-c" in proc.stderr, proc.stderr
        assert "known: vitaminc, halueval-qa" in proc.stderr
    assert not (tmp_path / "data" / "specrag.yaml").exists()  # nothing calibrated


# --------------------------------------------------------------------------- bench


def test_bench_retrieval_on_a_small_sample(tmp_path):
    out = tmp_path / "out"
    result = json.loads(ok(specrag(tmp_path / "data", "bench", "retrieval", "--dataset", "squad",
                                   "--n", "3", "--max-passages", "20", "--out", str(out),
                                   "--json")).stdout)
    assert result["benchmark"] == "retrieval" and result["n"] == 3
    assert result["corpus"]["passages"] == 20 and result["corpus"]["capped"]
    assert set(result["backends"]) == {"onnx-int8", "onnx-fp32"}
    for backend in result["backends"].values():
        assert backend["ingest"]["documents"] == 20 and backend["ingest"]["failed"] == 0
        assert backend["quality"]["questions"] == 3
        assert 0 <= backend["quality"]["recall@10"] <= 1 and 0 <= backend["quality"]["mrr@50"] <= 1
        assert backend["latency"]["queries"] == 3 and backend["latency"]["p50_ms"] > 0
    assert result["comparison"]["encode_speedup_int8_vs_fp32"] > 0
    assert json.loads((out / "retrieval.json").read_text())["comparison"] == result["comparison"]
    assert "recall@10" in (out / "retrieval.md").read_text()


QUESTIONS = [
    {"question": "How many weeks of parental leave do new parents get?",
     "answer": ["16 weeks"], "gold_source": "leave.pdf"},
    {"question": "Which encryption must laptops use?", "answer": "full-disk encryption",
     "gold_source": "security.html"},
    {"question": "When is the office kitchen cleaned?", "answer": ["every Friday afternoon"],
     "gold_source": "notes.txt"},
]
WRONG = "Laptops must be painted purple every Tuesday by the janitor. [1]"


def draft_answer(messages) -> str:
    """The mock draft model: grounded, except for the encryption question."""
    m = re.search(r"^Question: (.*)$", messages[-1]["content"], re.M)
    return WRONG if m and "encryption" in m.group(1) else first_sentence_answer(messages)


def test_bench_e2e_on_my_own_questions_with_mock_models(tmp_path):
    write_handbook(tmp_path / "corpus")
    dataset = tmp_path / "questions.jsonl"
    dataset.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out = tmp_path / "out"
    with MockAPI(responder=draft_answer) as draft, MockAPI() as heavy:
        env = {"SPECRAG_GENERATION__DRAFT": "openai:mock-draft",
               "SPECRAG_GENERATION__OPENAI_BASE_URL": f"{draft.url}/v1",
               "OPENAI_API_KEY": "sk-test-draft",
               "SPECRAG_GENERATION__ANTHROPIC_BASE_URL": heavy.url,
               "ANTHROPIC_API_KEY": "sk-test-heavy"}
        args = ("bench", "e2e", "--dataset", str(dataset), "--corpus", str(tmp_path / "corpus"),
                "--n", "3", "--heavy", "anthropic", "--out", str(out), "--json")
        result = json.loads(ok(specrag(tmp_path / "data", *args, env=env)).stdout)
        asked = (len(draft.requests), len(heavy.requests))
        # a second run finds every answer in rows.jsonl: nothing is asked again
        again = json.loads(ok(specrag(tmp_path / "data", *args, env=env)).stdout)
        assert (len(draft.requests), len(heavy.requests)) == asked

    meta = result["meta"]
    assert (meta["n"], meta["draft"], meta["heavy"]) == (3, "openai:mock-draft",
                                                         "anthropic:claude-sonnet-4-6")
    assert meta["corpus_files"] == 5 and meta["corpus_chunks"] >= 5
    assert meta["policies"] == ["heavy-only", "draft-only", "lazy", "eager", "routed"]
    # routed: each question drafted or sent straight to Claude, and said which
    assert 0.0 <= result["policies"]["routed"]["drafted_share"] <= 1.0
    p = result["policies"]
    assert all(p[k]["n"] == 3 and p[k]["gold_retrieved"] == 1.0 for k in p)
    # every heavy-only answer is the gold sentence, paid for at Claude's price
    assert p["heavy-only"]["contains"] == 1.0 and p["heavy-only"]["cost_usd"] > 0
    assert p["heavy-only"]["acceptance_rate"] is None
    assert p["draft-only"]["heavy_tokens"] == 0 and p["draft-only"]["cost_usd"] == 0
    # lazy: two drafts accepted, the wrong one escalated to the heavy model
    assert p["lazy"]["acceptance_rate"] == pytest.approx(2 / 3)
    assert p["lazy"]["contains"] == 1.0 and p["lazy"]["accepted_precision"] == 1.0
    assert 0 < p["lazy"]["heavy_tokens"] < p["heavy-only"]["heavy_tokens"]
    assert 0 < p["lazy"]["cost_usd"] < p["heavy-only"]["cost_usd"]
    assert p["draft-only"]["contains"] == pytest.approx(2 / 3)
    # drafts: 3 per policy that always drafts, and one per question routed to the draft
    routed_drafts = round(p["routed"]["drafted_share"] * 3)
    assert asked[0] == 9 + routed_drafts and asked[1] >= 3 + 1
    assert again["policies"] == result["policies"]

    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 15 and {(r["id"], r["policy"]) for r in rows} == {
        (str(i), pol) for i in range(3) for pol in meta["policies"]}
    for name in ("e2e.json", "e2e.md", "e2e.html"):
        assert (out / name).is_file(), name
    (out / "e2e.md").unlink()
    proc = ok(specrag(tmp_path / "data", "bench", "report", str(out / "e2e.json")))
    assert "wrote" in proc.stdout and "lazy" in (out / "e2e.md").read_text()
