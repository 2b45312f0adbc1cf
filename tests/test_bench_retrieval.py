"""A tiny end-to-end run of the retrieval benchmark: real models, real Chroma."""

import json
import os

import pytest

from specrag.bench import retrieval as bench
from specrag.settings import Settings

pytestmark = pytest.mark.slow

CACHE = os.environ.get("SPECRAG_TEST_CACHE", "/work/main/.cache")


def make_settings(tmp_path) -> Settings:
    return Settings().with_values(**{"data_dir": str(tmp_path / "home"), "cache_dir": CACHE})


def test_tiny_run_writes_sane_metrics(tmp_path):
    out = tmp_path / "out"
    result = bench.run(make_settings(tmp_path), "halueval-qa", n=20, scale=0,
                       out_dir=str(out), progress=False, max_passages=300)
    saved = json.loads((out / "retrieval.json").read_text())
    assert saved["dataset"] == "halueval-qa" and saved["n"] == 20
    assert saved["corpus"]["passages"] == 300 and saved["corpus"]["capped"]
    assert saved["corpus"]["chunks"] >= 300
    assert saved["machine"]["cpu_count"] >= 1 and saved["machine"]["onnxruntime"]
    assert "family" in saved["machine"]["cpu"] and saved["machine"]["sqlite"]
    assert set(saved["backends"]) == {"onnx-int8", "onnx-fp32"}
    for b, m in saved["backends"].items():
        q = m["quality"]
        assert 0 <= q["recall@1"] <= q["recall@3"] <= q["recall@10"] <= q["recall@50"] <= 1, b
        assert 0 <= q["mrr@50"] <= 1 and q["questions"] == 20
        assert q["recall@50"] >= 0.8, "gold passages are in a 300-passage corpus"
        assert m["ingest"]["chunks_per_s"] > 0 and m["ingest"]["failed"] == 0
        assert m["encode"]["passages_per_s"] > 0
        assert 0 < m["latency"]["search_p50_ms"] <= m["latency"]["p50_ms"]
    assert (saved["backends"]["onnx-int8"]["ingest"]["chunks"]
            == saved["backends"]["onnx-fp32"]["ingest"]["chunks"])
    cmp_ = saved["comparison"]
    assert cmp_["encode_speedup_int8_vs_fp32"] > 0 and abs(cmp_["recall@10_diff_points"]) <= 100
    targets = {t["target"]: t for t in saved["targets"]}
    assert len(targets) == 4
    assert targets["top-50 query p50 <= 20 ms at 100k chunks"]["passed"] is None
    assert saved["scale"] is None
    assert "specrag bench retrieval" in saved["command"] and "--backends" not in saved["command"]
    hy = saved["hybrid"]
    assert hy["backend"] == "onnx-int8"
    assert hy["dense"]["quality"] == saved["backends"]["onnx-int8"]["quality"]
    q = hy["hybrid"]["quality"]
    assert 0 <= q["recall@1"] <= q["recall@3"] <= q["recall@10"] <= q["recall@50"] <= 1
    assert q["recall@50"] >= 0.8 and q["questions"] == 20
    for mode in ("dense", "hybrid"):
        lat = hy[mode]["latency"]
        assert 0 < lat["search_p50_ms"] <= lat["p50_ms"] and lat["queries"] == 20
    assert hy["diff_points"]["recall@10"] == round(
        100 * (q["recall@10"] - hy["dense"]["quality"]["recall@10"]), 2)
    md = (out / "retrieval.md").read_text()
    assert md == bench.to_markdown(result)
    assert "| metric | onnx-int8 | onnx-fp32 |" in md and "| recall@10 |" in md
    assert "## Targets" in md and "## Dense vs hybrid (onnx-int8" in md
    assert "| recall@3 | " in md.split("## Dense vs hybrid")[1]


def test_padding_is_synthetic_and_marked(tmp_path):
    out = tmp_path / "out"
    result = bench.run(make_settings(tmp_path), "squad", n=10, scale=400,
                       backends=("onnx-int8",), out_dir=str(out), progress=False,
                       max_passages=100)
    sc = result["scale"]
    assert sc["chunks"] == 400 and sc["synthetic_chunks"] == 400 - sc["real_chunks"]
    assert sc["latency"]["p50_ms"] > 0
    assert "SYNTHETIC" in (out / "retrieval.md").read_text()
    assert result["comparison"] == {}  # one backend: nothing to compare
    assert result["command"].endswith("--backends onnx-int8")
    from specrag.retrieval.store import Store

    bench_settings = make_settings(tmp_path).with_values(data_dir=str(out / "data"))
    chunks = Store(bench_settings)._pair("bench-squad-int8")[0]
    got = chunks.get(where={"synthetic": True}, include=["metadatas"])
    assert len(got["ids"]) == sc["synthetic_chunks"]
    assert all(m["source"].startswith("synthetic/") for m in got["metadatas"])


def test_cli_parser():
    from specrag.cli import bench as bench_cli
    from specrag.cli.main import build_parser

    p = build_parser()
    args = p.parse_args(["bench", "retrieval", "--dataset", "squad", "--n", "5", "--scale",
                         "1000", "--max-passages", "50", "--out", "x", "--json",
                         "--backends", "onnx-int8"])
    assert (args.dataset, args.n, args.scale, args.max_passages, args.out, args.json,
            args.backends) == ("squad", 5, 1000, 50, "x", True, "onnx-int8")
    assert p.parse_args(["bench", "retrieval"]).backends == "onnx-int8,onnx-fp32"
    assert args.func is bench_cli.cmd_retrieval
    with pytest.raises(SystemExit):
        p.parse_args(["bench", "retrieval", "--dataset", "nope"])
